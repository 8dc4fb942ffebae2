"""The Redis keys of notifications; the only place that builds them.

- ``ff:notifications:unread:{42}``  STRING ``<version>:<count>``: the unread
  notifications of user 42 as of the database's ``UnreadCounter`` version
  (the header reads it in one GET; while it is missing or Redis is down the
  database's counter row answers; a write never replaces a newer version;
  ``reconcile_notifications`` repairs it)
"""

from __future__ import annotations

from django.conf import settings

# A counter nobody changed or read for this long goes (an account that left);
# its next read sets it again from the database row.
UNREAD_TTL_SECONDS = 30 * 86_400


def unread_key(user_id: int) -> str:
    """STRING ``<version>:<count>``: the unread notifications count of ``user_id``."""
    return f"{settings.REDIS_KEY_PREFIX}notifications:unread:{{{int(user_id)}}}"


def unread_value(version: int, count: int) -> str:
    """The stored form of ``count`` unread at ``version``."""
    return f"{int(version)}:{int(count)}"


def unread_count_of(value: object) -> int | None:
    """The count of a stored value (None: absent or not one ``unread_value`` made)."""
    if not isinstance(value, (bytes, str)):
        return None
    version, _, count = (value.decode() if isinstance(value, bytes) else value).partition(":")
    return int(count) if version.isdigit() and count.isdigit() else None

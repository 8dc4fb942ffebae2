"""The Redis keys of notifications; the only place that builds them.

- ``ff:notifications:unread:{42}``  STRING the number of unread notifications
  of user 42 (a mirror of the database's count: the header reads it in O(1);
  the database answers while it is missing or Redis is down, and
  ``reconcile_notifications`` repairs it)
"""

from __future__ import annotations

from django.conf import settings

# A counter not written for this long expires; the next read counts again.
UNREAD_TTL_SECONDS = 7 * 86_400


def unread_key(user_id: int) -> str:
    """STRING: the unread notifications count of ``user_id``."""
    return f"{settings.REDIS_KEY_PREFIX}notifications:unread:{{{int(user_id)}}}"

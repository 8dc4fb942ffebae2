"""The Redis keys of notifications; the only place that builds them.

- ``ff:notifications:unread:{42}``  STRING the number of unread notifications
  of user 42 (a mirror of the database's count: the header reads it in O(1);
  the database answers while it is missing or Redis is down; it expires a
  minute after it was counted, and ``reconcile_notifications`` repairs it)
"""

from __future__ import annotations

from django.conf import settings

# A counter lives this long after it was counted (increments keep its expiry), so
# the next read counts again: an increment that found no counter while a reader
# was counting (the reader then stores a count one short) is made good within
# this time, at one COUNT per reader per minute at most.
UNREAD_TTL_SECONDS = 60


def unread_key(user_id: int) -> str:
    """STRING: the unread notifications count of ``user_id``."""
    return f"{settings.REDIS_KEY_PREFIX}notifications:unread:{{{int(user_id)}}}"

"""The Redis key layout of the account cache; the only place that builds its keys.

- ``ff:users:account:{42}``  STRING user 42's username and display name
  (``b"<username length> <username><display name>"``, ``users.account_cache``); only active
  accounts. The user's hash tag, like every per-user key.

- ``ff:users:version:{42}``  STRING a token naming the current version of user 42's row: set to a
  new token after every write of the row, and by a reader that finds none (``users.account_rows``).

A forgotten entry (the account was renamed, deactivated or deleted) holds ``ACCOUNT_TOMBSTONE``
for ``ACCOUNT_TOMBSTONE_SECONDS``: readers then read the database and write nothing back until it
expires. ``REDIS_KEY_PREFIX`` is read at call time. Design: docs/architecture.md#the-account-cache.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings

# How long (seconds) a cached account lives without being written again; one filled from the
# database replica's answer lives ACCOUNT_REPLICA_FILL_SECONDS.
ACCOUNT_CACHE_TTL_SECONDS = 86400
# How long (seconds) a forgotten entry refuses fills. A reader fills from a
# database read made before it writes; a read from before the change that
# arrives after this long would write the old state back.
ACCOUNT_TOMBSTONE_SECONDS = 60
ACCOUNT_TOMBSTONE = b"~"
ACCOUNT_REPLICA_FILL_SECONDS = ACCOUNT_TOMBSTONE_SECONDS
# How long (seconds) an account's version token lives without a write or a reader's renewal: a
# reader that finds none sets a new one, so a token is never used twice.
ACCOUNT_VERSION_SECONDS = 86400


def prefix() -> str:
    """The configured key prefix (``REDIS_KEY_PREFIX``), e.g. ``"ff:"``."""
    return str(settings.REDIS_KEY_PREFIX)


def account_key(user_id: int) -> str:
    """STRING: the cached display fields of active account ``user_id`` (username, display name)."""
    return f"{prefix()}users:account:{{{int(user_id)}}}"


def account_keys(user_ids: Iterable[int]) -> list[str]:
    """``account_key`` of each of ``user_ids``, in order (the prefix read once: a page builds dozens)."""
    head = f"{prefix()}users:account:"
    return [f"{head}{{{int(user_id)}}}" for user_id in user_ids]


def account_key_parts() -> tuple[str, str]:
    """``(head, tail)`` with ``account_key(n) == head + str(n) + tail``, for a script that builds
    the keys of the ids it read."""
    return f"{prefix()}users:account:{{", "}"


def account_version_key(user_id: int) -> str:
    """STRING: the token of the current version of account ``user_id``'s row."""
    return f"{prefix()}users:version:{{{int(user_id)}}}"

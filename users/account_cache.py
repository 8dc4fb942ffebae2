"""The account cache: what a row shows of an account (username, display name), in Redis, filled on a miss.

Keys are ``users.redis_keys``' (``account_key``); only active accounts are cached. A reader's miss
fills (``SET NX``, from the page's own read: a replica's answer kept only as long as a tombstone
lives), so does the fan-out for a note's author (read on the primary); a rename,
(de)activation or deletion forgets the entry with a tombstone (the outbox's ``feed.author_cache``),
and a reader's fill reads the accounts again afterwards (``forget_gone_fills``).
Design: docs/architecture.md#the-account-cache.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import TypeGuard

import redis
from django.db import DEFAULT_DB_ALIAS, router

from core.cluster import Pipe, pipeline

from . import redis_keys
from .models import User
from .selectors import users_by_id
from .serializers import ShownAccount

# Values are plain UTF-8, not JSON: "<username length in bytes> <username><display name>".


def account_value(user: User | ShownAccount) -> bytes:
    """The cache's value for ``user``: its username's length in bytes, a space, the username and the display name."""
    username = user.username.encode()
    return b"%d %s%s" % (len(username), username, user.display_name.encode())


def parse_account_value(value: bytes) -> tuple[str, str]:
    """``(username, display_name)`` of an ``account_value``.

    :raises ValueError: not an account value.
    """
    length, _, rest = value.partition(b" ")
    size = int(length)
    return rest[:size].decode(), rest[size:].decode()


# Parsed values by account and bytes, per process: the bytes are the value,
# so one parse (and one ShownAccount) serves every page that meets the same
# account with the same names. Bounded: emptied when full.
PARSED_MAX = 20_000
_parsed: dict[tuple[int, bytes], ShownAccount] = {}


def parsed_account(user_id: int, value: bytes) -> ShownAccount:
    """The ``ShownAccount`` of account ``user_id`` whose cached value is ``value`` (parsed once per process).

    :raises ValueError: not an account value.
    """
    found = _parsed.get((user_id, value))
    if found is None:
        if len(_parsed) >= PARSED_MAX:
            _parsed.clear()
        found = _parsed[(user_id, value)] = ShownAccount(user_id, *parse_account_value(value))
    return found


def is_cached(value: bytes | None) -> TypeGuard[bytes]:
    """Whether a read of an entry found an account (not a miss, not a tombstone)."""
    return value is not None and value != redis_keys.ACCOUNT_TOMBSTONE


def queue_account_fill(
    pipe: Pipe, users: Iterable[User | ShownAccount], *, seconds: int = redis_keys.ACCOUNT_CACHE_TTL_SECONDS
) -> int:
    """Queue ``SET NX`` of the entries of ``users`` (active accounts) on ``pipe``, to live ``seconds``:
    no entry or tombstone is overwritten. Returns the number of commands queued."""
    queued = 0
    for user in users:
        pipe.set(redis_keys.account_key(user.pk), account_value(user), ex=seconds, nx=True)
        queued += 1
    return queued


def queue_account_forget(pipe: Pipe, user_ids: Iterable[int]) -> int:
    """Queue the tombstones of accounts ``user_ids`` on ``pipe``; returns the number of commands queued."""
    queued = 0
    for user_id in user_ids:
        pipe.set(redis_keys.account_key(user_id), redis_keys.ACCOUNT_TOMBSTONE, ex=redis_keys.ACCOUNT_TOMBSTONE_SECONDS)
        queued += 1
    return queued


def forget_gone_fills(client: redis.Redis, user_ids: Collection[int]) -> int:
    """After a fill of the entries of ``user_ids``: unlink those whose account is no longer active,
    read as the page reads (one query; nothing when ``user_ids`` is empty). A fill read before a
    deletion can land after the purge unlinked the tombstone, and would show the names for a day.

    :returns: the number of entries unlinked.
    :raises: Redis errors (``REDIS_ERRORS``).
    """
    if not user_ids:
        return 0
    active = users_by_id(list(user_ids))
    gone = sorted(user_id for user_id in user_ids if user_id not in active)
    if gone:
        pipe = pipeline(client)
        for user_id in gone:  # one key per command: on a cluster the keys are in different slots
            pipe.unlink(redis_keys.account_key(user_id))
        pipe.execute()
    return len(gone)


def accounts_from_values(client: redis.Redis, user_ids: Sequence[int], values: Sequence[bytes | None]) -> dict[int, ShownAccount]:
    """The active accounts among ``user_ids``, given their entries as one read found them (``values``,
    in order: bytes, None for a miss, the tombstone): the cached ones parsed, the rest read as the
    page reads (the replica where it may), the misses among them filled (``SET NX``, one round trip;
    for ``ACCOUNT_REPLICA_FILL_SECONDS`` only when the replica answered).

    :returns: ``{id: ShownAccount}``; an id that is not an active account is left out.
    :raises: Redis errors of the fill (``REDIS_ERRORS``).
    """
    found: dict[int, ShownAccount] = {}
    missing: list[int] = []
    tombstoned: set[int] = set()
    for user_id, value in zip(user_ids, values):
        if is_cached(value):
            found[user_id] = parsed_account(user_id, value)
        else:
            missing.append(user_id)
            if value is not None:
                tombstoned.add(user_id)
    if missing:
        from_replica = router.db_for_read(User) != DEFAULT_DB_ALIAS
        loaded = users_by_id(missing)
        found.update((user_id, ShownAccount.of(user)) for user_id, user in loaded.items())
        fill = [user for user_id, user in loaded.items() if user_id not in tombstoned]
        if fill:
            pipe = pipeline(client)
            # A replica's answer may be older than a change whose tombstone has expired: it is kept
            # no longer than a tombstone lives, so the cache is never staler than the replica for long.
            seconds = redis_keys.ACCOUNT_REPLICA_FILL_SECONDS if from_replica else redis_keys.ACCOUNT_CACHE_TTL_SECONDS
            queue_account_fill(pipe, fill, seconds=seconds)
            pipe.execute()
            forget_gone_fills(client, [user.pk for user in fill])
    return found

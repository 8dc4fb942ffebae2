"""The signed-in account's row, kept per process under its version token in Redis.

Every write of an account's row changes the account's version token (``users.outbox``, after
commit). A request reads the token with its session (the same round trip: ``users.sessions``) and
makes the account from this process's copy of the row read under that token; otherwise it reads
the row from the primary and keeps it under the token read before. A copy serves at most
``KEEP_SECONDS``, and while Redis cannot be read every request reads the row, as without this.
Design: docs/architecture.md#the-signed-in-account.
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import redis
from django.contrib.auth import SESSION_KEY
from django.db import router

from core.cluster import lua, pipeline
from core.parsing import id_or_none
from core.redis import REDIS_ERRORS, breaker_node, delete_if_equal, failures_seen, get_redis, redis_failed, redis_or_database

from . import redis_keys
from .models import User
from .selectors import account_by_id, loaded_names

# How long (seconds) a kept row serves without being read again, whatever its token: bounds a
# change whose new token never reached Redis (its after-commit work skipped while the committing
# process's breaker was open, until the drain applies it; a write lost to a failover; a write
# made outside Django) for a process that kept the row before.
KEEP_SECONDS = 10.0
# Rows kept and session keys known per process; each table is emptied when full.
KEPT_MAX = 10_000
SESSIONS_MAX = 50_000


@dataclass(frozen=True, slots=True)
class _Kept:
    token: bytes
    until: float  # time.monotonic()
    failures: int  # core.redis.failures_seen() when kept
    alias: str
    values: tuple[Any, ...]


_kept: dict[int, _Kept] = {}
# Session key -> the account it signed in (a sign-in always makes a new key): a request whose key is
# known reads the account's token with the session.
_session_accounts: dict[str, int] = {}
# The token this request's session read brought, ``(user_id, token, core.redis.failures_seen()
# before the read)``; None: none.
_token_read: ContextVar[tuple[int, bytes, int] | None] = ContextVar("followfeed_account_token_read", default=None)


def seen_written(user_id: int, seen_at: Any) -> None:
    """This process's kept row of ``user_id`` has ``last_seen_at`` = ``seen_at`` (written now, a field
    whose write changes no token: ``User.UNVERSIONED_FIELDS``), so its next requests see it."""
    kept = _kept.get(user_id)
    if kept is not None:
        values = list(kept.values)
        values[loaded_names().index("last_seen_at")] = seen_at
        _kept[user_id] = dataclasses.replace(kept, values=tuple(values))


# Keys of the signed-in account that higher apps read with its session, as its token is: their
# builders (``read_with_session``, registered at start-up), and what this request's read brought.
_companions: list[Callable[[int], str]] = []
_values_read: ContextVar[dict[str, Any] | None] = ContextVar("followfeed_values_read_with_session", default=None)


def read_with_session(key_of: Callable[[int], str]) -> None:
    """Read ``key_of(account id)`` with the session of every account this process knows (one
    ``MGET``, ``users.sessions``); a request then finds it with ``value_read_with_session``."""
    if key_of not in _companions:
        _companions.append(key_of)


def companion_keys(user_id: int) -> list[str]:
    """The keys ``read_with_session`` asked for account ``user_id``, in order."""
    return [key_of(user_id) for key_of in _companions]


def values_read(values: dict[str, Any] | None) -> None:
    """Record what this request's session read brought of ``companion_keys`` (None: nothing)."""
    _values_read.set(values)


def value_read_with_session(key: str) -> tuple[bool, Any]:
    """``(True, the value or None for none)`` when this request's session read brought ``key``
    (and nothing in the request changed it since: ``forget_value_read``), else ``(False, None)``."""
    values = _values_read.get()
    if values is None or key not in values:
        return False, None
    return True, values[key]


def forget_value_read(key: str) -> None:
    """This request changed ``key``: later reads in it go to Redis."""
    values = _values_read.get()
    if values is not None:
        values.pop(key, None)


def forget_kept() -> None:
    """Empty this process's kept rows and known sessions (tests)."""
    _kept.clear()
    _session_accounts.clear()
    _token_read.set(None)
    _values_read.set(None)


def session_account(session_key: str | None) -> int | None:
    """The account that session ``session_key`` signed in, when this process has read it before."""
    return None if session_key is None else _session_accounts.get(session_key)


def learn_session(session_key: str | None, data: dict[str, Any]) -> None:
    """Remember which account the session ``session_key`` (its loaded ``data``) signed in."""
    user_id = id_or_none(data.get(SESSION_KEY))
    if session_key is None or user_id is None:
        return
    if len(_session_accounts) >= SESSIONS_MAX:
        _session_accounts.clear()
    _session_accounts[session_key] = user_id


def token_read(brought: tuple[int, bytes, int] | None) -> None:
    """Record ``(user_id, token, failures)``, the token of an account that this request's session
    read brought and ``core.redis.failures_seen()`` taken before that read (None: it brought none);
    the next ``signed_in_account`` of that account uses it."""
    _token_read.set(brought)


def request_started() -> None:
    """Forget what an earlier request in this thread read with its session (a thread serves many
    requests, and one that loads no session, a bearer token's, must not find them)."""
    _token_read.set(None)
    _values_read.set(None)


def signed_in_account(user_id: int) -> User | None:
    """The account ``user_id`` with every field, active or not (None: no such account), as
    ``users.selectors.account_by_id`` reads it: from this process's copy while the account's token
    is the one it was read under, else from the primary (kept for the next request).

    A fresh ``User`` each call: a request may change its own.
    """
    brought = _token_read.get()
    _token_read.set(None)
    token: bytes | None
    if brought is not None and brought[0] == user_id:
        _, token, failures = brought
    else:
        # Taken before the token and the row are read: a failure met after them (a write's token
        # change skipped) makes the row untrusted.
        failures = failures_seen()
        token = _read_token(user_id)
    if token is None:
        return account_by_id(user_id)  # Redis unreadable: as if nothing were kept
    kept = _kept.get(user_id)
    # A Redis failure in this process since the row was kept, or since this request's token was
    # read, may have stopped a write's token change.
    if (
        kept is not None
        and kept.token == token
        and time.monotonic() < kept.until
        and kept.failures == failures == failures_seen()
    ):
        return User.from_db(kept.alias, loaded_names(), kept.values)
    alias = router.db_for_write(User)
    # The primary's row, read after the token: a write that commits later changes the token.
    user = account_by_id(user_id, alias=alias)
    if user is None:
        _forget_token(user_id, token)  # no such account (deleted): no key of it stays
    else:
        if len(_kept) >= KEPT_MAX:
            _kept.clear()
        values = tuple(getattr(user, name) for name in loaded_names())
        # Kept with the failures seen before its token and row were read (see above).
        _kept[user_id] = _Kept(token=token, until=time.monotonic() + KEEP_SECONDS, failures=failures, alias=alias, values=values)
    return user


def token_of(client: redis.Redis, user_id: int, found: bytes | None) -> bytes:
    """The token of account ``user_id``: ``found`` (what a read of its key answered), or when it was
    missing a new one set now (``_VERSION_LUA``: a concurrent reader's or writer's wins), so no token
    is ever used twice. :raises: ``REDIS_ERRORS``."""
    if found is not None:
        return found
    token = lua(_VERSION_LUA)(
        keys=[redis_keys.account_version_key(user_id)],
        args=[secrets.token_hex(8), redis_keys.ACCOUNT_VERSION_SECONDS],
        client=client,
    )
    return _as_bytes(token)


# The token, or a new one set when there is none (atomic: a concurrent reader's or writer's wins).
_VERSION_LUA = """
local token = redis.call('GET', KEYS[1])
if token then return token end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return ARGV[1]
"""


def _forget_token(user_id: int, token: bytes) -> None:
    """Delete account ``user_id``'s token if it is still ``token``, best effort."""
    key = redis_keys.account_version_key(user_id)
    try:
        delete_if_equal(get_redis(), key, token)
    except REDIS_ERRORS as exc:
        redis_failed(exc, breaker_node(key))


def _read_token(user_id: int) -> bytes | None:
    """The token of account ``user_id`` read on its own (None: Redis unavailable or not ready)."""
    key = redis_keys.account_version_key(user_id)

    def from_redis(client: redis.Redis) -> bytes | None:
        found = client.get(key)
        return token_of(client, user_id, None if found is None else _as_bytes(found))

    return redis_or_database(from_redis, lambda: None, keys=[key])


def versions_change(*, user_ids: Sequence[int], gone: Sequence[int] = ()) -> None:
    """Give each of ``user_ids`` a new token (its row was written) and delete the tokens of
    ``gone`` (deleted accounts), in one round trip. :raises: ``REDIS_ERRORS``."""
    if not user_ids and not gone:
        return
    pipe = pipeline(get_redis())
    for user_id in user_ids:
        pipe.set(redis_keys.account_version_key(user_id), secrets.token_hex(8), ex=redis_keys.ACCOUNT_VERSION_SECONDS)
    for user_id in gone:
        pipe.delete(redis_keys.account_version_key(user_id))
    pipe.execute()


def _as_bytes(value: object) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()

"""Sessions kept in the database and read from Redis: Django's ``cached_db`` backend, made to ride
out a Redis outage (``SESSION_ENGINE = "core.sessions"``).

The database stays the sessions' source of truth: every save and delete goes there first, so an
ended session is gone for the streams' checks and for the next read that misses the cache. A
request reads its session from the ``default`` cache (one Redis GET) instead of the
``django_session`` table, and a miss reads the table and fills the cache.

While the breaker is open (``core.redis``), sessions are read and written in the database only;
a Redis error on the way opens the breaker and the call goes on in the database. A key whose
cached copy could not be written or deleted is deleted from the cache by the next call of this
process that reaches Redis; a copy lives at most ``SESSION_CACHE_SECONDS`` whatever happens.
docs/architecture.md#sessions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.sessions.backends.base import VALID_KEY_CHARS
from django.contrib.sessions.backends.cached_db import SessionStore as CachedDatabaseStore
from django.contrib.sessions.backends.db import SessionStore as DatabaseStore
from django.core.cache.backends.base import BaseCache

from .redis import REDIS_ERRORS, breaker_node, redis_available, redis_failed, redis_succeeded

T = TypeVar("T")

# Keys whose cached copy this process failed to write or delete, or skipped while the breaker was
# open: the copy Redis holds, if any, may be older than the row (a write that timed out may even
# land later). Deleted at the next cache call that reaches Redis. Bounded: past it, a copy's
# lifetime bounds how stale it can be.
_unsure_keys: set[str] = set()
UNSURE_KEYS_MAX = 10_000


class SessionStore(CachedDatabaseStore):
    """Django's ``cached_db`` store whose cache calls never fail a request (see the module)."""

    _cache: BaseCache  # cached_db's own, made in its __init__ (django-stubs leave it out)

    def load(self) -> dict[str, Any]:
        """The session's data: the cached copy, else the database's row (cached for next time), else {}."""
        data = self._cached_data()
        if data is not None:
            return dict(data)
        row = self._get_session_from_db()  # type: ignore[attr-defined]
        # The column's collation matches a key in any letter case: only the key itself is the session.
        if row is None or row.session_key != self.session_key:
            return {}
        data = self.decode(row.session_data)
        written = self._cache_write(data, self.get_expiry_age(expiry=row.expire_date))
        if written and not DatabaseStore.exists(self, row.session_key):
            # Signed out between the read and the write above: that sign-out's delete may have run
            # before the write, so the copy just written is taken back.
            self._cache_call(lambda: self._cache.delete(self.cache_key), writes=True)
            return {}
        return dict(data)

    def _cached_data(self) -> dict[str, Any] | None:
        """The cached copy of the session's data (None: none, or Redis unavailable)."""
        return self._cache_call(lambda: self._cache.get(self.cache_key))

    def _validate_session_key(self, key: str | None) -> bool:
        # Only keys of the alphabet Django makes them from (lower case and digits): another
        # spelling of a key would reach its row through the collation but be cached apart.
        return key is not None and len(key) >= 8 and set(key) <= _KEY_CHARACTERS

    def exists(self, session_key: str) -> bool:
        # Asked only when a new key is made: the database alone knows every key.
        return bool(DatabaseStore.exists(self, session_key))

    def save(self, must_create: bool = False) -> None:
        """Write the session to the database, then its copy to the cache (not for a new key: its
        first data, as a sign-in's change of key copies it, is replaced before the answer goes)."""
        DatabaseStore.save(self, must_create)
        if not must_create:
            self._cache_write(self._session, self.get_expiry_age())  # type: ignore[attr-defined]

    def delete(self, session_key: str | None = None) -> None:
        """Delete the session (this store's, or ``session_key``) from the database, then from the cache."""
        DatabaseStore.delete(self, session_key)
        key = session_key if session_key is not None else self.session_key
        if key is not None:
            self._cache_call(lambda: self._cache.delete(self.cache_key_prefix + key), key, writes=True)

    def _cache_write(self, data: dict[str, Any], expiry_seconds: int) -> bool:
        """Whether the copy was sent to Redis (not skipped for the breaker, not failed)."""
        seconds = min(expiry_seconds, settings.SESSION_CACHE_SECONDS)

        def write() -> bool:
            self._cache.set(self.cache_key, data, seconds)
            return True

        return bool(self._cache_call(write, writes=True))

    def _cache_call(self, call: Callable[[], T], session_key: str | None = None, *, writes: bool = False) -> T | None:
        """``call()``'s answer, or None without calling it while the breaker of the key's master
        is open or when it fails (which opens that breaker); ``writes``: the key is then unsure."""
        key = session_key if session_key is not None else self.session_key
        if key is None:
            return None
        node = breaker_node(self._cache.make_key(self.cache_key_prefix + key))
        if not redis_available(node):
            if writes:
                _remember_unsure(key)
            return None
        try:
            self._delete_unsure_keys()
            answer = call()
        except REDIS_ERRORS as exc:
            redis_failed(exc, node)
            if writes:
                _remember_unsure(key)
            return None
        redis_succeeded(node)
        return answer

    def _delete_unsure_keys(self) -> None:
        """Delete the cached copies of the unsure keys (see ``_unsure_keys``), in one call. :raises: ``REDIS_ERRORS``."""
        if not _unsure_keys:
            return
        keys = list(_unsure_keys)
        self._cache.delete_many([self.cache_key_prefix + key for key in keys])
        _unsure_keys.difference_update(keys)

    # The streams (ASGI) read sessions too: the same calls, in a thread.
    async def aload(self) -> dict[str, Any]:
        return await sync_to_async(self.load)()

    async def aexists(self, session_key: str) -> bool:
        return await sync_to_async(self.exists)(session_key)

    async def asave(self, must_create: bool = False) -> None:
        await sync_to_async(self.save)(must_create)

    async def adelete(self, session_key: str | None = None) -> None:
        await sync_to_async(self.delete)(session_key)


_KEY_CHARACTERS = frozenset(VALID_KEY_CHARS)


def _remember_unsure(key: str) -> None:
    if len(_unsure_keys) < UNSURE_KEYS_MAX:
        _unsure_keys.add(key)

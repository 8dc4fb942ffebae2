"""A Django cache that uses Redis and falls back to the database while Redis is down.

The ``limits`` cache (``core.limits``): Redis while the breaker is closed, the database cache
otherwise, so an outage neither switches limits off nor refuses everything (a switch may let
through twice a rate once; docs/behaviours.md#input-limits-and-headers). ``CountingDatabaseCache``
increments atomically and keeps the first hit's expiry, unlike Django's database cache.
"""

from __future__ import annotations

import base64
import pickle
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from django.core.cache import BaseCache, caches
from django.core.cache.backends.db import DatabaseCache
from django.db import connections, router, transaction
from django.utils import timezone

from .redis import REDIS_ERRORS, redis_available, redis_failed, redis_succeeded

T = TypeVar("T")

# The lifetime of a count started again by ``FallbackCache.incr`` (seconds):
# longer than any rate's window; the key names its window, so a count is
# never read after that window ends.
RESTARTED_COUNT_SECONDS = 2 * 86_400


class CountingDatabaseCache(DatabaseCache):
    """Django's database cache with an ``incr`` that counts exactly under concurrency."""

    def incr(self, key: Any, delta: int = 1, version: Any = None) -> int:
        """Add ``delta`` to the integer at ``key``, keeping its expiry.

        :returns: the new value.
        :raises ValueError: no live value at ``key`` (as every Django cache does).
        """
        cache_key = self.make_and_validate_key(key, version=version)
        database = router.db_for_write(self.cache_model_class)
        connection = connections[database]
        quote = connection.ops.quote_name
        table, key_column, value_column = quote(self.cache_model_class._meta.db_table), quote("cache_key"), quote("value")
        # The row lock makes concurrent increments wait for each other (SQLite
        # has no row locks: its writers take turns on the whole file).
        lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
        with transaction.atomic(using=database), connection.cursor() as cursor:
            cursor.execute(f"SELECT {value_column}, {quote('expires')} FROM {table} WHERE {key_column} = %s{lock}", [cache_key])
            row = cursor.fetchone()
            if row is None or _as_aware(row[1]) < timezone.now():
                raise ValueError(f"Key '{key}' not found")
            value = pickle.loads(base64.b64decode(connection.ops.process_clob(row[0]).encode())) + delta  # noqa: S301 - a value this cache pickled, as Django's DatabaseCache does
            stored = base64.b64encode(pickle.dumps(value, self.pickle_protocol)).decode("latin1")
            cursor.execute(f"UPDATE {table} SET {value_column} = %s WHERE {key_column} = %s", [stored, cache_key])
        return int(value)


def _as_aware(moment: datetime) -> datetime:
    # The column holds UTC; MariaDB hands it back naive.
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment, UTC)


class FallbackCache(BaseCache):
    """``OPTIONS``: ``primary`` (a Redis cache's alias) and ``fallback`` (a database cache's alias)."""

    def __init__(self, location: str, params: dict[str, Any]) -> None:
        super().__init__(params)
        options = params.get("OPTIONS", {})
        self.primary_alias = str(options.get("primary", "default"))
        self.fallback_alias = str(options.get("fallback", "database"))

    def _call(self, operation: Callable[[BaseCache], T]) -> T:
        if redis_available():
            try:
                value = operation(caches[self.primary_alias])
                redis_succeeded()
                return value
            except REDIS_ERRORS as exc:
                redis_failed(exc)
        return operation(caches[self.fallback_alias])

    def add(self, key: Any, value: Any, timeout: Any = None, version: Any = None) -> bool:
        return self._call(lambda cache: cache.add(key, value, timeout, version))

    def get(self, key: Any, default: Any = None, version: Any = None) -> Any:
        return self._call(lambda cache: cache.get(key, default, version))

    def set(self, key: Any, value: Any, timeout: Any = None, version: Any = None) -> None:
        self._call(lambda cache: cache.set(key, value, timeout, version))

    def touch(self, key: Any, timeout: Any = None, version: Any = None) -> bool:
        return self._call(lambda cache: cache.touch(key, timeout, version))

    def delete(self, key: Any, version: Any = None) -> bool:
        return self._call(lambda cache: cache.delete(key, version))

    def incr(self, key: Any, delta: int = 1, version: Any = None) -> int:
        """Add ``delta`` to the count at ``key`` in the store answering now; a key missing there (the
        stores switched, or the key was culled) starts again at ``delta`` instead of failing.

        :returns: the new count.
        """

        def count(cache: BaseCache) -> int:
            try:
                return int(cache.incr(key, delta, version))
            except ValueError:
                if cache.add(key, delta, RESTARTED_COUNT_SECONDS, version):
                    return delta
                return int(cache.incr(key, delta, version))

        return self._call(count)

    def has_key(self, key: Any, version: Any = None) -> bool:
        return self._call(lambda cache: cache.has_key(key, version))

    def clear(self) -> None:
        self._call(lambda cache: cache.clear())

"""A Django cache that uses Redis and falls back to the database while Redis is down.

The abuse limits (``core.limits``) count in a cache. Counted only in Redis,
an outage would switch every limit off (or, failing closed, refuse every
request); so the ``limits`` cache is this one: the Redis cache while the
circuit breaker is closed, Django's database cache otherwise. Counts made
during an outage live in the database until they expire.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.core.cache import BaseCache, caches

from .redis import REDIS_ERRORS, redis_available, redis_failed, redis_succeeded

T = TypeVar("T")


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
        return self._call(lambda cache: cache.incr(key, delta, version))

    def has_key(self, key: Any, version: Any = None) -> bool:
        return self._call(lambda cache: cache.has_key(key, version))

    def clear(self) -> None:
        self._call(lambda cache: cache.clear())

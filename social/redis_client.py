"""The one way followfeed code reaches Redis, with a circuit breaker.

``get_redis()`` returns the redis-py client behind django-redis (a real
Redis, or the embedded fakeredis). ``redis_available()`` is the breaker:
after a connection error or timeout every caller skips Redis for
``REDIS_CIRCUIT_OPEN_SECONDS`` and uses the database, so a page never
waits for one timeout per read while Redis is down (the pattern in
Nygard, *Release It!*, ch. 5 "Circuit Breaker").
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import redis
from django.conf import settings
from django_redis import get_redis_connection

logger = logging.getLogger(__name__)

# Errors that mean "Redis is not reachable right now"; anything else is a bug.
REDIS_ERRORS: tuple[type[BaseException], ...] = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.BusyLoadingError,
    redis.exceptions.ReadOnlyError,
    redis.exceptions.ClusterDownError if hasattr(redis.exceptions, "ClusterDownError") else redis.exceptions.ConnectionError,
    OSError,
)

_lock = threading.Lock()
_open_until = 0.0


def get_redis() -> Any:
    """Return the raw redis-py client (``redis.Redis``) of the default cache.

    :returns: a client whose replies are bytes.
    """
    return get_redis_connection("default")


def redis_available() -> bool:
    """Whether callers should try Redis now (the breaker is closed).

    :returns: False during ``REDIS_CIRCUIT_OPEN_SECONDS`` after a failure.
    """
    return time.monotonic() >= _open_until


def redis_failed(exc: BaseException) -> None:
    """Open the breaker after a Redis failure ``exc`` and log it once."""
    global _open_until
    with _lock:
        already_open = time.monotonic() < _open_until
        _open_until = time.monotonic() + settings.REDIS_CIRCUIT_OPEN_SECONDS
    if not already_open:
        logger.warning("Redis unavailable, reads fall back to the database: %s", exc)


def redis_reset_breaker() -> None:
    """Close the breaker (tests, and after a successful health check)."""
    global _open_until
    with _lock:
        _open_until = 0.0


def intersect_sets(client: Any, keys: list[str]) -> set[bytes]:
    """SINTER of ``keys``, the one place a command spans two users' keys.

    On Redis Cluster (``REDIS_CLUSTER=true``) the keys live on different
    slots, so the members are read per key in one pipeline and intersected
    here instead.

    :returns: the members common to every key, as bytes.
    """
    if not keys:
        return set()
    if getattr(settings, "REDIS_CLUSTER", False):
        pipe = client.pipeline(transaction=False)
        for key in keys:
            pipe.smembers(key)
        replies = pipe.execute()
        result = set(replies[0])
        for reply in replies[1:]:
            result &= set(reply)
        return result
    return set(client.sinter(keys))

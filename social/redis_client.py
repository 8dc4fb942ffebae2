"""The one way followfeed code reaches Redis, with a circuit breaker.

``get_redis()`` returns the redis-py client behind django-redis (a real
Redis, or the embedded fakeredis). ``redis_available()`` is the breaker
(Nygard, *Release It!*, ch. 5 "Circuit Breaker"), one per process:

- closed: every caller uses Redis;
- open: after a failure (``redis_failed``) every caller skips Redis and uses
  the database for ``REDIS_CIRCUIT_OPEN_SECONDS``, so a page never waits for
  one socket timeout per read while Redis is down or hung;
- half-open: when that time is up exactly one caller is let through as a
  probe (the others keep using the database for up to
  ``REDIS_SOCKET_CONNECT_TIMEOUT + REDIS_SOCKET_TIMEOUT`` seconds, the
  longest the probe can take); ``redis_succeeded`` closes the breaker,
  another failure opens it again.

``REDIS_ERRORS`` is every way Redis can fail a command: unreachable,
timed out, loading, read-only replica, refusing writes (OOM, MISCONF) or
refusing the client (NOAUTH). Callers treat all of them alike: reads fall
back to the database and mirror writes stay pending in the outbox.
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

# Any redis-py error (ConnectionError, TimeoutError, ResponseError such as
# OOM or MISCONF, AuthenticationError, ...) plus socket-level OSError. A
# ResponseError can also be a bug (WRONGTYPE); it is logged with its text,
# but a user's page must not fail because of it.
REDIS_ERRORS: tuple[type[BaseException], ...] = (redis.exceptions.RedisError, OSError)

_CLOSED, _OPEN, _HALF_OPEN = "closed", "open", "half-open"
_lock = threading.Lock()
_state = _CLOSED
_open_until = 0.0


def get_redis() -> Any:
    """Return the raw redis-py client (``redis.Redis``) of the default cache.

    :returns: a client whose replies are bytes.
    """
    return get_redis_connection("default")


def _probe_seconds() -> float:
    return float(settings.REDIS_SOCKET_CONNECT_TIMEOUT) + float(settings.REDIS_SOCKET_TIMEOUT)


def redis_available() -> bool:
    """Whether this caller should try Redis now.

    :returns: True while the breaker is closed; False while it is open; True
        for exactly one caller (the probe) when the open period has passed.
        ``REDIS_CIRCUIT_OPEN_SECONDS <= 0`` disables the breaker.
    """
    global _state, _open_until
    if _state == _CLOSED or float(settings.REDIS_CIRCUIT_OPEN_SECONDS) <= 0:
        return True
    now = time.monotonic()
    if now < _open_until:
        return False
    with _lock:
        if _state == _CLOSED:
            return True
        if now < _open_until:
            return False
        # Let this caller probe; hold the others off for as long as the
        # probe can take, after which another caller may probe.
        _state = _HALF_OPEN
        _open_until = now + _probe_seconds()
        return True


def redis_failed(exc: BaseException) -> None:
    """Open the breaker for ``REDIS_CIRCUIT_OPEN_SECONDS`` after a failure ``exc``; log it once."""
    global _state, _open_until
    with _lock:
        was_closed = _state == _CLOSED
        _state = _OPEN
        _open_until = time.monotonic() + float(settings.REDIS_CIRCUIT_OPEN_SECONDS)
    if was_closed:
        logger.warning("Redis unavailable, reads fall back to the database: %r", exc)


def redis_succeeded() -> None:
    """Record a successful Redis call: closes a half-open breaker (no lock taken when closed)."""
    global _state, _open_until
    if _state == _CLOSED:
        return
    with _lock:
        if _state == _HALF_OPEN:
            _state = _CLOSED
            _open_until = 0.0
            logger.warning("Redis is back, reads use it again")


def redis_reset_breaker() -> None:
    """Close the breaker (tests, and after a successful health check)."""
    global _state, _open_until
    with _lock:
        _state = _CLOSED
        _open_until = 0.0


def breaker_state() -> str:
    """The breaker's state in this process: ``"closed"``, ``"open"`` or ``"half-open"`` (health page)."""
    return _state


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

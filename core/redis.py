"""The one way followfeed code reaches Redis, with a circuit breaker.

``get_redis()`` returns the redis-py client behind django-redis (a Redis
server, or the embedded Valkey server of ``core.embedded``).
``redis_available()`` is a circuit breaker, one per process:

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
import uuid
from collections.abc import Callable
from typing import TypeVar, cast

import redis
from django.conf import settings
from django_redis import get_redis_connection
from django_redis.exceptions import ConnectionInterrupted

from . import redis_keys

logger = logging.getLogger(__name__)

# Any redis-py error (ConnectionError, TimeoutError, ResponseError such as
# OOM or MISCONF, AuthenticationError, ...) plus socket-level OSError. A
# ResponseError can also be a bug (WRONGTYPE); it is logged with its text,
# but a user's page must not fail because of it.
# ConnectionInterrupted is how django-redis (the Django cache) reports the same.
REDIS_ERRORS: tuple[type[Exception], ...] = (redis.exceptions.RedisError, OSError, ConnectionInterrupted)

_CLOSED, _OPEN, _HALF_OPEN = "closed", "open", "half-open"
_lock = threading.Lock()
_state = _CLOSED
_open_until = 0.0


T = TypeVar("T")


def get_redis() -> redis.Redis:
    """Return the raw redis-py client of the default cache.

    :returns: a client whose replies are bytes.
    """
    return cast(redis.Redis, get_redis_connection("default"))


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


def redis_node(client: redis.Redis) -> str:
    """A name for the server ``client`` talks to: ``host:port/db``, or the socket path."""
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        return f"unix:{kwargs['path']}/{kwargs.get('db', 0)}"
    return f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}/{kwargs.get('db', 0)}"


def breaker_state() -> str:
    """The breaker's state in this process: ``"closed"``, ``"open"`` or ``"half-open"``, read
    without side effects (``redis_available`` may move it to half-open)."""
    return _state


def intersect_sets(client: redis.Redis, keys: list[str]) -> set[bytes | str]:
    """SINTER of ``keys``, the one place a command spans two users' keys.

    On Redis Cluster (``REDIS_CLUSTER=true``) the keys live on different
    slots, so the members are read per key in one pipeline and intersected
    here instead.

    :returns: the members common to every key, as bytes.
    """
    if not keys:
        return set()
    if settings.REDIS_CLUSTER:
        pipe = client.pipeline(transaction=False)
        for key in keys:
            pipe.smembers(key)
        replies = pipe.execute()
        result: set[bytes | str] = set(replies[0])
        for reply in replies[1:]:
            result &= set(reply)
        return result
    return set(client.sinter(keys))


# How long (seconds) one process trusts its last look at the sentinel key.
SENTINEL_TTL_SECONDS = 2.0
_sentinel_seen: dict[str, float] = {}


def mirror_ready(client: redis.Redis) -> bool:
    """Whether the Redis mirror is populated (its sentinel key exists), cached per process for
    ``SENTINEL_TTL_SECONDS``.

    :raises redis.exceptions.RedisError: Redis unreachable.
    """
    key = redis_keys.sentinel_key()
    now = time.monotonic()
    if _sentinel_seen.get(key, 0.0) > now:
        return True
    if client.exists(key):
        _sentinel_seen[key] = now + SENTINEL_TTL_SECONDS
        return True
    return False


def forget_sentinel() -> None:
    """Drop the cached sentinel look (tests, and after a flush)."""
    _sentinel_seen.clear()


def redis_or_database(redis_read: Callable[[redis.Redis], T], database_read: Callable[[], T]) -> T:
    """Run ``redis_read(client)``, or ``database_read()`` when Redis can't answer.

    Redis can't answer while the breaker is open, while the mirror is not
    built (sentinel missing) and when the call fails.

    :returns: whichever answered; Redis errors open the breaker, never raise.
    """
    if redis_available():
        try:
            client = get_redis()
            if mirror_ready(client):
                answer = redis_read(client)
                redis_succeeded()  # closes a half-open breaker
                return answer
            redis_succeeded()  # Redis answered; the mirror is just not built yet
        except REDIS_ERRORS as exc:
            redis_failed(exc)
    return database_read()


# Compare-and-delete and compare-and-renew: atomic on one key, so a lock
# that expired and was taken by another holder is never released or
# extended by its old holder.
_RELEASE_LUA = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
_RENEW_LUA = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0"


class RedisLockLost(RuntimeError):
    """The lock expired and another holder took it; the work under it must stop."""


class RedisLock:
    """A lock held as ``key = token`` for ``milliseconds``: taken with SET NX PX, renewed and
    released only by its holder (compare-and-renew, compare-and-delete scripts on one key,
    so it works per slot on Redis Cluster)."""

    def __init__(self, *, client: redis.Redis, key: str, milliseconds: int) -> None:
        self.client = client
        self.key = key
        self.milliseconds = milliseconds
        self.token = uuid.uuid4().hex.encode()

    def acquire(self) -> bool:
        """Take the lock if nobody holds it; True when taken."""
        return bool(self.client.set(self.key, self.token, nx=True, px=self.milliseconds))

    def renew(self) -> None:
        """Extend the lock to ``milliseconds`` from now.

        :raises RedisLockLost: it is no longer ours.
        """
        if not self.client.eval(_RENEW_LUA, 1, self.key, self.token, self.milliseconds):
            raise RedisLockLost(f"lost {self.key}")

    def release(self) -> None:
        """Delete the lock if it is still ours (nothing otherwise)."""
        self.client.eval(_RELEASE_LUA, 1, self.key, self.token)

    def queue_release(self, pipe: redis.client.Pipeline) -> None:
        """Queue ``release`` on ``pipe`` (many locks released in one round trip)."""
        pipe.eval(_RELEASE_LUA, 1, self.key, self.token)

"""The one way followfeed code reaches Redis, with circuit breakers and the mirror's sentinels.

``get_redis()`` is the redis-py client (a server, the embedded Valkey, or ``RedisCluster``);
``redis_or_database`` runs a read on Redis or the database; ``REDIS_ERRORS`` is every way Redis
can fail a command, and callers treat them alike. Breakers are per process and per master
(``""`` on one server); sentinels are one per slot run of each master. Design:
docs/architecture.md#consistency-under-faults and #redis-cluster-and-a-read-replica.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar, cast

import redis
from django.conf import settings
from django_redis import get_redis_connection
from django_redis.exceptions import ConnectionInterrupted

from . import redis_keys
from .cluster import Pipe, is_cluster, lua, node_name, pipeline, primaries, queue_script, range_start, refresh, slot_ranges
from .metrics import count_data_error, set_breaker

logger = logging.getLogger(__name__)

# Any redis-py error (ConnectionError, TimeoutError, ResponseError such as
# OOM or MISCONF, AuthenticationError, MOVED, CLUSTERDOWN, ...) plus
# socket-level OSError. A ResponseError can also be a bug (WRONGTYPE); it is
# logged with its text, but a user's page must not fail because of it.
# ConnectionInterrupted is how django-redis (the Django cache) reports the
# same; RedisClusterException (no node for a slot, a cluster that cannot be
# reached) is not a RedisError in redis-py.
REDIS_ERRORS: tuple[type[Exception], ...] = (
    redis.exceptions.RedisError,
    redis.exceptions.RedisClusterException,
    OSError,
    ConnectionInterrupted,
)

_CLOSED, _OPEN, _HALF_OPEN = "closed", "open", "half-open"


@dataclass
class _Breaker:
    state: str = _CLOSED
    open_until: float = 0.0


_lock = threading.Lock()
_breakers: dict[str, _Breaker] = {}


T = TypeVar("T")


def refresh_topology() -> None:
    """Re-read a cluster's slot map (after a failover), quietly; nothing on one server or when
    no node answers (the next command tries again)."""
    try:
        refresh(get_redis())
    except REDIS_ERRORS:
        pass


def get_redis() -> redis.Redis:
    """Return the raw redis-py client of the default cache (a ``RedisCluster`` in cluster mode,
    typed as ``Redis``: the commands followfeed uses are the same).

    :returns: a client whose replies are bytes.
    """
    return cast(redis.Redis, get_redis_connection("default"))


def _probe_seconds() -> float:
    return float(settings.REDIS_SOCKET_CONNECT_TIMEOUT) + float(settings.REDIS_SOCKET_TIMEOUT)


def _breaker(node: str) -> _Breaker:
    found = _breakers.get(node)
    if found is None:
        with _lock:
            found = _breakers.setdefault(node, _Breaker())
    return found


def redis_available(node: str = "") -> bool:
    """Whether this caller should try Redis (the master ``node`` on a cluster) now.

    :returns: True while the breaker is closed; False while it is open; True for exactly one
        caller (the probe) once ``REDIS_CIRCUIT_OPEN_SECONDS`` passed (<= 0 disables breakers).
    """
    breaker = _breaker(node)
    if breaker.state == _CLOSED or float(settings.REDIS_CIRCUIT_OPEN_SECONDS) <= 0:
        return True
    now = time.monotonic()
    if now < breaker.open_until:
        return False
    with _lock:
        if breaker.state == _CLOSED:
            return True
        if now < breaker.open_until:
            return False
        # Let this caller probe; hold the others off for as long as the
        # probe can take, after which another caller may probe.
        breaker.state = _HALF_OPEN
        breaker.open_until = now + _probe_seconds()
        return True


# Failures this process has met (``redis_failed`` calls): what a process kept while a write's
# after-commit work reached Redis must not outlive a failure that may have stopped some of it.
_counts = {"failures": 0}


def failures_seen() -> int:
    """How many Redis failures this process has recorded so far (grows only)."""
    return _counts["failures"]


# Replies about the data a command met, not about the server: a key of another type, or a
# script's runtime error (Redis 7 and Valkey: "ERR user_script:..."; before: "ERR Error running
# script"; redis-py drops the "ERR "). The server answers every other command, so they open no
# breaker. The subclasses of ResponseError (OOM, READONLY, LOADING, ...) and the other generic
# replies (BUSY, MISCONF, MASTERDOWN) are the server's trouble.
_DATA_ERRORS = ("WRONGTYPE ", "user_script:", "Error running script")
# The server's trouble met by a command inside a script (before Redis 7 a script's error wraps it:
# "Error running script ...: -OOM command not allowed ...").
_SERVER_TROUBLE = ("OOM ", "READONLY ", "MISCONF ", "LOADING ", "BUSY ", "MASTERDOWN ", "CLUSTERDOWN ", "TRYAGAIN ")
# Data errors already logged by this process (each text once; the set is emptied when full).
_data_errors_logged: set[str] = set()
DATA_ERRORS_LOGGED_MAX = 1_000


def is_data_error(exc: BaseException) -> bool:
    """Whether ``exc`` is Redis refusing a command because of the data it met (``_DATA_ERRORS``)."""
    if type(exc) is not redis.exceptions.ResponseError:
        return False
    text = str(exc)
    # A pipeline names the command before the reply: "Command # 2 (SCARD ...) of pipeline caused error: WRONGTYPE ...".
    reply = text.partition(" of pipeline caused error: ")[2] or text
    return reply.startswith(_DATA_ERRORS) and not any(trouble in reply for trouble in _SERVER_TROUBLE)


def redis_failed(exc: BaseException, node: str = "") -> None:
    """Open the breaker of ``node`` for ``REDIS_CIRCUIT_OPEN_SECONDS`` after a failure ``exc``; log it once.

    A data error (``is_data_error``: a fault of one key, or a script's bug) opens no breaker (and
    closes a half-open one: the server answered): the caller's fallback answers that read, and
    every other read keeps using Redis. It is logged (each text once per process) and counted in
    ``failures_seen`` like any failure, since it may have stopped some of a write's work.
    """
    if is_data_error(exc):
        with _lock:
            _counts["failures"] += 1
            text = str(exc)
            first = text not in _data_errors_logged
            if first:
                if len(_data_errors_logged) >= DATA_ERRORS_LOGGED_MAX:
                    _data_errors_logged.clear()
                _data_errors_logged.add(text)
        count_data_error()
        if first:
            logger.error(
                "Redis refused a command on its data%s (the breaker stays closed): %s", f" ({node})" if node else "", exc
            )
        redis_succeeded(node)  # the server answered: a half-open breaker's probe passed
        return
    breaker = _breaker(node)
    with _lock:
        _counts["failures"] += 1
        was_closed = breaker.state == _CLOSED
        breaker.state = _OPEN
        breaker.open_until = time.monotonic() + float(settings.REDIS_CIRCUIT_OPEN_SECONDS)
    if was_closed:
        set_breaker(node, is_open=True)
        where = f" ({node})" if node else ""
        # The type and the text: redis-py's repr of its errors names only their kind.
        logger.warning("Redis unavailable%s, reads fall back to the database: %s: %s", where, type(exc).__name__, exc)


def redis_succeeded(node: str = "") -> None:
    """Record a successful Redis call: closes a half-open breaker (no lock taken when closed)."""
    breaker = _breaker(node)
    if breaker.state == _CLOSED:
        return
    with _lock:
        if breaker.state == _HALF_OPEN:
            breaker.state = _CLOSED
            breaker.open_until = 0.0
            set_breaker(node, is_open=False)
            logger.warning("Redis%s is back, reads use it again", f" ({node})" if node else "")


def redis_reset_breaker() -> None:
    """Close every breaker (tests, and after a successful health check)."""
    with _lock:
        for node in _breakers:
            set_breaker(node, is_open=False)
        _breakers.clear()


def redis_node(client: redis.Redis) -> str:
    """A name for the server ``client`` talks to: ``host:port/db``, the socket path, or
    ``cluster:<seed host:port>`` for a cluster."""
    if is_cluster(client):
        seed = client.get_default_node()  # type: ignore[attr-defined]
        return f"cluster:{seed.name if seed is not None else '?'}"
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        return f"unix:{kwargs['path']}/{kwargs.get('db', 0)}"
    return f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}/{kwargs.get('db', 0)}"


def breaker_node(key: str) -> str:
    """The breaker that guards reads of ``key``: its master's on a cluster, the one breaker
    (``""``) on one server (answered without touching the client there)."""
    if not settings.REDIS_CLUSTER:
        return ""
    try:
        return node_name(get_redis(), key)
    except REDIS_ERRORS:
        return ""  # no slot map (the cluster cannot be reached): the whole-cluster breaker


def breaker_state(node: str = "") -> str:
    """The state of ``node``'s breaker in this process: ``"closed"``, ``"open"`` or
    ``"half-open"``, read without side effects (``redis_available`` may move it to half-open)."""
    return _breaker(node).state


def intersect_sets(client: redis.Redis, keys: list[str]) -> set[bytes | str]:
    """SINTER of ``keys``, the one place a command spans two users' keys (on a cluster: read per key
    in one pipeline, intersected here).

    :returns: the members common to every key, as bytes.
    """
    if not keys:
        return set()
    if is_cluster(client):
        pipe = pipeline(client)
        for key in keys:
            pipe.smembers(key)
        replies = pipe.execute()
        result: set[bytes | str] = set(replies[0])
        for reply in replies[1:]:
            result &= set(reply)
        return result
    return set(client.sinter(keys))


# How long (seconds) one process trusts its last look at a sentinel key.
SENTINEL_TTL_SECONDS = 2.0
_sentinel_seen: dict[str, float] = {}


def sentinel_keys(client: redis.Redis, keys: Iterable[str] = ()) -> list[str]:
    """The sentinels that vouch for ``keys``: the one sentinel on one server; on a cluster the
    sentinel of the run of slots (``core.cluster.slot_ranges``) holding each key, or with no
    ``keys`` every run's."""
    if not is_cluster(client):
        return [redis_keys.sentinel_key()]
    starts = {range_start(client, key) for key in keys} or {first for first, _, _ in slot_ranges(client)}
    return [redis_keys.slot_sentinel_key(slot) for slot in sorted(starts)]


def all_sentinel_keys(client: redis.Redis) -> list[str]:
    """Every sentinel: one on one server, one per run of slots of a master on a cluster (a
    failover keeps the runs: the promoted replica serves the same slots, sentinels included)."""
    return sentinel_keys(client)


def mirror_ready(client: redis.Redis, keys: Sequence[str] = ()) -> bool:
    """Whether the mirror is populated where ``keys`` live (their sentinels exist; with none, one per
    master), each look cached per process for ``SENTINEL_TTL_SECONDS``.

    :raises redis.exceptions.RedisError: Redis unreachable.
    """
    now = time.monotonic()
    unseen = [key for key in sentinel_keys(client, keys) if _sentinel_seen.get(key, 0.0) <= now]
    if not unseen:
        return True
    if len(unseen) == 1:
        present = [bool(client.exists(unseen[0]))]
    else:
        pipe = pipeline(client)
        for key in unseen:
            pipe.exists(key)
        present = [bool(found) for found in pipe.execute()]
    for key, found in zip(unseen, present):
        if found:
            _sentinel_seen[key] = now + SENTINEL_TTL_SECONDS
    return all(present)


def write_sentinels(client: redis.Redis, heartbeat_ms: int) -> None:
    """Set every sentinel to ``heartbeat_ms`` (the mirror was rebuilt)."""
    pipe = pipeline(client)
    for key in all_sentinel_keys(client):
        pipe.set(key, heartbeat_ms)
    pipe.execute()


def delete_sentinels(client: redis.Redis) -> None:
    """Delete every sentinel: readers use the database until the mirror is rebuilt."""
    pipe = pipeline(client)
    for key in all_sentinel_keys(client):
        pipe.delete(key)
    pipe.execute()
    forget_sentinel()


def forget_sentinel() -> None:
    """Drop the cached sentinel looks (tests, and after a flush)."""
    _sentinel_seen.clear()


def watched_servers(client: redis.Redis) -> list[tuple[str, redis.Redis, str]]:
    """``[(watch name, plain client, sentinel key on that server)]``: the one server, or every
    master of a cluster, named after the run of slots it serves (a failover keeps the name: the
    promoted replica serves the same slots, with data that may be older)."""
    if not is_cluster(client):
        return [(redis_node(client), client, redis_keys.sentinel_key())]
    servers = dict(primaries(client))
    return [
        (f"cluster slots {first}-{last}", servers[name], redis_keys.slot_sentinel_key(first))
        for first, last, name in slot_ranges(client)
        if name in servers
    ]


def redis_or_database(redis_read: Callable[[redis.Redis], T], database_read: Callable[[], T], *, keys: Sequence[str] = ()) -> T:
    """Run ``redis_read(client)``, or ``database_read()`` while the breaker is open, the mirror is not
    built, or the call fails.

    :param keys: the keys ``redis_read`` reads, main one first (their master's breaker and
        sentinels; none: the whole-cluster breaker and every sentinel).
    :returns: whichever answered; Redis errors open the breaker, never raise.
    """
    node = breaker_node(keys[0]) if keys else ""
    client: redis.Redis | None = None
    if redis_available(node):
        try:
            client = get_redis()
            if mirror_ready(client, keys):
                answer = redis_read(client)
                redis_succeeded(node)  # closes a half-open breaker
                return answer
            redis_succeeded(node)  # Redis answered; the mirror is just not built yet
        except REDIS_ERRORS as exc:
            refresh(client)
            redis_failed(exc, node)
    return database_read()


# Compare-and-delete and compare-and-renew: atomic on one key, so a lock
# that expired and was taken by another holder is never released or
# extended by its old holder.
_RELEASE_LUA = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
_RENEW_LUA = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0"


def delete_if_equal(client: redis.Redis, key: str, value: str | bytes) -> bool:
    """Delete ``key`` if it still holds ``value``, atomically; whether it did.

    :raises: ``REDIS_ERRORS``.
    """
    return bool(client.eval(_RELEASE_LUA, 1, key, value))


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
        delete_if_equal(self.client, self.key, self.token)

    def queue_release(self, pipe: Pipe) -> None:
        """Queue ``release`` on ``pipe`` (``core.cluster.pipeline``; many locks released in one round trip)."""
        queue_script(pipe, lua(_RELEASE_LUA), [self.key], [self.token])

"""Health figures of the outbox, Redis and the broker for the admin's health page (reads only).

Every probe is bounded in time and work so the page answers while a service is down: O(1) Redis
calls or a bounded SCAN, and the broker probe in a thread with a hard deadline
(``BROKER_TIMEOUT_SECONDS``; a half-open TCP connection can block a read for minutes).
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import redis
from django.conf import settings
from django.db.models import Count, Min, Q
from django.utils import timezone

from . import redis_keys
from .cluster import primaries
from .models import OutboxEntry, RedisWatch
from .redis import REDIS_ERRORS, breaker_state, get_redis, mirror_ready, redis_node, watched_servers

# SCAN calls (COUNT 1000 each) spent counting keys under the prefix.
PREFIX_SCAN_CALLS = 20
PREFIX_SCAN_COUNT = 1000
# Connect, read and overall deadline of the broker probe (seconds).
BROKER_TIMEOUT_SECONDS = 1.5


@dataclass
class KindBacklog:
    """Pending entries of one outbox ``kind``: how many, the oldest one's ``oldest_created_at``, and
    how many are ``stuck`` (their last application failed: ``last_error`` set)."""

    kind: str
    pending: int
    oldest_created_at: datetime
    stuck: int


@dataclass
class OutboxHealth:
    """Side effects not yet applied: ``pending`` entries, ``stuck`` ones, the oldest pending
    entry's ``oldest_created_at`` and ``oldest_age_seconds`` (at ``checked_at``), and ``kinds``,
    the same per kind (the metrics' figures)."""

    pending: int
    stuck: int
    oldest_created_at: datetime | None
    oldest_age_seconds: float | None
    checked_at: datetime
    kinds: list[KindBacklog] = field(default_factory=list)


@dataclass
class RedisHealth:
    """Redis memory (bytes) and key counts, or ``error`` when unreachable: ``prefix_keys_seen`` among
    ``keys_examined`` by a bounded SCAN, exact when ``prefix_scan_complete``, else scaled to
    ``dbsize`` in ``prefix_keys_estimate``.
    """

    reachable: bool
    breaker_closed: bool
    error: str = ""
    used_memory_bytes: int | None = None
    used_memory_human: str = ""
    used_memory_peak_human: str = ""
    maxmemory_bytes: int | None = None
    maxmemory_policy: str = ""
    fragmentation_ratio: float | None = None
    dbsize: int | None = None
    prefix: str = ""
    prefix_keys_seen: int = 0
    keys_examined: int = 0
    prefix_scan_complete: bool = False
    prefix_keys_estimate: int | None = None
    sentinel_present: bool | None = None
    nodes: int = 1


@dataclass
class QueueHealth:
    """One Celery queue: ``messages`` ready and ``consumers``, or ``error``."""

    name: str
    messages: int | None = None
    consumers: int | None = None
    error: str = ""


@dataclass
class BrokerHealth:
    """Celery broker figures; ``eager`` True when tasks run in-process (no broker)."""

    eager: bool
    url: str = ""
    queues: list[QueueHealth] = field(default_factory=list)
    error: str = ""


@dataclass
class WatchHealth:
    """What the drain last saw of Redis (``core.RedisWatch``): ``run_id``, ``heartbeat_at``,
    ``rollbacks`` and the last one's details; ``seen`` False before any drain.
    """

    seen: bool
    node: str = ""
    run_id: str = ""
    heartbeat_at: datetime | None = None
    rollbacks: int = 0
    last_rollback_at: datetime | None = None
    last_rollback_to: datetime | None = None
    last_reapplied: int = 0


def watch_health(node: str) -> WatchHealth:
    """The ``RedisWatch`` row of ``node`` (one indexed query)."""
    watch = RedisWatch.objects.filter(node=node).first()
    if watch is None:
        return WatchHealth(seen=False, node=node)

    def moment(ms: int | None) -> datetime | None:
        return datetime.fromtimestamp(ms / 1000, tz=UTC) if ms else None

    return WatchHealth(
        seen=True,
        node=node,
        run_id=watch.run_id,
        heartbeat_at=moment(watch.heartbeat_ms),
        rollbacks=watch.rollbacks,
        last_rollback_at=watch.last_rollback_at,
        last_rollback_to=moment(watch.last_rollback_to_ms),
        last_reapplied=watch.last_reapplied,
    )


def watches_health() -> list[WatchHealth]:
    """``watch_health`` of every server the drain watches (every master of a cluster); an
    unreachable Redis gives the rows already recorded."""
    try:
        names = [name for name, _, _ in watched_servers(get_redis())]
    except REDIS_ERRORS:
        names = list(RedisWatch.objects.order_by("node").values_list("node", flat=True)) or [redis_node(get_redis())]
    return [watch_health(name) for name in names]


@dataclass
class MirrorHealth:
    """Everything the health page shows, gathered at ``checked_at``; ``sections`` are the
    apps' own figures (``register_section``)."""

    checked_at: datetime
    outbox: OutboxHealth
    redis: RedisHealth
    broker: BrokerHealth
    watches: list[WatchHealth]
    sections: dict[str, Any] = field(default_factory=dict)


def outbox_health() -> OutboxHealth:
    """Backlog of the outbox per kind (one grouped query), for the health page and ``/metrics``."""
    rows = (
        OutboxEntry.objects.filter(applied_at__isnull=True)
        .order_by()
        .values("kind")
        .annotate(pending=Count("id"), oldest=Min("created_at"), stuck=Count("id", filter=~Q(last_error="")))
        .order_by("kind")
    )
    kinds = [
        KindBacklog(kind=row["kind"], pending=row["pending"], oldest_created_at=row["oldest"], stuck=row["stuck"]) for row in rows
    ]
    now = timezone.now()
    oldest = min((kind.oldest_created_at for kind in kinds), default=None)
    return OutboxHealth(
        pending=sum(kind.pending for kind in kinds),
        stuck=sum(kind.stuck for kind in kinds),
        oldest_created_at=oldest,
        oldest_age_seconds=(now - oldest).total_seconds() if oldest else None,
        checked_at=now,
        kinds=kinds,
    )


def _bytes_human(count: int) -> str:
    """``count`` bytes as Redis's ``used_memory_human`` writes it (``"1.50M"``)."""
    size = float(count)
    for unit in ("B", "K", "M", "G"):
        if size < 1024:
            return f"{count}B" if unit == "B" else f"{size:.2f}{unit}"
        size /= 1024
    return f"{size:.2f}T"


def redis_health() -> RedisHealth:
    """Redis ``INFO memory``, ``DBSIZE`` and a bounded SCAN count of our keys, summed over the masters;
    never raises (``reachable`` False; figures None without INFO).
    """
    report = RedisHealth(reachable=False, breaker_closed=breaker_state() == "closed", prefix=redis_keys.prefix())
    try:
        client = get_redis()
        servers = primaries(client)
        report.nodes = len(servers)
        report.dbsize = sum(int(server.dbsize()) for _, server in servers)
        report.reachable = True
        report.sentinel_present = mirror_ready(client)
        try:
            memories = [server.info("memory") for _, server in servers]
            report.used_memory_bytes = sum(int(memory.get("used_memory", 0)) for memory in memories)
            peak = sum(int(memory.get("used_memory_peak", 0)) for memory in memories)
            if len(servers) == 1:
                report.used_memory_human = str(memories[0].get("used_memory_human", ""))
                report.used_memory_peak_human = str(memories[0].get("used_memory_peak_human", ""))
            else:
                report.used_memory_human = _bytes_human(report.used_memory_bytes)
                report.used_memory_peak_human = _bytes_human(peak)
            report.maxmemory_bytes = sum(int(memory.get("maxmemory", 0)) for memory in memories)
            report.maxmemory_policy = str(memories[0].get("maxmemory_policy", ""))
            ratios = [
                float(memory["mem_fragmentation_ratio"])
                for memory in memories
                if memory.get("mem_fragmentation_ratio") is not None
            ]
            report.fragmentation_ratio = max(ratios) if ratios else None
        except redis.exceptions.ResponseError as exc:
            report.error = f"INFO unsupported: {exc}"
        complete = True
        for _, server in servers:
            # One SCAN cursor per server: a cursor means nothing on another node.
            cursor: int = 0
            finished = False
            for _ in range(max(1, PREFIX_SCAN_CALLS // len(servers))):
                cursor, keys = server.scan(cursor=cursor, match=f"{report.prefix}*", count=PREFIX_SCAN_COUNT)
                report.prefix_keys_seen += len(keys)
                report.keys_examined += PREFIX_SCAN_COUNT
                if int(cursor) == 0:
                    finished = True
                    break
            complete = complete and finished
        report.prefix_scan_complete = complete
        if report.prefix_scan_complete:
            report.keys_examined = report.dbsize
            report.prefix_keys_estimate = report.prefix_keys_seen
        elif report.keys_examined:
            share = report.prefix_keys_seen / min(report.keys_examined, report.dbsize or report.keys_examined)
            report.prefix_keys_estimate = round(share * report.dbsize)
    except REDIS_ERRORS as exc:
        report.error = f"{type(exc).__name__}: {exc}"
    return report


def _queue_names() -> list[str]:
    """The default queue plus every queue named in ``CELERY_TASK_ROUTES``/``CELERY_TASK_QUEUES``."""
    names = [str(getattr(settings, "CELERY_TASK_DEFAULT_QUEUE", "celery") or "celery")]
    routes = getattr(settings, "CELERY_TASK_ROUTES", None) or {}
    if isinstance(routes, dict):
        for route in routes.values():
            if isinstance(route, dict) and route.get("queue"):
                names.append(str(route["queue"]))
    for queue in getattr(settings, "CELERY_TASK_QUEUES", None) or []:
        names.append(str(getattr(queue, "name", queue)))
    return list(dict.fromkeys(names))


def _probe_queues(url: str, names: list[str], timeout: float) -> list[QueueHealth]:
    import kombu.connection

    # kombu ships no types for its Connection.
    connection_class: Any = kombu.connection.Connection
    if url.startswith(("redis://", "rediss://")):
        options: dict[str, Any] = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
    else:
        options = {"read_timeout": timeout, "write_timeout": timeout}
    found: list[QueueHealth] = []
    with connection_class(url, connect_timeout=timeout, transport_options=options) as connection:
        # One attempt: kombu's connect() retries with a 2 s pause.
        connection.ensure_connection(max_retries=0)
        for name in names:
            # A passive declare of a missing queue closes the channel (404),
            # so each queue gets its own channel.
            channel = connection.channel()
            try:
                _, messages, consumers = channel.queue_declare(queue=name, passive=True)
                found.append(QueueHealth(name=name, messages=int(messages), consumers=int(consumers)))
            except Exception as exc:  # noqa: BLE001 - a missing queue is a figure, not a failure
                found.append(QueueHealth(name=name, error=f"{type(exc).__name__}: {exc}"))
            finally:
                try:
                    channel.close()
                except Exception:  # noqa: BLE001, S110 - already closed by the broker
                    pass
    return found


def _redact(url: str) -> str:
    """The broker URL without its password."""
    from kombu.utils.url import maybe_sanitize_url

    return str(maybe_sanitize_url(url))


def broker_health(*, timeout: float = BROKER_TIMEOUT_SECONDS) -> BrokerHealth:
    """Ready messages and consumers per Celery queue (passive ``queue_declare``).

    :param timeout: seconds for connect and each read; the whole probe is
        abandoned after ``2 * timeout`` even if a socket hangs.
    :returns: ``BrokerHealth``; ``error`` set when the broker is down, never raises.
    """
    url = str(getattr(settings, "CELERY_BROKER_URL", "") or "")
    if getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False) or not url:
        return BrokerHealth(eager=True, url=_redact(url) if url else "")
    report = BrokerHealth(eager=False, url=_redact(url))
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="broker-health")
    future = executor.submit(_probe_queues, url, _queue_names(), timeout)
    try:
        report.queues = future.result(timeout=2 * timeout)
    except concurrent.futures.TimeoutError:
        report.error = f"broker did not answer within {2 * timeout:.1f}s"
    except Exception as exc:  # noqa: BLE001 - any broker failure is shown, not raised
        report.error = f"{type(exc).__name__}: {exc}"
    finally:
        executor.shutdown(wait=False)
    return report


_sections: dict[str, Callable[[], Any]] = {}


def register_section(name: str, provider: Callable[[], Any]) -> None:
    """Add a section to the health page: ``provider()`` is called on every view and its
    value is ``health.sections.<name>`` in the template (apps register theirs when they load)."""
    _sections[name] = provider


@dataclass
class ReconcileSummary:
    """The last reconcile of one ``kind`` as the metrics show it: when the newest finished run
    ended (``finished_at``), how long it took (``duration_seconds``), the drift it found (the sum
    of its drift figures) and whether the newest run ``failed``."""

    kind: str
    finished_at: datetime | None = None
    duration_seconds: float | None = None
    drift: int | None = None
    failed: bool = False


@dataclass
class _ReconcileSource:
    provider: Callable[[], Any]
    drift_figures: tuple[str, ...]


_reconciles: dict[str, _ReconcileSource] = {}


def register_reconcile(kind: str, provider: Callable[[], Any], *, drift_figures: tuple[str, ...]) -> None:
    """Report the reconcile ``kind`` in the metrics: ``provider`` is the health page's section function
    (its value has ``started_at``, ``finished_at``, ``state`` and ``figures`` ``[(name, value)]``);
    the figures named in ``drift_figures`` add up to the drift found."""
    _reconciles[kind] = _ReconcileSource(provider, drift_figures)


def reconcile_summaries() -> list[ReconcileSummary]:
    """``ReconcileSummary`` of every registered reconcile, from the same queries as the health page."""
    found = []
    for kind, source in sorted(_reconciles.items()):
        section = source.provider()
        summary = ReconcileSummary(kind=kind, failed=section.state == "failed")
        if section.finished_at is not None:
            summary.finished_at = section.finished_at
            summary.duration_seconds = (section.finished_at - section.started_at).total_seconds()
            figures = dict(section.figures)
            summary.drift = sum(int(figures.get(name) or 0) for name in source.drift_figures)
        else:
            # Running or failed: the last finished run's end, when the section knows it.
            summary.finished_at = getattr(section, "last_finished_at", None)
        found.append(summary)
    return found


def mirror_health() -> MirrorHealth:
    """Gather every figure of the health page (bounded: at most ``2 * BROKER_TIMEOUT_SECONDS`` with the broker down)."""
    return MirrorHealth(
        checked_at=timezone.now(),
        outbox=outbox_health(),
        redis=redis_health(),
        broker=broker_health(timeout=BROKER_TIMEOUT_SECONDS),
        watches=watches_health(),
        sections={name: provider() for name, provider in _sections.items()},
    )

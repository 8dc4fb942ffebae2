"""What ``/metrics`` answers a Prometheus scrape: who may scrape, and the text it gets.

Recorded figures come from prometheus-client's registry (summed over ``PROMETHEUS_MULTIPROC_DIR``
when set); database and broker figures are computed at scrape time by ``FollowfeedCollector``
from ``core.health``. The metrics: docs/operations.md#metrics.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from . import health
from .limits import client_address

logger = logging.getLogger(__name__)


def scrape_refusal(request: HttpRequest) -> tuple[int, str] | None:
    """Why ``request`` may not scrape (status, message), or None: allowed with ``Bearer <METRICS_TOKEN>``
    or from ``METRICS_ALLOWED_NETWORKS``; with neither set the endpoint is a 404.
    """
    token = str(getattr(settings, "METRICS_TOKEN", "") or "")
    networks = list(getattr(settings, "METRICS_ALLOWED_NETWORKS", []) or [])
    if not token and not networks:
        return 404, "Metrics are not enabled (METRICS_TOKEN or METRICS_ALLOWED_NETWORKS)."
    given = str(request.headers.get("Authorization", ""))
    if (
        token
        and given.startswith("Bearer ")
        and hmac.compare_digest(given.removeprefix("Bearer ").strip().encode(), token.encode())
    ):
        return None
    if networks and _address_in(client_address(request), networks):
        return None
    return 401, "A scrape needs the metrics token (Authorization: Bearer ...)."


def _address_in(address: str, networks: Sequence[str]) -> bool:
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(parsed in ipaddress.ip_network(network, strict=False) for network in networks)


def _timestamp(moment: object) -> float | None:
    return moment.timestamp() if hasattr(moment, "timestamp") else None


class FollowfeedCollector(Collector):
    """The figures read at scrape time (see the module's docstring); ``kinds`` are the outbox's
    registered kinds, reported at 0 when none of theirs pend."""

    def __init__(self, kinds: Iterable[str]) -> None:
        self.kinds = sorted(kinds)

    def collect(self) -> Iterator[Metric]:
        # A section that cannot be read (the database down) is left out and counted in
        # followfeed_scrape_failed, so the scrape still answers with everything else.
        failed = GaugeMetricFamily(
            "followfeed_scrape_failed", "1 when a section of the scrape-time figures could not be read.", labels=["section"]
        )
        sections: list[tuple[str, Callable[[], Iterator[Metric]]]] = [
            ("outbox", self._outbox),
            ("queues", self._queues),
            ("reconciles", self._reconciles),
            ("rollbacks", self._rollbacks),
        ]
        for name, section in sections:
            try:
                found = list(section())
            except DatabaseError:
                logger.exception("metrics: the %s figures could not be read", name)
                failed.add_metric([name], 1)
                continue
            failed.add_metric([name], 0)
            yield from found
        yield failed

    def _outbox(self) -> Iterator[Metric]:
        backlog = health.outbox_health()
        pending = GaugeMetricFamily("followfeed_outbox_pending", "Outbox entries not applied yet, by kind.", labels=["kind"])
        oldest = GaugeMetricFamily(
            "followfeed_outbox_oldest_age_seconds",
            "Age of the oldest pending outbox entry, by kind (0: none pending).",
            labels=["kind"],
        )
        stuck = GaugeMetricFamily(
            "followfeed_outbox_stuck", "Pending outbox entries whose last application failed, by kind.", labels=["kind"]
        )
        by_kind = {kind.kind: kind for kind in backlog.kinds}
        for name in sorted({*self.kinds, *by_kind}):
            kind = by_kind.get(name)
            pending.add_metric([name], kind.pending if kind else 0)
            age = (backlog.checked_at - kind.oldest_created_at).total_seconds() if kind else 0.0
            oldest.add_metric([name], max(0.0, age))
            stuck.add_metric([name], kind.stuck if kind else 0)
        yield from (pending, oldest, stuck)

    def _queues(self) -> Iterator[Metric]:
        broker = health.broker_health()
        up = GaugeMetricFamily(
            "followfeed_celery_broker_up", "1 when the Celery broker answered the queue probe (or tasks run eagerly)."
        )
        up.add_metric([], 0 if broker.error else 1)
        depth = GaugeMetricFamily("followfeed_celery_queue_messages", "Messages ready in a Celery queue.", labels=["queue"])
        consumers = GaugeMetricFamily("followfeed_celery_queue_consumers", "Consumers of a Celery queue.", labels=["queue"])
        for queue in broker.queues:
            if queue.messages is not None:
                depth.add_metric([queue.name], queue.messages)
            if queue.consumers is not None:
                consumers.add_metric([queue.name], queue.consumers)
        yield from (up, depth, consumers)

    def _reconciles(self) -> Iterator[Metric]:
        finished = GaugeMetricFamily(
            "followfeed_reconcile_last_finished_timestamp_seconds",
            "When the last finished reconcile of a kind ended (Unix time).",
            labels=["kind"],
        )
        duration = GaugeMetricFamily(
            "followfeed_reconcile_last_duration_seconds", "How long the last finished reconcile took.", labels=["kind"]
        )
        drift = GaugeMetricFamily(
            "followfeed_reconcile_last_drift",
            "Drift the last finished reconcile found (derived structures that differed).",
            labels=["kind"],
        )
        failed = GaugeMetricFamily(
            "followfeed_reconcile_last_failed", "1 when the newest reconcile of a kind failed.", labels=["kind"]
        )
        for summary in health.reconcile_summaries():
            when = _timestamp(summary.finished_at)
            if when is not None:
                finished.add_metric([summary.kind], when)
            if summary.duration_seconds is not None:
                duration.add_metric([summary.kind], summary.duration_seconds)
            if summary.drift is not None:
                drift.add_metric([summary.kind], summary.drift)
            failed.add_metric([summary.kind], 1 if summary.failed else 0)
        yield from (finished, duration, drift, failed)

    def _rollbacks(self) -> Iterator[Metric]:
        count = GaugeMetricFamily(
            "followfeed_redis_rollbacks",
            "Rollbacks of Redis's data the outbox drain detected (since the node was first watched).",
            labels=["node"],
        )
        last = GaugeMetricFamily(
            "followfeed_redis_rollback_last_timestamp_seconds",
            "When the last rollback was detected (Unix time).",
            labels=["node"],
        )
        for watch in health.watches_health():
            count.add_metric([watch.node or "default"], watch.rollbacks)
            when = _timestamp(watch.last_rollback_at)
            if when is not None:
                last.add_metric([watch.node or "default"], when)
        yield from (count, last)


def render(*, kinds: Iterable[str]) -> bytes:
    """The exposition text of one scrape: the processes' registry, then ``FollowfeedCollector``."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
    if directory:
        shared = CollectorRegistry()
        multiprocess.MultiProcessCollector(shared, path=directory)  # type: ignore[no-untyped-call]
        recorded = generate_latest(shared)
    else:
        recorded = generate_latest(REGISTRY)
    now = CollectorRegistry(auto_describe=False)
    now.register(FollowfeedCollector(kinds))
    return recorded + generate_latest(now)

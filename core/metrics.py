"""followfeed's own Prometheus metrics that processes record as things happen (fan-out lag, rate
limit refusals, breaker state), in prometheus-client's registry, summed across processes over
``PROMETHEUS_MULTIPROC_DIR`` by ``/metrics`` (``core.monitoring``). The list: docs/operations.md#metrics.
"""

from __future__ import annotations

import time

from prometheus_client import Counter, Gauge, Histogram

FANOUT_LAG = Histogram(
    "followfeed_fanout_lag_seconds",
    "Seconds from a note's publish time to its delivery into its followers' inboxes.",
    ["mode"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600),
)
RATE_LIMIT_REFUSALS = Counter(
    "followfeed_rate_limit_refusals",
    "Actions refused by a rate limit (core.limits), by limit.",
    ["limit"],
)
BREAKER_OPEN = Gauge(
    "followfeed_redis_breaker_open",
    "1 while the Redis circuit breaker of the node is open or half-open in a process, else 0.",
    ["node"],
    multiprocess_mode="livemax",
)
REDIS_DATA_ERRORS = Counter(
    "followfeed_redis_data_errors",
    "Redis commands refused because of the data they met (a key of another type, a script's"
    " runtime error): each read fell back to the database, no breaker opened.",
)


def observe_fan_out_lag(*, published_ms: int, mode: str) -> None:
    """Record one delivery of a note published at ``published_ms`` (ms since the epoch), now."""
    FANOUT_LAG.labels(mode=mode).observe(max(0.0, time.time() - published_ms / 1000))


def count_refusal(limit: str) -> None:
    """Count one action refused by the limit ``limit`` (a ``core.limits`` group)."""
    RATE_LIMIT_REFUSALS.labels(limit=limit).inc()


def count_data_error() -> None:
    """Count one Redis command refused because of the data it met (``core.redis.is_data_error``)."""
    REDIS_DATA_ERRORS.inc()


def set_breaker(node: str, *, is_open: bool) -> None:
    """Record the state of ``node``'s breaker in this process (``""``: the one server)."""
    BREAKER_OPEN.labels(node=node or "default").set(1 if is_open else 0)

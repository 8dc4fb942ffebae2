"""Timing of one operation: call it repeatedly, keep every latency, summarize as p50/p99/ops per second.

Every call is timed on its own with ``time.perf_counter_ns`` (wall clock,
so time spent waiting for Redis or MariaDB counts). A run stops after
``max_calls`` calls or ``budget_seconds``, whichever comes first, but never
before ``min_calls``; a few warm-up calls come first and are not counted
(connections opened, statements and plans cached). Percentiles are nearest
rank on the sorted latencies.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

# Calls per operation and way (min, max) and the time budget of one run (seconds).
MIN_CALLS = 20
MAX_CALLS = 3000
BUDGET_SECONDS = 2.0
WARMUP_CALLS = 3


@dataclass
class Summary:
    """Latency figures of one run: ``calls`` timed, ``p50_us`` / ``p99_us`` / ``mean_us``
    per call in microseconds, ``ops_per_s`` (units per second of wall time:
    calls, or e.g. followers reached when ``units_per_call`` is given) and
    ``total_s`` spent in the timed calls."""

    calls: int
    p50_us: float
    p99_us: float
    mean_us: float
    ops_per_s: float
    total_s: float

    def as_dict(self) -> dict[str, float]:
        return {key: round(value, 3) if isinstance(value, float) else value for key, value in asdict(self).items()}


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of already sorted values (``fraction`` 0.5 is the median)."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return float(sorted_values[rank - 1])


def summarize(durations_ns: Sequence[int], *, units_per_call: float = 1.0) -> Summary:
    """Figures of a list of per-call durations (nanoseconds)."""
    ordered = sorted(durations_ns)
    total = sum(ordered) / 1e9
    calls = len(ordered)
    return Summary(
        calls=calls,
        p50_us=percentile(ordered, 0.50) / 1e3,
        p99_us=percentile(ordered, 0.99) / 1e3,
        mean_us=(total / calls * 1e6) if calls else math.nan,
        ops_per_s=(calls * units_per_call / total) if total else math.nan,
        total_s=total,
    )


def collect(
    call: Callable[[int], Any],
    companion: Callable[[], Any] | None = None,
    *,
    min_calls: int = MIN_CALLS,
    max_calls: int = MAX_CALLS,
    budget_seconds: float = BUDGET_SECONDS,
    warmup: int = WARMUP_CALLS,
    first_index: int = 0,
) -> tuple[list[int], list[int]]:
    """Time ``call(i)`` for i = ``first_index``, ``first_index + 1``, ... (the index lets it cycle
    through prepared arguments), and ``companion()`` (a raw limit, e.g. PING) right after every
    call when given.

    The garbage collector is paused while timing (a collection in the
    middle of a 50 microsecond call would be measured as the call).

    :returns: ``(durations of call, durations of companion)`` in nanoseconds.
    """
    for index in range(warmup):
        call(first_index + index)
        if companion is not None:
            companion()
    durations: list[int] = []
    paired: list[int] = []
    clock = time.perf_counter_ns
    deadline = time.monotonic() + budget_seconds
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        count = 0
        while count < max_calls and (count < min_calls or time.monotonic() < deadline):
            started = clock()
            call(first_index + count)
            durations.append(clock() - started)
            if companion is not None:
                started = clock()
                companion()
                paired.append(clock() - started)
            count += 1
    finally:
        if was_enabled:
            gc.enable()
    return durations, paired


def run(
    call: Callable[[int], Any],
    *,
    min_calls: int = MIN_CALLS,
    max_calls: int = MAX_CALLS,
    budget_seconds: float = BUDGET_SECONDS,
    warmup: int = WARMUP_CALLS,
    units_per_call: float = 1.0,
) -> Summary:
    """Time ``call(i)`` repeatedly (``collect``) and summarize."""
    durations, _ = collect(call, min_calls=min_calls, max_calls=max_calls, budget_seconds=budget_seconds, warmup=warmup)
    return summarize(durations, units_per_call=units_per_call)

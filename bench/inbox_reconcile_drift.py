"""Inbox reconcile on the whole real graph: every reader active, 1% of the inboxes damaged, found and repaired.

Runs against its own MariaDB database and Redis (never the demo's or the tests'):

    .venv/bin/python bench/inbox_reconcile_drift.py [--import] [--fraction 0.01]

An empty database first gets ``import_graph soc-Slashdot0902.txt.gz`` and
``simulate_activity`` (the Higgs replay, about 19,000 notes). Every account
is then marked seen now, the follow mirror and the feeds are rebuilt
(outboxes, and every inbox, batched), and the reconcile runs four times:
on clean inboxes; after damage behind the application's back to
``--fraction`` of the inboxes (per damaged inbox one fault: a note removed,
a stray note added, or a score moved), with repair; and a last dry run that
must find nothing. The figures reported must equal the damage done. Prints
one line per run and writes ``bench/results/inbox_reconcile.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BASE_DIR))

import atexit  # noqa: E402

from bench.db import ensure_database  # noqa: E402
from bench.memory import TUNED  # noqa: E402
from bench.servers import PrivateRedis  # noqa: E402

if "--redis-url" in sys.argv:
    os.environ["REDIS_URL"] = sys.argv[sys.argv.index("--redis-url") + 1]
else:
    _server = PrivateRedis(config=TUNED)
    atexit.register(_server.stop)
    os.environ["REDIS_URL"] = _server.url
os.environ["DATABASE_URL"] = os.environ.get("BENCH_INBOX_DATABASE_URL", "mysql://root:@127.0.0.1:3306/followfeed_bench_inboxes")
ensure_database(os.environ["DATABASE_URL"])
os.environ["REDIS_KEY_PREFIX"] = "bench_inboxes:"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
os.environ.setdefault("DJANGO_DEBUG", "false")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.utils import timezone  # noqa: E402

from core import redis_keys as core_keys  # noqa: E402
from core.outbox import now_ms  # noqa: E402
from core.redis import get_redis  # noqa: E402
from feed import redis_keys  # noqa: E402
from feed.models import Note  # noqa: E402
from feed.rebuild import rebuild_all_inboxes  # noqa: E402
from feed.reconcile import reconcile_inboxes  # noqa: E402
from social.models import Follow  # noqa: E402
from social.rebuild import rebuild_all  # noqa: E402
from users.models import User  # noqa: E402

RESULTS = BASE_DIR / "bench" / "results" / "inbox_reconcile.json"


def ensure_data(force_import: bool) -> dict[str, float]:
    """Tables, graph and notes, every account active, mirror and feeds rebuilt; returns the seconds of each step."""
    call_command("migrate", verbosity=0)
    if force_import or not Follow.objects.exists():
        call_command("import_graph", "soc-Slashdot0902.txt.gz", "--no-rebuild", verbosity=1)
    if not Note.objects.exists():
        call_command("simulate_activity", "--no-rebuild", "--no-progress", verbosity=1)
    User.objects.update(last_seen_at=timezone.now(), is_active=True)
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    rebuild_all()
    seconds["graph_rebuild"] = time.perf_counter() - started
    started = time.perf_counter()
    stats = rebuild_all_inboxes()
    seconds["feeds_rebuild"] = time.perf_counter() - started
    seconds["inboxes"] = stats.inboxes
    get_redis().set(core_keys.sentinel_key(), now_ms())
    return seconds


def inject(fraction: float, seed: int) -> dict[str, int]:
    """Damage ``fraction`` of the non-empty inboxes, one fault each; returns what reconcile must find."""
    rng = random.Random(seed)
    client = get_redis()
    readers = list(User.objects.values_list("pk", flat=True))
    pipe = client.pipeline(transaction=False)
    for reader_id in readers:
        pipe.zrange(redis_keys.inbox_key(reader_id), 0, -1, withscores=True)
    inboxes = {reader_id: rows for reader_id, rows in zip(readers, pipe.execute()) if rows}
    chosen = rng.sample(sorted(inboxes), max(1, int(len(inboxes) * fraction)))
    expected = {"readers_drifted": len(chosen), "notes_missing": 0, "notes_extra": 0, "scores_wrong": 0}
    top_note = Note.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    pipe = client.pipeline(transaction=False)
    for reader_id in chosen:
        key = redis_keys.inbox_key(reader_id)
        member, score = rng.choice(inboxes[reader_id])
        fault = rng.random()
        if fault < 0.4:
            pipe.zrem(key, member)
            expected["notes_missing"] += 1
        elif fault < 0.7:
            pipe.zadd(key, {str(top_note + 1 + rng.randrange(10**6)): score})  # an id no note has
            expected["notes_extra"] += 1
        else:
            pipe.zadd(key, {member: score + rng.choice((-1, 1, 3_600_000))})
            expected["scores_wrong"] += 1
    pipe.execute()
    return expected


def timed(**kwargs: object) -> tuple[dict[str, int], float]:
    started = time.perf_counter()
    report = reconcile_inboxes(**kwargs)  # type: ignore[arg-type]
    return report.as_dict(), time.perf_counter() - started


def line(label: str, figures: dict[str, int], seconds: float) -> str:
    rate = figures["readers_checked"] / seconds if seconds else 0.0
    names = ("readers_checked", "readers_drifted", "notes_missing", "notes_extra", "scores_wrong", "readers_repaired")
    return f"{label:<28} {seconds:7.1f} s {rate:>9,.0f} readers/s  " + " ".join(f"{name}={figures[name]:,}" for name in names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--import", dest="force_import", action="store_true", help="(re)run import_graph first")
    parser.add_argument("--fraction", type=float, default=0.01, help="fraction of the inboxes to damage (default 0.01)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--redis-url", default=None, help="use this Redis instead of starting one")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    setup = ensure_data(args.force_import)
    print(f"graph {Follow.objects.count():,} follows, {Note.objects.count():,} notes; setup {setup}", flush=True)
    runs: dict[str, dict[str, Any]] = {}
    figures, seconds = timed(repair=True)
    print(line("clean inboxes", figures, seconds), flush=True)
    assert figures["readers_drifted"] == 0, figures
    runs["clean"] = {**figures, "seconds": round(seconds, 2)}
    expected = inject(args.fraction, args.seed)
    figures, seconds = timed(repair=True)
    print(line(f"{args.fraction:.0%} of inboxes damaged", figures, seconds), flush=True)
    found = {name: figures[name] for name in expected}
    assert found == expected, (found, expected)
    assert figures["readers_repaired"] == expected["readers_drifted"], figures
    print(f"  injected {expected}; found exactly that and repaired {figures['readers_repaired']:,} inboxes")
    runs["drift"] = {**figures, "seconds": round(seconds, 2), "injected": expected}
    figures, seconds = timed(repair=False)
    assert figures["readers_drifted"] == 0, figures
    print(line("after the repair (dry run)", figures, seconds), flush=True)
    runs["after"] = {**figures, "seconds": round(seconds, 2)}
    RESULTS.write_text(
        json.dumps(
            {
                "when": timezone.now().isoformat(timespec="seconds"),
                "load_average_at_start": round(load, 2),
                "load_average_at_end": round(os.getloadavg()[0], 2),
                "fraction": args.fraction,
                "setup_seconds": {k: round(v, 1) for k, v in setup.items()},
                "runs": runs,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {RESULTS.relative_to(BASE_DIR)}")


if __name__ == "__main__":
    main()

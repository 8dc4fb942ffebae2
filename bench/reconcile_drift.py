"""Reconcile throughput (edges/s) over the whole real graph, with no drift and with 1% injected drift.

Runs against its own MariaDB database and Redis key prefix, so it never
touches the demo's or the tests' data:

    DATABASE_URL=mysql://root:@127.0.0.1:3306/followfeed_bench_reconcile \\
    REDIS_KEY_PREFIX=bench_reconcile: .venv/bin/python bench/reconcile_drift.py [--import]

``--import`` (or an empty database) creates the database's tables and runs
``manage.py import_graph soc-Slashdot0902.txt.gz`` first. The mirror lives
in a redis-server of the bench's own on a spare port (``--redis-url`` to use
another), rebuilt from the database at the start: 330,000 keys in a shared
Redis would slow every SCAN the other users of that Redis run (the tests'
per-prefix cleanup). Then, for each check level, it times a whole-graph
reconcile of an in-sync mirror; injects drift behind the application's back
into 1% of the edges (one fault per chosen edge, on one side: a member
removed from the set or from the zset, a score moved, or a non-edge added)
and times the repairing reconcile; asserts the figures equal what was
injected, and that a last dry run finds nothing. Prints one line per run.
"""

from __future__ import annotations

import argparse
import atexit
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BASE_DIR))


def _own_redis() -> str:
    """Start a redis-server without persistence on a spare port (ended at exit); returns its URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    atexit.register(server.kill)
    for _ in range(100):
        if subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, check=False).stdout.strip() == b"PONG":
            break
        time.sleep(0.05)
    return f"redis://127.0.0.1:{port}/0"


if "--redis-url" in sys.argv:
    os.environ["REDIS_URL"] = sys.argv[sys.argv.index("--redis-url") + 1]
else:
    os.environ["REDIS_URL"] = _own_redis()
os.environ.setdefault("DATABASE_URL", "mysql://root:@127.0.0.1:3306/followfeed_bench_reconcile")
os.environ.setdefault("REDIS_KEY_PREFIX", "bench_reconcile:")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
os.environ.setdefault("DJANGO_DEBUG", "false")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db.models import Max, Min  # noqa: E402

from core.redis import get_redis  # noqa: E402
from social import redis_keys  # noqa: E402
from social.models import (  # noqa: E402
    Follow,
    follow_score,
)
from social.rebuild import rebuild_all  # noqa: E402
from social.reconcile import reconcile_all  # noqa: E402


def ensure_graph(force_import: bool) -> float:
    """Create the tables, import the Slashdot graph if asked or if there are no follows, and
    rebuild the mirror; returns the rebuild's seconds."""
    call_command("migrate", verbosity=0)
    if force_import or not Follow.objects.exists():
        call_command("import_graph", "soc-Slashdot0902.txt.gz", "--no-rebuild", verbosity=1)
    started = time.perf_counter()
    rebuild_all()
    return time.perf_counter() - started


def side_keys(follower_id: int, followee_id: int, side: str) -> tuple[str, str, int]:
    """(set_key, zset_key, member) of one side of an edge; the graph has no sharded account."""
    if side == "following":
        return redis_keys.following_set_key(follower_id), redis_keys.following_zset_key(follower_id), followee_id
    return redis_keys.followers_set_key(followee_id), redis_keys.followers_zset_key(followee_id), follower_id


def inject_drift(fraction: float, seed: int) -> dict[str, int]:
    """Damage ``fraction`` of the edges in Redis behind the application's back.

    :returns: the figures reconcile must report: ``edges_missing``,
        ``edges_extra``, ``scores_wrong`` (one per damaged edge and side).
    """
    rng = random.Random(seed)
    bounds = Follow.objects.aggregate(low=Min("id"), high=Max("id"))
    total = Follow.objects.count()
    wanted = int(total * fraction)
    chosen: list[tuple[int, int, int]] = []
    seen: set[int] = set()
    while len(chosen) < wanted:
        ids = [i for i in rng.sample(range(bounds["low"], bounds["high"] + 1), min(20_000, wanted * 2)) if i not in seen]
        for follower_id, followee_id, created_at in Follow.objects.filter(id__in=ids).values_list(
            "follower_id", "followee_id", "created_at"
        ):
            chosen.append((follower_id, followee_id, follow_score(created_at)))
        seen.update(ids)
    chosen = chosen[:wanted]
    user_high = max(max(a, b) for a, b, _ in chosen)
    expected = {"edges_missing": 0, "edges_extra": 0, "scores_wrong": 0}
    client = get_redis()
    pipe = client.pipeline(transaction=False)
    extras: list[tuple[int, int]] = []
    for follower_id, followee_id, score in chosen:
        side = rng.choice(("following", "followers"))
        set_key, zset_key, member = side_keys(follower_id, followee_id, side)
        fault = rng.random()
        if fault < 0.35:
            pipe.srem(set_key, member)
            expected["edges_missing"] += 1
        elif fault < 0.7:
            pipe.zrem(zset_key, member)
            expected["edges_missing"] += 1
        elif fault < 0.85:
            pipe.zadd(zset_key, {str(member): score + rng.choice((-86_400, -1, 1, 3_600))})
            expected["scores_wrong"] += 1
        else:
            extras.append((follower_id, rng.randint(1, user_high)))
    # A non-edge added to one side (both members of the pair must not follow already).
    existing = set(Follow.objects.filter(follower_id__in={a for a, _ in extras}).values_list("follower_id", "followee_id"))
    for follower_id, followee_id in dict.fromkeys(extras):
        if follower_id == followee_id or (follower_id, followee_id) in existing:
            continue
        set_key, zset_key, member = side_keys(follower_id, followee_id, rng.choice(("following", "followers")))
        pipe.sadd(set_key, member) if rng.random() < 0.5 else pipe.zadd(zset_key, {str(member): 1_234_567_890})
        expected["edges_extra"] += 1
    pipe.execute()
    return expected


def timed(**kwargs: object) -> tuple[dict[str, int], float]:
    started = time.perf_counter()
    report = reconcile_all(**kwargs)  # type: ignore[arg-type]
    return report.as_dict(), time.perf_counter() - started


def line(label: str, figures: dict[str, int], seconds: float) -> str:
    rate = figures["edges_checked"] / seconds if seconds else 0.0
    return (
        f"{label:<34} {seconds:7.1f} s  {rate:>9,.0f} edges/s  users={figures['users_checked']:,} "
        f"edges={figures['edges_checked']:,} drifted_users={figures['users_drifted']:,} "
        f"missing={figures['edges_missing']:,} extra={figures['edges_extra']:,} "
        f"scores_wrong={figures['scores_wrong']:,} repaired={figures['pairs_repaired']:,}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--import", dest="force_import", action="store_true", help="(re)run import_graph first")
    parser.add_argument("--fraction", type=float, default=0.01, help="fraction of edges to damage (default 0.01)")
    parser.add_argument("--checks", default="counts,digest,full", help="check levels to time (comma-separated)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--redis-url", default=None, help="use this Redis instead of starting one")
    args = parser.parse_args()
    rebuild_seconds = ensure_graph(args.force_import)
    edges = Follow.objects.count()
    print(
        f"graph: {edges:,} follows; mirror rebuilt in {rebuild_seconds:.1f} s; batch 1000 accounts; "
        f"Redis {os.environ['REDIS_URL']} prefix {os.environ['REDIS_KEY_PREFIX']}",
        flush=True,
    )
    for check in args.checks.split(","):
        figures, seconds = timed(repair=True, check=check)
        print(line(f"{check}: no drift", figures, seconds), flush=True)
        assert figures["edges_missing"] + figures["edges_extra"] + figures["scores_wrong"] == 0, figures
        expected = inject_drift(args.fraction, args.seed)
        figures, seconds = timed(repair=True, check=check)
        print(line(f"{check}: {args.fraction:.0%} drift, repair", figures, seconds), flush=True)
        found = {name: figures[name] for name in expected}
        if check == "counts":
            # Counts alone cannot see a moved score unless its account drifted otherwise.
            print(f"  injected {expected}; found {found}")
            reconcile_all(repair=True, check="full")
        else:
            assert found == expected, (found, expected)
            print(f"  injected {expected}; found exactly that")
        after, _ = timed(repair=False, check="full")
        assert after["edges_missing"] + after["edges_extra"] + after["scores_wrong"] == 0, after
    print("after every repair a full dry run found no drift")


if __name__ == "__main__":
    main()

"""Benchmark: the same work on one Redis server and on a 6-node Redis Cluster, in one run.

Prints numbers, asserts nothing, and writes ``bench/results/cluster.json``.
Run with MariaDB up (``make test`` starts it)::

    .venv/bin/python bench/cluster_compare.py [--fans 20000] [--reads 500]

Starts a private ``redis-server`` and a private cluster (3 masters, 3
replicas, ``tests.cluster``) on free loopback ports, and for each runs a
child process pointed at it (``REDIS_URL``) on its own MariaDB database
(``followfeed_bench_cluster``: the wiki-Vote graph and a ``--fans``-follower
account, created once). Each child times: the graph's mirror rebuild
(``social.rebuild.rebuild_all``), one fan-out of a note to every fan (one
job, pushed), and ``followers_page`` (50 rows) of the big account and of an
ordinary one (p50 and p99 over ``--reads``). All servers share this
machine's cores, so the cluster figures include three masters competing
with the application for them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATABASE_URL = "mysql://root:@127.0.0.1:3306/followfeed_bench_cluster"


def parent(args: argparse.Namespace) -> None:
    from bench.servers import PrivateRedis
    from tests.cluster import RedisClusterNodes

    single = PrivateRedis()
    cluster = RedisClusterNodes()
    cluster.start()
    results = {}
    try:
        for label, url in (("single", single.url), ("cluster", cluster.url)):
            child = subprocess.run(
                [sys.executable, __file__, "--child", "--fans", str(args.fans), "--reads", str(args.reads)],
                env={**os.environ, "REDIS_URL": url},
                capture_output=True,
                text=True,
                check=False,
                cwd=ROOT,
            )
            if child.returncode != 0:
                raise SystemExit(f"{label} run failed:\n{child.stderr[-3000:]}")
            results[label] = json.loads(child.stdout.strip().splitlines()[-1])
            print(f"{label}: " + ", ".join(f"{name} {value}" for name, value in results[label].items()))
    finally:
        single.stop()
        cluster.stop()
    ratios = {
        name: round(results["cluster"][name] / results["single"][name], 2)
        for name in results["single"]
        if results["single"][name]
    }
    print("cluster / single: " + ", ".join(f"{name} {ratio}x" for name, ratio in ratios.items()))
    output = {
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": "python bench/cluster_compare.py " + " ".join(sys.argv[1:]),
        "cpus": os.cpu_count(),
        "load_1m": round(os.getloadavg()[0], 2),
        "results": results,
        "cluster_over_single": ratios,
    }
    (ROOT / "bench" / "results" / "cluster.json").write_text(json.dumps(output, indent=2) + "\n")


def child(args: argparse.Namespace) -> None:
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings.base",
            "DATABASE_URL": DATABASE_URL,
            "REDIS_KEY_PREFIX": "benchcluster:",
            "CELERY_TASK_ALWAYS_EAGER": "true",
            "FANOUT_PULL_THRESHOLD": "100000000",
            "FEED_FANOUT_PART_FOLLOWERS": "100000000",  # one job: the cluster's cost, not the workers'
        }
    )
    from bench.db import ensure_database
    from bench.servers import unlink_matching

    ensure_database(DATABASE_URL)
    import django

    django.setup()
    from io import StringIO

    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from core.cluster import pipeline
    from core.outbox import now_ms
    from core.redis import get_redis, write_sentinels
    from datatools.celebrity import celebrity_make
    from feed import outbox as feed_outbox
    from feed import redis_keys as feed_keys
    from feed.models import Note
    from social import selectors
    from social.models import Follow
    from social.rebuild import rebuild_all
    from users.models import User

    if not User.objects.filter(username="u3").exists():
        call_command("import_graph", "wiki-Vote.txt.gz", "--no-rebuild", stdout=StringIO(), verbosity=0)
    made = celebrity_make(username="bench_cluster_star", followers=args.fans, rebuild=False)
    client = get_redis()
    began = time.perf_counter()
    rebuild_all()
    rebuild_seconds = time.perf_counter() - began
    write_sentinels(client, now_ms())
    edges = Follow.objects.count()

    fans = list(Follow.objects.filter(followee_id=made.user_id).values_list("follower_id", flat=True))
    pipe = pipeline(client)
    for fan in fans:
        pipe.set(feed_keys.inbox_synced_key(fan), "1", ex=3600)
    pipe.execute()
    note = Note.objects.create(author_id=made.user_id, body="to every fan")
    began = time.perf_counter()
    fan_out = feed_outbox.note_fan_out(note_id=note.pk)
    fan_out_seconds = time.perf_counter() - began

    ordinary = Follow.objects.values_list("followee_id", flat=True).exclude(followee_id=made.user_id).first()

    def page_ms(user_id: int) -> list[float]:
        times = []
        for _ in range(args.reads):
            start = time.perf_counter()
            selectors.followers_page(user_id=user_id, cursor=None, limit=50)
            times.append((time.perf_counter() - start) * 1000)
        return sorted(times)

    big, small = page_ms(made.user_id), page_ms(int(ordinary or made.user_id))
    unlink_matching(client, "benchcluster:*")
    print(
        json.dumps(
            {
                "graph_edges": edges,
                "rebuild_s": round(rebuild_seconds, 2),
                "rebuild_edges_per_s": round(edges / rebuild_seconds),
                "fan_out_inboxes": fan_out.inbox_writes,
                "fan_out_s": round(fan_out_seconds, 3),
                "fan_out_writes_per_s": round(fan_out.inbox_writes / fan_out_seconds),
                "followers_page_big_p50_ms": round(statistics.median(big), 3),
                "followers_page_big_p99_ms": round(big[int(len(big) * 0.99) - 1], 3),
                "followers_page_p50_ms": round(statistics.median(small), 3),
                "followers_page_p99_ms": round(small[int(len(small) * 0.99) - 1], 3),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fans", type=int, default=20_000)
    parser.add_argument("--reads", type=int, default=500)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    (child if args.child else parent)(args)


if __name__ == "__main__":
    main()

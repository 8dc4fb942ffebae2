"""What the metrics cost: the write path and the home page with metrics on, off, and with the per-query counters.

Run it alone or from ``make bench``::

    .venv/bin/python bench/metrics_cost.py [--rounds 3] [--budget 3] [--out bench/results/metrics_cost.json]

What it does:

0. Starts a private ``redis-server`` (``bench.servers``); its own database
   ``followfeed_bench_metrics`` (``BENCH_METRICS_DATABASE_URL``), created and
   migrated once, with a reader following 300 authors (2 notes each) and 200
   accounts to follow; its own RabbitMQ queue, which no worker consumes
   (the messages' cost is counted), deleted at the end.
1. In rounds that take turns, a fresh process per mode: ``on`` (the
   default: django-prometheus's middleware and followfeed's own recorders,
   into a ``PROMETHEUS_MULTIPROC_DIR``), ``off`` (``METRICS_ENABLED=false``)
   and ``queries`` (the default plus the database and cache wrappers,
   ``METRICS_QUERIES=true``), each timing through Django's test client
   (every middleware): the write path (``PUT /api/follow/<id>/true`` then
   ``/false``) and the reader's home page (``GET /``).
2. Reports each figure per mode (the median over rounds: the p50 of the
   wall time, and the process's CPU time per call) and the overhead of
   ``on`` and of ``queries`` over ``off`` (the goal: under 5% for ``on``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_DATABASE_URL = "mysql://root:@127.0.0.1:3306/followfeed_bench_metrics"
QUEUE = "bench_metrics"
READER = "mc_reader"
AUTHORS = 300
TARGETS = 200


MODES = ("on", "off", "queries")  # the default metrics, none, and the default plus the per-query counters


def child_environment(*, mode: str, directory: str) -> dict[str, str]:
    metrics = mode != "off"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench.settings",
        "DATABASE_URL": os.environ.get("BENCH_METRICS_DATABASE_URL", DEFAULT_DATABASE_URL),
        "CELERY_TASK_DEFAULT_QUEUE": QUEUE,
        "DJANGO_ALLOWED_HOSTS": "testserver,localhost",
        "METRICS_ENABLED": "true" if metrics else "false",
        "METRICS_QUERIES": "true" if mode == "queries" else "false",
    }
    if metrics:
        env["PROMETHEUS_MULTIPROC_DIR"] = directory
    else:
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    return env


def setup_data() -> None:
    """The reader, its authors and notes, the targets; the Redis side rebuilt from the database."""
    import django

    django.setup()
    from datetime import timedelta

    from django.contrib.auth.hashers import make_password
    from django.core.management import call_command
    from django.utils import timezone

    from core.outbox import now_ms
    from core.redis import get_redis, write_sentinels
    from feed.models import Note
    from feed.rebuild import inbox_rebuild, pull_authors_rebuild
    from social.models import Follow
    from social.rebuild import rebuild_all
    from users.models import User

    call_command("migrate", verbosity=0)
    if not User.objects.filter(username=READER).exists():
        password = make_password("followfeed")
        now = timezone.now()
        reader = User.objects.create(username=READER, password=password, last_seen_at=now)
        User.objects.bulk_create([User(username=f"mc_author_{n}", password=password, last_seen_at=now) for n in range(AUTHORS)])
        User.objects.bulk_create([User(username=f"mc_target_{n}", password=password, last_seen_at=now) for n in range(TARGETS)])
        authors = list(User.objects.filter(username__startswith="mc_author_").values_list("pk", flat=True))
        Follow.objects.bulk_create([Follow(follower_id=reader.pk, followee_id=author) for author in authors])
        Note.objects.bulk_create(
            [
                Note(
                    author_id=authors[i % len(authors)],
                    body=f"metrics cost note {i}",
                    created_at=now - timedelta(seconds=7 * i + 60),
                    fanned_out_at=now,
                )
                for i in range(2 * AUTHORS)
            ]
        )
    reader_id = User.objects.get(username=READER).pk
    Follow.objects.filter(follower_id=reader_id, followee__username__startswith="mc_target_").delete()
    rebuild_all()
    pull_authors_rebuild()
    inbox_rebuild(user_id=reader_id)
    write_sentinels(get_redis(), now_ms())


def measure(budget: float) -> dict[str, float]:
    """p50 (microseconds) of a follow + unfollow through the API and of the reader's home page."""
    import django

    django.setup()
    from django.test import Client

    from bench import timing
    from users.models import User

    reader = User.objects.get(username=READER)
    targets = list(User.objects.filter(username__startswith="mc_target_").order_by("pk").values_list("pk", flat=True))
    client = Client()
    client.force_login(reader)

    def write(index: int) -> None:
        target = targets[index % len(targets)]
        for way in ("true", "false"):
            response = client.put(f"/api/follow/{target}/{way}")
            if response.status_code != 200:
                raise SystemExit(f"PUT /api/follow/{target}/{way}: {response.status_code} {response.content[:300]!r}")

    def home(_: int) -> None:
        response = client.get("/")
        if response.status_code != 200:
            raise SystemExit(f"GET /: {response.status_code}")

    # CPU time of this process too: the metrics' cost is all here, and it moves less than the
    # wall clock when other processes share the machine.
    cpu = time.process_time()
    writes, _ = timing.collect(write, budget_seconds=budget, max_calls=len(targets))
    write_cpu = time.process_time() - cpu
    cpu = time.process_time()
    pages, _ = timing.collect(home, budget_seconds=budget)
    home_cpu = time.process_time() - cpu
    warmup = timing.WARMUP_CALLS
    return {
        "write_p50_us": timing.summarize(writes).p50_us,
        "home_p50_us": timing.summarize(pages).p50_us,
        "write_cpu_us": write_cpu / (len(writes) + warmup) * 1e6,
        "home_cpu_us": home_cpu / (len(pages) + warmup) * 1e6,
        "writes": len(writes),
        "pages": len(pages),
    }


def delete_queue() -> None:
    from kombu.connection import Connection

    with Connection(os.environ.get("CELERY_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//")) as connection:
        connection.default_channel.queue_delete(QUEUE)  # a queue never declared is no error


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each one process per mode (default 3)")
    parser.add_argument("--budget", type=float, default=3.0, help="seconds of calls per figure per process (default 3)")
    parser.add_argument("--redis-url", default=None, help="use this Redis instead of a private redis-server")
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    parser.add_argument("--child", choices=["setup", "measure"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child == "setup":
        setup_data()
        return 0
    if args.child == "measure":
        print(json.dumps(measure(args.budget)))
        return 0

    from bench.db import ensure_database
    from bench.servers import redis_for_run

    ensure_database(os.environ.get("BENCH_METRICS_DATABASE_URL", DEFAULT_DATABASE_URL))
    results: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    with redis_for_run(args.redis_url), tempfile.TemporaryDirectory(prefix="ff-metrics-") as directory:
        me = [sys.executable, str(Path(__file__).resolve())]
        subprocess.run([*me, "--child", "setup"], env=child_environment(mode="off", directory=directory), check=True, cwd=ROOT)
        try:
            for round_index in range(args.rounds):
                # Take turns, starting with another mode each round (no mode always runs on a warmer machine).
                order = MODES[round_index % len(MODES) :] + MODES[: round_index % len(MODES)]
                for mode in order:
                    done = subprocess.run(
                        [*me, "--child", "measure", "--budget", str(args.budget)],
                        env=child_environment(mode=mode, directory=directory),
                        check=True,
                        cwd=ROOT,
                        capture_output=True,
                        text=True,
                    )
                    results[mode].append(json.loads(done.stdout.strip().splitlines()[-1]))
        finally:
            delete_queue()
    report: dict[str, Any] = {"rounds": results}
    for figure in ("write_p50_us", "home_p50_us", "write_cpu_us", "home_cpu_us"):
        median = {mode: statistics.median(run[figure] for run in results[mode]) for mode in MODES}
        report[figure] = {
            **{mode: round(value, 1) for mode, value in median.items()},
            "overhead_percent": round((median["on"] / median["off"] - 1) * 100, 1),
            "with_queries_overhead_percent": round((median["queries"] / median["off"] - 1) * 100, 1),
        }
    print(json.dumps({key: value for key, value in report.items() if key != "rounds"}, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

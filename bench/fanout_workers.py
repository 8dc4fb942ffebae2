"""Benchmark: a 100k-follower author's fan-out split into parts, delivered by 1, 2 and 4 Celery workers.

Prints numbers, asserts nothing, and writes ``bench/results/fanout_workers.json``.
Run with the services up (``make test`` starts them)::

    .venv/bin/python bench/fanout_workers.py [--followers 100000] [--workers 1 2 4] [--notes 2]

It uses its own MariaDB database (``followfeed_bench_workers``, created and
migrated if missing; the fans are created once, re-runs reuse them), its own
Redis key prefix (``benchworkers:``, removed at the end) and its own
RabbitMQ queue. The author is pushed, not pulled (``FANOUT_PULL_THRESHOLD``
raised), and every fan's inbox is marked synced, so each of the
``ceil(followers / FEED_FANOUT_PART_FOLLOWERS)`` parts writes every inbox of
its followers.

Measured per worker count: the time from a note's commit until its last
part is applied (the median over ``--notes``), inbox writes per second, and
the speed-up over one worker; with the load average, since on a 2-core
machine the workers, MariaDB, Redis and RabbitMQ share the same cores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.support.commands import celery_worker_command  # noqa: E402

DATABASE_URL = "mysql://root:@127.0.0.1:3306/followfeed_bench_workers"
ENVIRONMENT = {
    "DJANGO_SETTINGS_MODULE": "config.settings.base",
    "DATABASE_URL": DATABASE_URL,
    "REDIS_URL": os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"),
    "REDIS_KEY_PREFIX": "benchworkers:",
    "CELERY_BROKER_URL": "amqp://guest:guest@127.0.0.1:5672//",
    "CELERY_TASK_ALWAYS_EAGER": "false",
    "FANOUT_PULL_THRESHOLD": "100000000",  # the big author is pushed: that is what is timed
    "FEED_FANOUT_PART_FOLLOWERS": os.environ.get("FEED_FANOUT_PART_FOLLOWERS", "5000"),
}
os.environ.update(ENVIRONMENT)


def start_workers(count: int, queue: str) -> list[subprocess.Popen[bytes]]:
    """``count`` solo-pool workers on ``queue``, ready when this returns."""
    logs = [Path(f"/tmp/{queue}-{index}.log") for index in range(count)]
    workers = [
        subprocess.Popen(
            celery_worker_command(queue, f"{queue}-{index}@%h"),
            cwd=ROOT,
            env={**os.environ, "CELERY_TASK_DEFAULT_QUEUE": queue},
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        for index, log in enumerate(logs)
    ]
    deadline = time.monotonic() + 60
    while not all(b"ready" in log.read_bytes() for log in logs):
        if time.monotonic() > deadline or any(worker.poll() is not None for worker in workers):
            for worker in workers:
                worker.kill()
            raise SystemExit("a worker did not start: " + " | ".join(log.read_text()[-500:] for log in logs))
        time.sleep(0.1)
    return workers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--followers", type=int, default=100_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--notes", type=int, default=2, help="fan-outs timed per worker count (median reported)")
    args = parser.parse_args()

    from bench.db import ensure_database
    from bench.servers import unlink_matching

    ensure_database(DATABASE_URL)
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    os.environ["CELERY_LOG_LEVEL"] = "WARNING"

    from config.celery_app import app
    from core.models import OutboxEntry
    from core.outbox import now_ms
    from core.redis import get_redis, write_sentinels
    from datatools.celebrity import celebrity_make
    from feed import delivery, services
    from feed import redis_keys as feed_keys
    from feed.outbox import NOTE_PART_KIND
    from social.models import Follow
    from social.rebuild import rebuild_all
    from users.models import User

    started = time.perf_counter()
    made = celebrity_make(username="bench_wide", followers=args.followers, rebuild=False)
    client = get_redis()
    rebuild_all()
    write_sentinels(client, now_ms())
    fans = list(Follow.objects.filter(followee_id=made.user_id).values_list("follower_id", flat=True))
    pipe = client.pipeline(transaction=False)
    for fan in fans:
        pipe.set(feed_keys.inbox_synced_key(fan), "1", ex=3600)
    pipe.execute()
    parts = delivery.fan_out_parts(len(fans))
    author = User.objects.get(pk=made.user_id)
    print(
        f"setup: {len(fans):,} followers of bench_wide, {parts} parts of {settings.FEED_FANOUT_PART_FOLLOWERS} ({time.perf_counter() - started:.1f}s)"
    )

    app.conf.task_always_eager = False
    figures = []
    for count in args.workers:
        queue = f"ff_bench_workers_{uuid.uuid4().hex[:8]}"
        app.conf.task_default_queue = queue
        workers = start_workers(count, queue)
        try:
            times = []
            for round_number in range(args.notes):
                began = time.perf_counter()
                note = services.note_create(author=author, body=f"wide note, {count} workers, round {round_number}")
                entries = OutboxEntry.objects.filter(kind=NOTE_PART_KIND, subject_id=note.pk)
                while entries.count() < parts or entries.filter(applied_at__isnull=True).exists():
                    time.sleep(0.02)
                times.append(time.perf_counter() - began)
            load = os.getloadavg()[0]
        finally:
            for worker in workers:
                worker.terminate()
            for worker in workers:
                worker.wait(timeout=30)
        median = statistics.median(times)
        figures.append(
            {
                "workers": count,
                "seconds": round(median, 3),
                "inbox_writes_per_s": round(len(fans) / median),
                "load_1m": round(load, 2),
            }
        )
        print(
            f"{count} worker(s): {median:.2f}s per fan-out to {len(fans):,} inboxes = {len(fans) / median:,.0f} inbox writes/s (load {load:.2f})"
        )
    base = figures[0]["seconds"]
    for figure in figures:
        figure["speed_up"] = round(base / figure["seconds"], 2)
    print("speed-up over 1 worker: " + ", ".join(f"{f['workers']}: {f['speed_up']}x" for f in figures))
    output = {
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": "python bench/fanout_workers.py " + " ".join(sys.argv[1:]),
        "cpus": os.cpu_count(),
        "followers": len(fans),
        "parts": parts,
        "part_followers": int(settings.FEED_FANOUT_PART_FOLLOWERS),
        "redis": settings.REDIS_URL,
        "results": figures,
    }
    (ROOT / "bench" / "results" / "fanout_workers.json").write_text(json.dumps(output, indent=2) + "\n")
    print(f"removed {unlink_matching(client, 'benchworkers:*'):,} Redis keys")


if __name__ == "__main__":
    main()

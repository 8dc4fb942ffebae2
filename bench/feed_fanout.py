"""Benchmark: fan-out throughput for a 100k-follower author, raw pipelined ZADD, home feed latency.

Prints numbers, asserts nothing. Run with the services up (``make test``
starts them)::

    .venv/bin/python bench/feed_fanout.py [--followers 100000] [--notes 3]

It uses its own MariaDB database (``followfeed_bench_feed``, created and
migrated if missing) and its own Redis key prefix (``benchfeed:``, removed at
the end unless ``--keep``). Setup is idempotent: the 100k follower accounts
(``bf<i>``, all active and seen now) and their Follow rows are bulk-inserted
once, and the author's follower set is written straight into Redis (the
brief allows it: the follow path is not what is measured here).

Measured, in the same run and process:

1. fan-out: ``feed.outbox.note_fan_out`` of a note by the 100k account
   (followers read in batches of ``FEED_FANOUT_BATCH_SIZE``, each delivered
   by ``feed.delivery.deliver``'s script, which checks the readers' activity
   itself): inbox writes per second, and the time spent in those scripts;
2. raw redis-py: the same number of ZADDs to 100k keys in pipelines of the
   same size, without and with the trim, on the same connection pool;
3. home feed: ``feed.selectors.home_timeline`` first pages and 4th pages
   (Redis path), the scroll contract, the whole ``GET /home`` view, and the
   database path (a reader catching up), p50/p99 over ``--requests`` reads,
   for 200 readers who each follow 50 of 200 authors with 60 notes each
   (3,000 candidate notes per reader, inboxes trimmed to 800).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    import redis

    from feed.delivery import Entry
    from users.models import User

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATABASE = "followfeed_bench_feed"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
os.environ.setdefault("DATABASE_URL", f"mysql://root:@127.0.0.1:3306/{DATABASE}")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/0")
os.environ.setdefault("REDIS_KEY_PREFIX", "benchfeed:")
os.environ.setdefault("FANOUT_PULL_THRESHOLD", "1000000")  # the 100k account is pushed, that is what we time
os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "true")


def ensure_database() -> None:
    import MySQLdb

    connection = MySQLdb.connect(host="127.0.0.1", user="root", passwd="")
    connection.cursor().execute(f"CREATE DATABASE IF NOT EXISTS {DATABASE} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
    connection.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--followers", type=int, default=100_000)
    parser.add_argument("--notes", type=int, default=3, help="fan-outs to time (median reported)")
    parser.add_argument("--requests", type=int, default=1000, help="feed reads per latency figure")
    parser.add_argument("--keep", action="store_true", help="keep the Redis keys afterwards")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of 200 first-page reads")
    parser.add_argument("--skip-fan-out", action="store_true", help="only the feed latency part")
    args = parser.parse_args()

    ensure_database()
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.utils import timezone

    call_command("migrate", verbosity=0)

    from core import redis_keys as core_keys
    from core.outbox import now_ms
    from core.redis import get_redis
    from social import redis_keys as social_keys
    from social.models import Follow
    from users.models import User

    client = get_redis()
    now = timezone.now()
    print(f"followfeed feed benchmark: MariaDB {DATABASE}, Redis {settings.REDIS_URL} prefix {settings.REDIS_KEY_PREFIX!r}")

    # --- setup ------------------------------------------------------------------
    started = time.perf_counter()
    author, _ = User.objects.get_or_create(username="bench_celebrity", defaults={"last_seen_at": now})
    have = User.objects.filter(username__startswith="bf").count()
    if have < args.followers:
        users = [User(username=f"bf{i}", password="!", last_seen_at=now) for i in range(have, args.followers)]
        User.objects.bulk_create(users, batch_size=5000, ignore_conflicts=True)
    User.objects.filter(username__startswith="bf").update(last_seen_at=now, is_active=True)
    follower_ids = list(
        User.objects.filter(username__startswith="bf").order_by("pk").values_list("pk", flat=True)[: args.followers]
    )
    existing = set(Follow.objects.filter(followee=author).values_list("follower_id", flat=True))
    Follow.objects.bulk_create(
        [Follow(follower_id=f, followee_id=author.pk) for f in follower_ids if f not in existing], batch_size=5000
    )
    pipe = client.pipeline(transaction=False)
    pipe.delete(social_keys.followers_set_key(author.pk))
    for start in range(0, len(follower_ids), 5000):
        pipe.sadd(social_keys.followers_set_key(author.pk), *follower_ids[start : start + 5000])
    pipe.set(core_keys.sentinel_key(), now_ms())
    pipe.execute()
    print(f"setup: {len(follower_ids):,} followers in MariaDB and Redis ({time.perf_counter() - started:.1f}s)")

    from feed import delivery

    batch = delivery.fan_out_batch_size()
    if not args.skip_fan_out:
        bench_fan_out(args, author, batch)
        bench_raw_zadd(client, follower_ids, batch)
    bench_feed(args, client, now)


def bench_fan_out(args: argparse.Namespace, author: User, batch: int) -> None:
    """1. fan-out of a note by the 100k account, split into activity queries and pipelines."""
    from feed import delivery
    from feed import outbox as feed_outbox
    from feed.models import Note

    # The readers' activity is checked inside the delivery script now (no query of its own to time).
    split = {"redis delivery": 0.0}
    real_deliver = delivery.deliver

    def timed_deliver(
        client: redis.Redis, reader_ids: Sequence[int], author_id: int, entries: Sequence[Entry], *, announce: bool = True
    ) -> int:
        t = time.perf_counter()
        try:
            return real_deliver(client, reader_ids, author_id, entries, announce=announce)
        finally:
            split["redis delivery"] += time.perf_counter() - t

    delivery.deliver = timed_deliver
    rates, times, writes_seen = [], [], 0
    for i in range(args.notes):
        note = Note.objects.create(author=author, body=f"bench note {i}")
        t = time.perf_counter()
        result = feed_outbox.note_fan_out(note_id=note.pk)
        elapsed = time.perf_counter() - t
        times.append(elapsed)
        rates.append(result.inbox_writes / elapsed)
        writes_seen = result.inbox_writes
    delivery.deliver = real_deliver
    fan_out_rate = statistics.median(rates)
    print(
        f"fan-out of one note to {writes_seen:,} inboxes (batch {batch}): median {statistics.median(times):.2f}s "
        f"= {fan_out_rate:,.0f} inbox writes/s over {args.notes} notes "
        f"(Redis delivery scripts {split['redis delivery'] / args.notes:.2f}s per note)"
    )


def bench_raw_zadd(client: redis.Redis, follower_ids: list[int], batch: int) -> None:
    """2. raw redis-py pipelined ZADD (and ZADD + trim) to one key per follower."""
    from django.conf import settings

    raw_prefix = f"{settings.REDIS_KEY_PREFIX}raw:"
    keys = [f"{raw_prefix}inbox:{{{f}}}" for f in follower_ids]
    for trim in (False, True):
        t = time.perf_counter()
        for start in range(0, len(keys), batch):
            pipe = client.pipeline(transaction=False)
            for key in keys[start : start + batch]:
                pipe.zadd(key, {"123456789": 1_700_000_000_000})
                if trim:
                    pipe.zremrangebyrank(key, 0, -801)
            pipe.execute()
        elapsed = time.perf_counter() - t
        label = "ZADD + ZREMRANGEBYRANK" if trim else "ZADD"
        print(f"raw redis-py pipelined {label}, {len(keys):,} keys in pipelines of {batch}: {len(keys) / elapsed:,.0f} writes/s")


def bench_feed(args: argparse.Namespace, client: redis.Redis, now: datetime) -> None:
    """3. home feed latency on the Redis and database paths."""
    from django.conf import settings

    from feed import redis_keys, selectors
    from feed.models import Note, from_ms
    from feed.rebuild import inbox_rebuild
    from social import redis_keys as social_keys
    from social.models import Follow
    from users.models import User

    random.seed(7)
    authors = list(User.objects.filter(username__startswith="bf").order_by("pk").values_list("pk", flat=True)[:200])
    readers = list(User.objects.filter(username__startswith="bf").order_by("-pk").values_list("pk", flat=True)[:200])
    if not Note.objects.filter(author_id=authors[0]).exists():
        base = int((now.timestamp() - 86400) * 1000)
        Note.objects.bulk_create(
            [
                Note(
                    author_id=a,
                    body=f"note {n} by {a}",
                    created_at=from_ms(base + random.randrange(86_400_000)),
                    fanned_out_at=now,
                )
                for a in authors
                for n in range(60)
            ],
            batch_size=5000,
        )
        Follow.objects.bulk_create(
            [Follow(follower_id=r, followee_id=a) for r in readers for a in random.sample(authors, 50)],
            batch_size=5000,
            ignore_conflicts=True,
        )
    followees: dict[int, list[int]] = {r: [] for r in readers}
    for r, a in Follow.objects.filter(follower_id__in=readers).values_list("follower_id", "followee_id"):
        followees[r].append(a)
    pipe = client.pipeline(transaction=False)
    for r, ids in followees.items():  # the follow mirror of the readers, written directly
        pipe.delete(social_keys.following_set_key(r))
        pipe.sadd(social_keys.following_set_key(r), *ids)
    pipe.execute()
    for r in readers:
        inbox_rebuild(user_id=r)
    inbox_sizes = [client.zcard(redis_keys.inbox_key(r)) for r in readers]
    print(
        f"feed readers: {len(readers)} following 50 of 200 authors (60 notes each) and the 100k account; "
        f"inbox size median {statistics.median(inbox_sizes):.0f}"
    )

    def measure(label: str, read) -> None:
        samples = []
        for _ in range(args.requests):
            reader = random.choice(readers)
            t = time.perf_counter()
            read(reader)
            samples.append(time.perf_counter() - t)
        print(f"{label}: p50 {ms(percentile(samples, 50))}, p99 {ms(percentile(samples, 99))} over {len(samples)} reads")

    cursors = {}
    for r in readers:
        cursor = None
        for _ in range(3):
            cursor = selectors.home_timeline(user_id=r, cursor=cursor, limit=20).next_cursor
        cursors[r] = cursor
    measure("home feed, first page of 20 (Redis)", lambda r: selectors.home_timeline(user_id=r, cursor=None, limit=20))
    measure("home feed, 4th page of 20 (Redis)", lambda r: selectors.home_timeline(user_id=r, cursor=cursors[r], limit=20))
    measure(
        "home feed, scroll contract first page of 20 (Redis)",
        lambda r: selectors.home_timeline_scroll(user_id=r, last_id=None, offset=0, limit=20),
    )

    from django.test import Client

    page_client = Client(HTTP_HOST="localhost")
    view_readers = User.objects.in_bulk(readers[:50])

    # force_login costs a session write; time the page alone.
    samples = []
    for _ in range(min(args.requests, 300)):
        r = random.choice(readers[:50])
        page_client.force_login(view_readers[r])
        t = time.perf_counter()
        assert page_client.get("/home").status_code == 200
        samples.append(time.perf_counter() - t)
    print(
        f"GET /home (whole view with template, Redis): p50 {ms(percentile(samples, 50))}, p99 {ms(percentile(samples, 99))} over {len(samples)} requests"
    )
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(200):
            selectors.home_timeline(user_id=random.choice(readers), cursor=None, limit=20)
        profiler.disable()
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)

    for r in readers:
        client.delete(redis_keys.inbox_synced_key(r))
        client.set(redis_keys.inbox_rebuilding_key(r), "1", ex=600)
    measure(
        "home feed, first page of 20 (database path, catching up)",
        lambda r: selectors.home_timeline(user_id=r, cursor=None, limit=20),
    )
    for r in readers:
        client.delete(redis_keys.inbox_rebuilding_key(r))

    if not args.keep:
        removed = 0
        for key in client.scan_iter(match=f"{settings.REDIS_KEY_PREFIX}*", count=5000):
            removed += client.unlink(key)
        print(f"removed {removed:,} keys under {settings.REDIS_KEY_PREFIX!r}")


if __name__ == "__main__":
    main()

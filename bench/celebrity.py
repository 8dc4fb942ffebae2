"""The cost of a celebrity: a 1,000,000-follower account next to a 100-follower account, same run.

Run with a MariaDB database and a Redis key prefix of its own (the script
creates and migrates the database; re-runs reuse the accounts):

    export DATABASE_URL=mysql://root:@127.0.0.1:3306/followfeed_bench_celebrity \\
           REDIS_URL=redis://127.0.0.1:6379/0 REDIS_KEY_PREFIX=benchceleb:
    .venv/bin/python bench/celebrity.py [--followers 1000000] [--repeat 300]

What it does and prints:

1. ``make_celebrity`` for ``bench_celebrity`` (``--followers``) and
   ``bench_small`` (100): real accounts and Follow rows, then a rebuild of
   each account's keys (sharded above FOLLOWERS_SHARD_THRESHOLD).
2. Key sizes: SCAN over every key under REDIS_KEY_PREFIX with SCARD/ZCARD,
   the largest key, and the check that none holds more than
   ``followers / FOLLOWERS_SHARDS * 1.2`` members (exit 1 otherwise).
3. Redis memory (MEMORY USAGE, bytes) of each account's follower keys.
4. For each account, ``--repeat`` times: follow and unfollow by a fresh
   account (``follow_create``/``follow_delete`` with their after-commit
   mirror apply), ``is_following``, the followers-side membership check
   (the one shard that can hold the follower), ``follow_counts``, the first
   followers page and the 10,000th (page size FOLLOW_PAGE_SIZE; the cursor
   is computed from the database's order, and the page's content is
   checked against it). Latencies in ms, p50 and p99.

Timings include Python, the Redis round trips and the page's one SQL
query for the accounts shown; on a shared 2-core machine they are noisy,
so compare the two accounts, not absolute values.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core import redis_keys as core_keys
from core.outbox import now_ms
from social import layout

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
# One account follows and unfollows hundreds of times: the benchmark, not abuse.
os.environ.setdefault("FOLLOW_RATE", "1000000000/d")
os.environ.setdefault("DJANGO_DEBUG", "false")  # no query log growing without bound
os.environ.setdefault("DATABASE_URL", "mysql://root:@127.0.0.1:3306/followfeed_bench_celebrity")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/0")
os.environ.setdefault("REDIS_KEY_PREFIX", "benchceleb:")
os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "true")
os.environ.setdefault("LOG_LEVEL", "WARNING")  # eager tasks log every run at INFO

import django
import environ


def ensure_database() -> None:
    """CREATE DATABASE IF NOT EXISTS for a MariaDB DATABASE_URL (the bench's own database)."""
    config = environ.Env.db_url_config(os.environ["DATABASE_URL"])
    if config["ENGINE"] != "django.db.backends.mysql":
        return
    import MySQLdb

    connection = MySQLdb.connect(
        host=config["HOST"] or "127.0.0.1", port=int(config["PORT"] or 3306), user=config["USER"], passwd=config["PASSWORD"]
    )
    connection.cursor().execute(
        f"CREATE DATABASE IF NOT EXISTS `{config['NAME']}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
    )
    connection.close()


ensure_database()
django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from tqdm import tqdm  # noqa: E402

from core.paging import Cursor, sort_key  # noqa: E402
from core.redis import get_redis  # noqa: E402
from datatools.celebrity import celebrity_make  # noqa: E402
from social import redis_keys, selectors, services  # noqa: E402
from social.models import Follow  # noqa: E402
from users.models import User  # noqa: E402

PAGE_NUMBER = 10_000


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {statistics.median(ordered):7.2f}  p99 {p99:7.2f}"


def timed(action: Callable[[], Any], repeat: int, before: Callable[[int], None] | None = None) -> list[float]:
    """Run ``action`` ``repeat`` times; milliseconds each (``before(i)`` untimed)."""
    samples = []
    for i in range(repeat):
        if before is not None:
            before(i)
        started = time.perf_counter()
        action()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def key_sizes(client: Any, prefix: str) -> tuple[int, str, int, dict[str, int]]:
    """SCAN every key under ``prefix``: ``(keys, largest key, its members, members by type)``."""
    largest, largest_key, scanned = 0, "", 0
    by_type: dict[str, int] = {}
    batch: list[bytes] = []

    def flush() -> None:
        nonlocal largest, largest_key
        pipe = client.pipeline(transaction=False)
        for key in batch:
            pipe.type(key)
        types = pipe.execute()
        pipe = client.pipeline(transaction=False)
        for key, kind in zip(batch, types):
            {b"set": pipe.scard, b"zset": pipe.zcard, b"hash": pipe.hlen, b"list": pipe.llen}.get(kind, pipe.exists)(key)
        for key, kind, size in zip(batch, types, pipe.execute()):
            by_type[kind.decode()] = by_type.get(kind.decode(), 0) + 1
            if kind != b"string" and size > largest:
                largest, largest_key = size, key.decode()
        batch.clear()

    for key in tqdm(client.scan_iter(match=f"{prefix}*", count=5000), desc="SCAN keys", unit="key", mininterval=2):
        batch.append(key)
        scanned += 1
        if len(batch) >= 5000:
            flush()
    if batch:
        flush()
    return scanned, largest_key, largest, by_type


def follower_keys(client: Any, user_id: int) -> list[str]:
    live = client.get(redis_keys.followers_layout_key(user_id)) or layout.LAYOUT_SINGLE
    keys = [key for pair in layout.read_keys(user_id, live) for key in pair]
    return keys + ([redis_keys.followers_layout_key(user_id)] if live != layout.LAYOUT_SINGLE else [])


def memory_of(client: Any, keys: list[str]) -> int:
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.memory_usage(key, samples=0)  # samples=0: exact, walks every element
    return sum(int(n or 0) for n in pipe.execute())


def cursor_for_page(user_id: int, page: int, size: int) -> tuple[int, Cursor | None, list[int]]:
    """The cursor that opens page ``page`` (1-based) of ``user_id``'s followers, or of its last page.

    Built from the database's rows in the lists' order (score desc, member
    string desc), independent of Redis.

    :returns: ``(page number used, cursor, the ids that page must show)``.
    """
    rows = Follow.objects.filter(followee_id=user_id).values_list("follower_id", "created_at")
    items = sorted(((member, int(at.timestamp())) for member, at in rows.iterator(chunk_size=20_000)), key=sort_key, reverse=True)
    page = min(page, max(1, (len(items) + size - 1) // size))
    start = (page - 1) * size
    cursor = Cursor(score=items[start - 1][1], member=items[start - 1][0]) if start else None
    return page, cursor, [member for member, _ in items[start : start + size]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--followers", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=300)
    args = parser.parse_args()
    client = get_redis()
    prefix = settings.REDIS_KEY_PREFIX
    print(
        f"database {settings.DATABASES['default']['NAME']}, Redis prefix {prefix!r}, "
        f"FOLLOWERS_SHARD_THRESHOLD {settings.FOLLOWERS_SHARD_THRESHOLD:,}, FOLLOWERS_SHARDS {settings.FOLLOWERS_SHARDS}"
    )
    call_command("migrate", verbosity=0)

    accounts = {}
    for name, count in (("bench_celebrity", args.followers), ("bench_small", args.small)):
        started = time.perf_counter()
        with tqdm(total=count, desc=f"make_celebrity {name}", unit="fan", mininterval=2) as bar:
            result = celebrity_make(username=name, followers=count, on_progress=bar.update)
        accounts[name] = result.user_id
        print(
            f"{name}: user {result.user_id}, {result.followers:,} followers, made and rebuilt in "
            f"{time.perf_counter() - started:.1f} s"
        )
    client.set(core_keys.sentinel_key(), now_ms())  # every account's keys are built

    keys, largest_key, largest, by_type = key_sizes(client, prefix)
    bound = args.followers / settings.FOLLOWERS_SHARDS * 1.2
    print(
        f"\nkeys under {prefix!r}: {keys:,} ({by_type}); largest {largest_key} with {largest:,} members; "
        f"bound followers/FOLLOWERS_SHARDS*1.2 = {bound:,.0f}: {'OK' if largest <= bound else 'EXCEEDED'}"
    )

    print("\nRedis memory of the follower keys (MEMORY USAGE, exact):")
    for name, user_id in accounts.items():
        keys_of = follower_keys(client, user_id)
        used = memory_of(client, keys_of)
        count = selectors.follow_counts(user_id=user_id).followers
        shard_sizes = [client.zcard(k) for k in keys_of if ":z:" in k]
        print(
            f"  {name:16s} {len(keys_of):3d} keys, {used:>12,} bytes, {used / max(count, 1):6.1f} bytes/follower; "
            f"zset sizes min {min(shard_sizes):,} max {max(shard_sizes):,}"
        )

    probers = list(User.objects.filter(username__startswith="bench_prober_").order_by("pk")[: args.repeat])
    if len(probers) < args.repeat:
        User.objects.bulk_create(
            [User(username=f"bench_prober_{i}", password="!") for i in range(args.repeat)], ignore_conflicts=True
        )
        probers = list(User.objects.filter(username__startswith="bench_prober_").order_by("pk")[: args.repeat])
    for prober in probers:  # a clean start after an interrupted run
        for user_id in accounts.values():
            services.follow_delete_pair(follower_id=prober.pk, followee_id=user_id)

    size = settings.FOLLOW_PAGE_SIZE
    print(f"\nlatencies in ms over {args.repeat} runs (page size {size}):")

    def measure(name: str, user_id: int) -> dict[str, list[float]]:
        """The latencies of one account (a function, so the timed closures see its own locals)."""
        count = Follow.objects.filter(followee_id=user_id).count()
        fan = Follow.objects.filter(followee_id=user_id).order_by("created_at").values_list("follower_id", flat=True)[0]
        stranger = probers[0].pk
        deep, cursor, expected = cursor_for_page(user_id, PAGE_NUMBER, size)
        page = selectors.followers_page(user_id=user_id, cursor=cursor, limit=size)
        assert [e.user.pk for e in page.entries] == expected, f"{name}: page {deep} differs from the database"
        first = selectors.followers_page(user_id=user_id, cursor=None, limit=size)
        assert len(first.entries) == min(size, count)
        print(f"  {name}: deep page = page {deep:,} of {(count + size - 1) // size:,}")
        holder: dict[str, Any] = {}
        return {
            "follow (fresh account)": timed(
                lambda: services.follow_create(actor=holder["actor"], followee_id=user_id),
                args.repeat,
                before=lambda i: holder.update(actor=probers[i]),
            ),
            "unfollow": timed(
                lambda: services.follow_delete(actor=holder["actor"], followee_id=user_id),
                args.repeat,
                before=lambda i: holder.update(actor=probers[i]),
            ),
            "is_following (follower's set)": timed(
                lambda: selectors.is_following(follower_id=fan, followee_id=user_id), args.repeat
            ),
            "followers-side membership (shard)": timed(
                lambda: selectors._followers_among(client, user_id, {fan, stranger}), args.repeat
            ),
            "follow_counts": timed(lambda: selectors.follow_counts(user_id=user_id), args.repeat),
            "followers page 1": timed(lambda: selectors.followers_page(user_id=user_id, cursor=None, limit=size), args.repeat),
            "followers deep page": timed(
                lambda: selectors.followers_page(user_id=user_id, cursor=cursor, limit=size), args.repeat
            ),
        }

    results: dict[str, dict[str, list[float]]] = {}
    for name, user_id in accounts.items():
        results[name] = measure(name, user_id)
    names = list(accounts)
    print(f"  {'operation':36s}" + "".join(f"{n:>26s}" for n in names))
    for operation in results[names[0]]:
        print(f"  {operation:36s}" + "".join(f"{percentiles(results[n][operation]):>26s}" for n in names))
    follows_left = Follow.objects.filter(follower__in=probers).count()
    print(f"\nprober follows left: {follows_left} (expected 0); exit {0 if largest <= bound else 1}")
    return 0 if largest <= bound and follows_left == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

"""The home feed page against a PING in the same run: page 1 and page 20 of a reader who follows 2,510 accounts.

Run it alone (the lead wires it into ``bench/run.py``)::

    .venv/bin/python bench/home_page.py [--followees 2510] [--notes-per-author 3] [--budget 2] [--out FILE.json]

What it does:

0. Starts a private ``redis-server`` (``bench.servers.PrivateRedis``), or
   uses ``--redis-url``; keys under the prefix ``bench:``.
1. Creates and migrates its own database, ``followfeed_bench_home``
   (``BENCH_HOME_DATABASE_URL`` to choose another), and fills it once with a
   synthetic graph: one reader (``hp_reader``) following ``--followees``
   authors (``hp_author_<n>``, the most any Slashdot account follows is
   2,510), each with ``--notes-per-author`` notes, publish times 7 s apart,
   newest a minute ago (bulk inserts: no fan-out ran). A re-run finds them.
2. Builds the Redis side from the database: the follow mirror
   (``social.rebuild.rebuild_all``), the pull set and the reader's inbox
   (``feed.rebuild``), as ``rebuild_feeds`` does.
3. Times ``feed.selectors.home_timeline`` page 1 and page 20
   (``FEED_PAGE_SIZE`` notes, bodies and authors read as a page shows them)
   with a PING after every call (``bench.timing.collect``), in rounds that take turns, and
   reports each page's p50 over the p50 of the PINGs paired with it (the
   ratio ``bench/run.py`` reports), the database queries one page makes,
   and the database-only path (circuit breaker held open) beside it.

Settings are ``bench.settings`` (its own key prefix and Celery queue; the
abuse limits out of the way) with eager Celery: nothing here publishes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_DATABASE_URL = "mysql://root:@127.0.0.1:3306/followfeed_bench_home"
READER = "hp_reader"
AUTHOR_PREFIX = "hp_author_"
BODY = "home page benchmark note {index}: a sentence or two of ordinary length, as people write them, with a link-free tail."


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--followees", type=int, default=2510, help="accounts the reader follows (default 2510)")
    parser.add_argument("--notes-per-author", type=int, default=3, help="notes of each followed account (default 3)")
    parser.add_argument("--budget", type=float, default=2.0, help="seconds of calls per page (default 2)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds taking turns between the pages (default 3)")
    parser.add_argument("--redis-url", default=None, help="use this Redis instead of a private redis-server")
    parser.add_argument("--fresh", action="store_true", help="drop the database first")
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    return parser.parse_args(argv)


def ensure_data(followees: int, notes_per_author: int) -> int:
    """Create the reader, its followees and their notes unless they are there; returns the reader's id."""
    from datetime import timedelta

    from django.contrib.auth.hashers import make_password
    from django.utils import timezone

    from feed.models import Note, now_whole_ms
    from feed.note_counts import note_counts_load
    from social.models import Follow
    from users.models import User

    reader = User.objects.filter(username=READER).first()
    wanted = followees * notes_per_author
    if (
        reader is not None
        and Follow.objects.filter(follower_id=reader.pk).count() == followees
        and Note.objects.filter(author__username__startswith=AUTHOR_PREFIX).count() == wanted
    ):
        note_counts_load()  # a database made before the counts were kept
        return int(reader.pk)
    Note.objects.filter(author__username__startswith=AUTHOR_PREFIX).delete()
    Follow.objects.filter(follower__username=READER).delete()
    User.objects.filter(username__startswith=AUTHOR_PREFIX).delete()
    User.objects.filter(username=READER).delete()
    password = make_password("followfeed")
    now = timezone.now()
    reader = User.objects.create(username=READER, password=password, display_name="Home page reader", last_seen_at=now)
    User.objects.bulk_create(
        [
            User(username=f"{AUTHOR_PREFIX}{n}", password=password, display_name=f"Author {n}", last_seen_at=now)
            for n in range(followees)
        ],
        batch_size=2000,
    )
    authors = list(User.objects.filter(username__startswith=AUTHOR_PREFIX).order_by("pk").values_list("pk", flat=True))
    Follow.objects.bulk_create([Follow(follower_id=reader.pk, followee_id=author) for author in authors], batch_size=2000)
    newest = now_whole_ms() - timedelta(minutes=1)
    notes = [
        Note(
            author_id=authors[index % len(authors)],
            body=BODY.format(index=index),
            created_at=newest - timedelta(seconds=7 * index),
            fanned_out_at=now,
        )
        for index in range(wanted)
    ]
    Note.objects.bulk_create(notes, batch_size=5000)
    note_counts_load()
    return int(reader.pk)


def build_redis(reader_id: int) -> dict[str, Any]:
    """The follow mirror, the pull set and the reader's inbox, from the database."""
    from core.redis import get_redis
    from feed import redis_keys
    from feed.rebuild import inbox_rebuild, pull_authors_rebuild
    from social.rebuild import rebuild_all

    started = time.perf_counter()
    rebuild_all()
    pull_authors_rebuild()
    rebuilt = inbox_rebuild(user_id=reader_id)
    if not rebuilt.synced:
        raise SystemExit("the reader's inbox is not synced after its rebuild")
    return {"seconds": round(time.perf_counter() - started, 2), "inbox": int(get_redis().zcard(redis_keys.inbox_key(reader_id)))}


def measure(reader_id: int, budget: float, rounds: int) -> dict[str, Any]:
    """p50 of page 1 and page 20 and of the PINGs paired with them; queries per page; the database path."""
    import math

    from django.conf import settings
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from bench import timing
    from bench.operations import database_only
    from core.paging import Cursor
    from core.redis import get_redis
    from feed import selectors

    client = get_redis()
    limit = int(settings.FEED_PAGE_SIZE)
    cursor: Cursor | None = None
    for _ in range(19):
        cursor = selectors.home_timeline(user_id=reader_id, cursor=cursor, limit=limit).next_cursor
        if cursor is None:
            raise SystemExit("the home feed ends before page 20")
    cursors: dict[str, Cursor | None] = {"page_1": None, "page_20": cursor}

    def page(at: Cursor | None) -> Any:
        def read(_: int) -> list[tuple[int, str, str, int]]:
            found = selectors.home_timeline(user_id=reader_id, cursor=at, limit=limit)
            return [(note.pk, note.body, note.author.username, note.published_ms) for note in found.notes]

        return read

    figures: dict[str, Any] = {}
    for name, at in cursors.items():
        found = selectors.home_timeline(user_id=reader_id, cursor=at, limit=limit)
        with CaptureQueriesContext(connection) as queries:
            page(at)(0)
        figures[name] = {"notes": len(found.notes), "source": found.source, "queries": len(queries.captured_queries)}
    durations: dict[str, list[int]] = {name: [] for name in cursors}
    pings: dict[str, list[int]] = {name: [] for name in cursors}
    database: dict[str, list[int]] = {name: [] for name in cursors}
    for round_index in range(rounds):
        for name, at in cursors.items():
            warmup = timing.WARMUP_CALLS if round_index == 0 else 1
            taken, paired = timing.collect(page(at), client.ping, budget_seconds=budget / rounds, warmup=warmup)
            durations[name] += taken
            pings[name] += paired
            with database_only():
                taken, _ = timing.collect(
                    page(at), budget_seconds=budget / rounds / 2, max_calls=math.ceil(300 / rounds), warmup=warmup
                )
            database[name] += taken
    for name in cursors:
        redis_p50 = timing.summarize(durations[name]).p50_us
        ping_p50 = timing.summarize(pings[name]).p50_us
        database_p50 = timing.summarize(database[name]).p50_us
        figures[name].update(
            {
                "calls": len(durations[name]),
                "p50_us": round(redis_p50, 1),
                "p99_us": round(timing.summarize(durations[name]).p99_us, 1),
                "ping_p50_us": round(ping_p50, 1),
                "ratio_to_ping": round(redis_p50 / ping_p50, 2),
                "database_p50_us": round(database_p50, 1),
            }
        )
    return figures


@contextmanager
def home_reader(
    *, queue: str, redis_url: str | None, fresh: bool = False, followees: int = 2510, notes_per_author: int = 3
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Django set up on ``bench.settings`` and this benchmark's database (``BENCH_HOME_DATABASE_URL``),
    eager Celery on ``queue``, keys under ``bench:`` on a private ``redis-server`` (or ``redis_url``),
    the data made (``ensure_data``) and the Redis side built (``build_redis``).

    :yields: ``(reader id, build_redis's figures)``; the private server stops at the end.
    """
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    url = os.environ["DATABASE_URL"] = os.environ.get("BENCH_HOME_DATABASE_URL", DEFAULT_DATABASE_URL)
    os.environ["REDIS_KEY_PREFIX"] = "bench:"
    os.environ["CELERY_TASK_ALWAYS_EAGER"] = "true"
    os.environ["CELERY_TASK_DEFAULT_QUEUE"] = queue
    from bench.db import ensure_database

    ensure_database(url, fresh=fresh)
    from bench.servers import redis_for_run

    with redis_for_run(redis_url):
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0, interactive=False)
        reader_id = ensure_data(followees, notes_per_author)
        yield reader_id, build_redis(reader_id)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from bench.report import print_and_save

    with home_reader(
        queue="bench_home",
        redis_url=args.redis_url,
        fresh=args.fresh,
        followees=args.followees,
        notes_per_author=args.notes_per_author,
    ) as (reader_id, build):
        results: dict[str, Any] = {
            "followees": args.followees,
            "notes_per_author": args.notes_per_author,
            "build": build,
            "pages": measure(reader_id, args.budget, args.rounds),
        }
    print_and_save(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

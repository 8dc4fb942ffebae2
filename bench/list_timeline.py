"""A list timeline page beside the home feed page of the same reader, in one run.

Run it alone (``make bench`` runs it too)::

    .venv/bin/python bench/list_timeline.py [--members 10,100,500] [--notes-per-member 80] [--budget 2] [--rounds 3] [--out FILE.json]

What it does: the data of ``bench/home_page.py`` in a database of its own
(``followfeed_bench_lists``, ``BENCH_LISTS_DATABASE_URL`` to choose another:
the members' notes added here would change the home page benchmark's data), a reader who
follows 2,510 accounts with 3 notes each, the Redis side rebuilt on a private
``redis-server``), then one list of the reader per ``--members`` size (its
first followees, given ``--notes-per-member`` notes each among the home
feed's newest, so a page of a list, as one of home, reads Redis only; the
members' outboxes, the reader's inbox and each list's kept timeline built), and times
``feed.selectors.list_timeline`` page 1 and page 5 of each list beside
``feed.selectors.home_timeline`` page 1 and page 5, taking turns in rounds; each list
page also as read before its kept timeline is built, merging every member's outbox
(``_merged``: one script per round outside a cluster). It reports each page's p50 and
p99, the database queries of one page, whether it was read from the kept timeline, and
the ratio of each list page's p50 to the home page's p50 (the goal is at most 1.2).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_DATABASE_URL = "mysql://root:@127.0.0.1:3306/followfeed_bench_lists"
TITLE = "bench list of {members}"
PAGES = (1, 5)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", default="10,100,500", help="members of each list, comma-separated (default 10,100,500)")
    parser.add_argument("--notes-per-member", type=int, default=80, help="notes of each list member (default 80)")
    parser.add_argument("--budget", type=float, default=2.0, help="seconds of calls per page and round (default 2)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds taking turns between the pages (default 3)")
    parser.add_argument("--redis-url", default=None, help="use this Redis instead of a private redis-server")
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    return parser.parse_args(argv)


MEMBER_BODY = "list benchmark note {index} of a list member: as long as the home page benchmark's notes, give or take."


def ensure_lists(reader_id: int, sizes: list[int], notes_per_member: int) -> dict[int, int]:
    """One list of the reader per size, holding its first followees (made unless there), each
    member with ``notes_per_member`` notes; the members' outboxes, the reader's inbox and list keys
    built. Returns ``{size: list id}``."""
    from datetime import timedelta

    from django.utils import timezone

    from feed.models import List, ListMember, Note, now_whole_ms
    from feed.rebuild import inbox_rebuild, list_timeline_rebuild, lists_rebuild, outbox_rebuild
    from social.models import Follow

    followees = list(Follow.objects.filter(follower_id=reader_id).order_by("followee_id").values_list("followee_id", flat=True))
    members = followees[: max(sizes)]
    wanted = len(members) * notes_per_member
    if Note.objects.filter(body__startswith="list benchmark note").count() != wanted:
        Note.objects.filter(body__startswith="list benchmark note").delete()
        newest = now_whole_ms() - timedelta(seconds=30)
        notes = [
            Note(
                author_id=members[index % len(members)],
                body=MEMBER_BODY.format(index=index),
                # 3 s apart, among the home page benchmark's notes (7 s apart).
                created_at=newest - timedelta(seconds=3 * index),
                fanned_out_at=timezone.now(),
            )
            for index in range(wanted)
        ]
        Note.objects.bulk_create(notes, batch_size=5000)
    found: dict[int, int] = {}
    for size in sizes:
        title = TITLE.format(members=size)
        made = List.objects.filter(owner_id=reader_id, title=title).first()
        if made is None or ListMember.objects.filter(list=made).count() != size:
            List.objects.filter(owner_id=reader_id, title=title).delete()
            made = List.objects.create(owner_id=reader_id, title=title)
            ListMember.objects.bulk_create([ListMember(list=made, account_id=account) for account in followees[:size]])
        found[size] = made.pk
    for account in members:
        outbox_rebuild(author_id=account)
    inbox_rebuild(user_id=reader_id)
    lists_rebuild([reader_id])
    for list_id in found.values():
        if not list_timeline_rebuild(reader_id=reader_id, list_id=list_id).kept:
            raise SystemExit(f"the kept timeline of list {list_id} was not built")
    return found


def shown(read: Callable[[Any], Any], cursor: Any) -> Callable[[int], list[tuple[int, str, str]]]:
    """A call reading the page at ``cursor`` as a page shows it (bodies and authors' names)."""

    def call(_index: int) -> list[tuple[int, str, str]]:
        return [(note.pk, note.body, note.author.username) for note in read(cursor).notes]

    return call


def merged(read: Callable[[], Any]) -> Any:
    """``read()`` as before the list's kept timeline is built: every member's outbox merged."""
    from feed import selectors

    saved = selectors.pull_generation_cached
    selectors.pull_generation_cached = lambda client: b"not the kept timeline's generation"
    try:
        return read()
    finally:
        selectors.pull_generation_cached = saved


def measure(reader_id: int, lists: dict[int, int], *, budget: float, rounds: int) -> dict[str, Any]:
    """p50/p99 and queries of home and list pages 1 and 5, taking turns."""
    from django.conf import settings
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from bench import timing
    from feed import selectors

    limit = int(settings.FEED_PAGE_SIZE)
    readers: dict[str, Any] = {"home": lambda cursor: selectors.home_timeline(user_id=reader_id, cursor=cursor, limit=limit)}
    for size, list_id in lists.items():
        readers[f"list_{size}"] = lambda cursor, list_id=list_id: selectors.list_timeline(
            reader_id=reader_id, list_id=list_id, cursor=cursor, limit=limit
        )
        # The same page read by merging every member's outbox, for the kept timeline's gain.
        readers[f"list_{size}_merged"] = lambda cursor, list_id=list_id: merged(
            lambda: selectors.list_timeline(reader_id=reader_id, list_id=list_id, cursor=cursor, limit=limit)
        )
    calls: dict[str, Any] = {}
    figures: dict[str, Any] = {}
    for name, read in readers.items():
        cursor = None
        for page in range(1, max(PAGES) + 1):
            if page > 1 and cursor is None:
                raise SystemExit(f"{name} ends before page {page}")
            if page in PAGES:
                found = read(cursor)
                key = f"{name}_page_{page}"
                calls[key] = shown(read, cursor)
                with CaptureQueriesContext(connection) as queries:
                    calls[key](0)
                figures[key] = {
                    "notes": len(found.notes),
                    "source": found.source,
                    "kept": getattr(found, "kept", None),
                    "queries": len(queries.captured_queries),
                }
            cursor = read(cursor).next_cursor
    durations: dict[str, list[int]] = {key: [] for key in calls}
    for round_index in range(rounds):
        for key, call in calls.items():
            warmup = timing.WARMUP_CALLS if round_index == 0 else 1
            taken, _ = timing.collect(call, budget_seconds=budget / rounds, warmup=warmup)
            durations[key] += taken
    for key, taken in durations.items():
        summary = timing.summarize(taken)
        figures[key].update({"calls": len(taken), "p50_us": round(summary.p50_us, 1), "p99_us": round(summary.p99_us, 1)})
    ratios = {
        key: round(figures[key]["p50_us"] / figures[f"home_page_{key.split('_page_')[1].split('_')[0]}"]["p50_us"], 2)
        for key in figures
        if key.startswith("list_")
    }
    return {"pages": figures, "ratio_to_home_p50": ratios, "goal_ratio": 1.2}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import os

    from bench.home_page import home_reader
    from bench.report import print_and_save

    sizes = sorted({int(size) for size in args.members.split(",") if size.strip()})
    os.environ["BENCH_HOME_DATABASE_URL"] = os.environ.get("BENCH_LISTS_DATABASE_URL", DEFAULT_DATABASE_URL)
    with home_reader(queue="bench_home", redis_url=args.redis_url) as (reader_id, _build):
        lists = ensure_lists(reader_id, sizes, args.notes_per_member)
        results = {
            "members": sizes,
            "notes_per_member": args.notes_per_member,
            "load_average": [round(value, 2) for value in os.getloadavg()],
            **measure(reader_id, lists, budget=args.budget, rounds=args.rounds),
        }
    print_and_save(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

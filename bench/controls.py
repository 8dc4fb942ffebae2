"""Blocks and mutes (issue 16): a home feed page with 100 mutes against none, and Redis memory
per block and per mute.

Run it alone (``make bench`` runs it after ``bench/home_page.py``, on the same data)::

    .venv/bin/python bench/controls.py [--mutes 100] [--pairs 5000] [--budget 2] [--out FILE.json]

What it does:

1. The data and Redis of ``bench/home_page.py`` (its database,
   ``followfeed_bench_home``: a reader following 2,510 authors, each with
   3 notes; a private ``redis-server``, or ``--redis-url``).
2. Page 1 of the reader's home feed, timed in rounds that take turns:
   without mutes, and with the reader muting ``--mutes`` of the accounts
   it follows (every 25th, so their notes are spread through the feed and
   the page skips them), written through ``social.controls.mute_create``
   (database, outbox, Redis). Reports both p50s and their ratio
   (target: at most 1.2x).
3. Memory: ``--pairs`` blocks and then ``--pairs`` mutes between the
   benchmark's authors, mirrored to Redis (``mirror_apply_controls``), with
   ``INFO memory`` ``used_memory`` read before and after each: bytes per
   block (two set members, one per side) and per mute (one sorted-set
   member), keys included. Removed again at the end.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mutes", type=int, default=100, help="accounts the reader mutes (default 100)")
    parser.add_argument("--pairs", type=int, default=5000, help="blocks, and mutes, for the memory figure (default 5000)")
    parser.add_argument("--budget", type=float, default=2.0, help="seconds of calls per way (default 2)")
    parser.add_argument("--rounds", type=int, default=4, help="rounds taking turns between the ways (default 4)")
    parser.add_argument("--redis-url", default=None, help="use this Redis instead of a private redis-server")
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    return parser.parse_args(argv)


def page_with_mutes(reader_id: int, mutes: int, budget: float, rounds: int) -> dict[str, Any]:
    """p50 of home feed page 1 with no mutes and with ``mutes`` mutes, in alternating rounds."""
    from django.conf import settings
    from django.db import transaction

    from bench import timing
    from feed import selectors
    from feed.models import Note
    from social import controls
    from social.models import Follow, Mute
    from users.models import User

    reader = User.objects.get(pk=reader_id)
    followees = list(Follow.objects.filter(follower_id=reader_id).order_by("followee_id").values_list("followee_id", flat=True))
    limit = int(settings.FEED_PAGE_SIZE)

    def page(_: int) -> list[int]:
        return [note.pk for note in selectors.home_timeline(user_id=reader_id, cursor=None, limit=limit).notes]

    def mute_all() -> None:
        for target_id in muted:
            with transaction.atomic():
                controls.mute_create(actor=reader, target_id=target_id)

    def unmute_all() -> None:
        # Through the service: the unmute's job brings the notes back, so every "none" round
        # reads the same inbox as the first.
        for target_id in Mute.objects.filter(muter_id=reader_id).values_list("muted_id", flat=True):
            with transaction.atomic():
                controls.mute_delete(actor=reader, target_id=target_id)

    unmute_all()
    # The authors of the unmuted page 1 first (the muted page must skip all of them), then
    # every 25th followee up to ``mutes``.
    first_page_authors = list(
        dict.fromkeys(Note.objects.filter(pk__in=page(0)).order_by("-created_at").values_list("author_id", flat=True))
    )
    muted = list(dict.fromkeys(first_page_authors + followees[::25]))[:mutes]
    without: list[int] = []
    with_mutes: list[int] = []
    shown: dict[str, list[int]] = {}
    for round_index in range(rounds):
        warmup = timing.WARMUP_CALLS if round_index == 0 else 3
        shown["none"] = page(0)
        taken, _ = timing.collect(page, budget_seconds=budget / rounds, warmup=warmup)
        without += taken
        mute_all()
        shown["muted"] = page(0)
        taken, _ = timing.collect(page, budget_seconds=budget / rounds, warmup=warmup)
        with_mutes += taken
        unmute_all()
    muted_set = set(muted)
    authors = dict(Note.objects.filter(pk__in=shown["none"] + shown["muted"]).values_list("pk", "author_id"))
    none_p50 = timing.summarize(without).p50_us
    muted_p50 = timing.summarize(with_mutes).p50_us
    return {
        "mutes": len(muted),
        "page_notes": limit,
        "muted_notes_on_unmuted_page_1": sum(1 for pk in shown["none"] if authors.get(pk) in muted_set),
        "muted_notes_shown_with_mutes": sum(1 for pk in shown["muted"] if authors.get(pk) in muted_set),
        "none_p50_us": round(none_p50, 1),
        "none_calls": len(without),
        "muted_p50_us": round(muted_p50, 1),
        "muted_calls": len(with_mutes),
        "ratio": round(muted_p50 / none_p50, 3),
        "target": "<= 1.2x",
        "met": muted_p50 / none_p50 <= 1.2,
    }


def memory_per_control(pairs: int) -> dict[str, Any]:
    """Bytes of Redis memory per block and per mute (``used_memory`` before and after)."""
    from django.db.models import Q

    from core.redis import get_redis
    from social.control_mirror import mirror_apply_controls
    from social.models import Block, Mute
    from users.models import User

    client = get_redis()
    ids = list(User.objects.filter(username__startswith="hp_author_").order_by("pk").values_list("pk", flat=True))
    # Pairs (a, b) spread over the authors: each blocks its next 2 neighbours, and so on.
    chosen: list[tuple[int, int]] = []
    step = 1
    while len(chosen) < pairs and step < len(ids):
        chosen += [(ids[i], ids[(i + step) % len(ids)]) for i in range(len(ids))]
        step += 1
    chosen = chosen[:pairs]

    def used() -> int:
        return int(client.info("memory")["used_memory"])

    def clear() -> None:
        everyone = Q(blocker_id__in=ids) | Q(blocked_id__in=ids)
        Block.objects.filter(everyone).delete()
        Mute.objects.filter(Q(muter_id__in=ids) | Q(muted_id__in=ids)).delete()
        mirror_apply_controls(chosen)

    clear()
    figures: dict[str, Any] = {"pairs": len(chosen), "accounts": len(ids)}
    batches: list[tuple[str, list[Any]]] = [  # rows of two models: Block, then Mute
        ("block", [Block(blocker_id=a, blocked_id=b) for a, b in chosen]),
        ("mute", [Mute(muter_id=a, muted_id=b) for a, b in chosen]),
    ]
    for kind, rows in batches:
        before = used()
        type(rows[0]).objects.bulk_create(rows, batch_size=1000)
        for start in range(0, len(chosen), 1000):
            mirror_apply_controls(chosen[start : start + 1000])
        after = used()
        figures[f"bytes_per_{kind}"] = round((after - before) / len(chosen), 1)
        clear()
    return figures


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from bench.home_page import home_reader
    from bench.report import print_and_save

    with home_reader(queue="bench_controls", redis_url=args.redis_url) as (reader_id, _build):
        results: dict[str, Any] = {
            "home_page_with_mutes": page_with_mutes(reader_id, args.mutes, args.budget, args.rounds),
            "memory": memory_per_control(args.pairs),
        }
    print_and_save(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

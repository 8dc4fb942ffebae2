"""The Mastodon home timeline beside the JSON feed of the same reader, in one process.

Run it alone (``make bench`` runs it too)::

    .venv/bin/python bench/mastodon_home.py [--limit 40] [--budget 2] [--rounds 3] [--out FILE.json]

What it does: the data of ``bench/home_page.py`` (its database, a reader who
follows 2,510 accounts, the Redis side rebuilt on a private ``redis-server``),
then, through Django's test client (the whole middleware stack, no socket),
``GET /api/v1/timelines/home?limit=N`` with an access token of the reader and
``GET /api/feed?limit=N`` signed in as the reader, taking turns in rounds.
It reports each one's p50 and p99, the database queries and Redis commands of
one call, and the ratio of the two p50s (the goal is at most 1.5).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


HOST = "127.0.0.1"  # one of bench.settings' ALLOWED_HOSTS


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=40, help="statuses per page (default 40, Mastodon's maximum)")
    parser.add_argument("--budget", type=float, default=2.0, help="seconds of calls per endpoint and round (default 2)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds taking turns between the endpoints (default 3)")
    parser.add_argument("--redis-url", default=None, help="use this Redis instead of a private redis-server")
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of the Mastodon timeline's calls")
    return parser.parse_args(argv)


def calls_of(call: Any) -> dict[str, int]:
    """Database queries and Redis commands of one ``call()``."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from core.redis import get_redis

    client = get_redis()
    before = int(client.info("stats")["total_commands_processed"])
    with CaptureQueriesContext(connection) as queries:
        response = call()
    after = int(client.info("stats")["total_commands_processed"])
    assert response.status_code == 200, response.content[:300]
    return {"queries": len(queries), "redis_commands": after - before - 1}  # less the first INFO


def measure(reader_id: int, *, limit: int, budget: float, rounds: int, profile: bool) -> dict[str, Any]:
    from django.test import Client

    from bench.http_setup import mastodon_token
    from bench.timing import collect, summarize
    from users.models import User

    token = mastodon_token(reader_id)
    mastodon = Client(HTTP_HOST=HOST, HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_ACCEPT="application/json")
    session = Client(HTTP_HOST=HOST)
    session.force_login(User.objects.get(pk=reader_id))
    endpoints = {
        "mastodon_home": lambda: mastodon.get("/api/v1/timelines/home", {"limit": limit}),
        "json_feed": lambda: session.get("/api/feed", {"limit": limit}),
    }
    shapes = {name: call().json() for name, call in endpoints.items()}
    statuses = {"mastodon_home": len(shapes["mastodon_home"]), "json_feed": len(shapes["json_feed"]["data"]["list"])}
    counted = {name: calls_of(call) for name, call in endpoints.items()}
    durations: dict[str, list[int]] = {name: [] for name in endpoints}

    def timed(call: Callable[[], Any]) -> list[int]:
        taken, _paired = collect(lambda _index: call(), budget_seconds=budget)
        return taken

    for _ in range(rounds):
        for name, call in endpoints.items():
            durations[name].extend(timed(call))
    summaries = {name: summarize(taken).as_dict() for name, taken in durations.items()}
    if profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(200):
            endpoints["mastodon_home"]()
        profiler.disable()
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)
    return {
        "statuses": statuses,
        "calls": counted,
        "timings_us": summaries,
        "ratio_p50": round(summaries["mastodon_home"]["p50_us"] / summaries["json_feed"]["p50_us"], 2),
        "goal_ratio": 1.5,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from bench.home_page import home_reader
    from bench.report import print_and_save

    with home_reader(queue="bench_home", redis_url=args.redis_url) as (reader_id, _build):
        results = {
            "limit": args.limit,
            **measure(reader_id, limit=args.limit, budget=args.budget, rounds=args.rounds, profile=args.profile),
        }
    print_and_save(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Who to follow on Slashdot (issue 17): the cost of computing a reader's suggestions, and their
quality against two baselines.

Run it alone (``make bench`` runs it after ``bench/run.py``, on its database)::

    .venv/bin/python bench/suggestions.py [--readers 1000] [--seed 7] [--out FILE.json]

What it does:

1. The Slashdot import of ``bench/run.py`` (database ``followfeed_bench``,
   imported here when missing) and its follow mirror, rebuilt into a
   private ``redis-server`` (or ``--redis-url``).
2. Cost: ``social.suggestions.compute`` (the Redis path the task runs:
   one SMEMBERS per followee, pipelined, then the exclusions from the
   database) for the reader who follows the most accounts (2,510), 5 runs,
   and once for each of ``--readers`` random readers who follow someone:
   p50, p99 and the total.
3. Quality, in memory on the same graph: for ``--readers`` random readers
   following at least 10 accounts, 10% of their follows (at least one) are
   hidden from the graph; each reader's top 20 is computed from the rest
   with the same ranking (``social.suggestions.rank``) and compared with the
   hidden follows: recall@20 (hidden found / hidden) and precision@20
   (hidden found / 20), averaged over readers, beside two baselines: the
   most followed accounts (by followers in the reduced graph) and 20 random
   accounts, both without the reader's remaining followees.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TOP = 20


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--readers", type=int, default=1000, help="random readers timed, and evaluated (default 1000)")
    parser.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
    parser.add_argument("--redis-url", default=None, help="use this Redis instead of a private redis-server")
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    return parser.parse_args(argv)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def cost(readers: int, rng: random.Random) -> dict[str, Any]:
    """Seconds of ``compute`` for the heaviest reader and for ``readers`` random ones."""
    from bench.data import most_following
    from core.redis import get_redis
    from social import suggestions
    from social.models import Follow

    client = get_redis()
    heaviest = most_following(1)[0]
    followees = Follow.objects.filter(follower_id=heaviest).count()
    runs = []
    for _ in range(5):
        started = time.perf_counter()
        found = suggestions.compute(heaviest, client=client)
        runs.append(time.perf_counter() - started)
    candidates = list(Follow.objects.filter(follower__username__startswith="u").values_list("follower_id", flat=True).distinct())
    chosen = rng.sample(candidates, min(readers, len(candidates)))
    each = []
    started_all = time.perf_counter()
    for reader in chosen:
        started = time.perf_counter()
        suggestions.compute(reader, client=client)
        each.append(time.perf_counter() - started)
    total = time.perf_counter() - started_all
    return {
        "heaviest_reader": {
            "followees": followees,
            "p50_ms": round(statistics.median(runs) * 1000, 1),
            "runs": len(runs),
            "found": len(found),
        },
        "random_readers": {
            "readers": len(chosen),
            "p50_ms": round(statistics.median(each) * 1000, 2),
            "p99_ms": round(percentile(each, 0.99) * 1000, 1),
            "total_s": round(total, 1),
        },
    }


def quality(readers: int, rng: random.Random) -> dict[str, Any]:
    """recall@20 and precision@20 of hidden follows: suggestions, most followed, random."""
    from social.models import Follow
    from social.suggestions import rank

    following: dict[int, set[int]] = defaultdict(set)
    for follower, followee in (
        Follow.objects.filter(follower__username__startswith="u", followee__username__startswith="u")
        .values_list("follower_id", "followee_id")
        .iterator(chunk_size=20_000)
    ):
        following[follower].add(followee)
    eligible = sorted(user for user, theirs in following.items() if len(theirs) >= 10)
    chosen = rng.sample(eligible, min(readers, len(eligible)))
    hidden: dict[int, set[int]] = {}
    for reader in chosen:
        theirs = sorted(following[reader])
        hidden[reader] = set(rng.sample(theirs, max(1, len(theirs) // 10)))
        following[reader] -= hidden[reader]
    followers: dict[int, int] = defaultdict(int)
    for followed in following.values():
        for followee in followed:
            followers[followee] += 1
    popular = sorted(followers, key=lambda user: (-followers[user], user))
    everyone = sorted(set(following) | set(followers))

    def following_of(ids: Any) -> Any:
        return [(user, following.get(user, ())) for user in ids]

    scores: dict[str, list[tuple[float, float]]] = {"suggestions": [], "most_followed": [], "random": []}
    started = time.perf_counter()
    for reader in chosen:
        mine = following[reader]
        lists = {
            "suggestions": [r.user_id for r in rank(reader, mine, following_of, limit=TOP)],
            "most_followed": [user for user in popular[: TOP + len(mine) + 1] if user not in mine and user != reader][:TOP],
        }
        randoms: list[int] = []
        while len(randoms) < TOP:
            pick = everyone[rng.randrange(len(everyone))]
            if pick not in mine and pick != reader and pick not in randoms:
                randoms.append(pick)
        lists["random"] = randoms
        for name, top in lists.items():
            found = len(set(top) & hidden[reader])
            scores[name].append((found / len(hidden[reader]), found / TOP))
    seconds = time.perf_counter() - started
    return {
        "readers": len(chosen),
        "hidden_follows": sum(len(h) for h in hidden.values()),
        "seconds": round(seconds, 1),
        **{
            name: {
                "recall_at_20": round(statistics.mean(r for r, _ in values), 4),
                "precision_at_20": round(statistics.mean(p for _, p in values), 4),
            }
            for name, values in scores.items()
        },
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from bench.report import print_and_save

    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ["CELERY_TASK_ALWAYS_EAGER"] = "true"
    os.environ["CELERY_TASK_DEFAULT_QUEUE"] = "bench_suggestions"
    from bench.db import ensure_database

    ensure_database(os.environ.get("DATABASE_URL", "mysql://root:@127.0.0.1:3306/followfeed_bench"))
    from bench.servers import redis_for_run

    with redis_for_run(args.redis_url):
        import django

        django.setup()
        from django.core.management import call_command

        from bench.data import Scale, Setup, ensure_graph, expected_edges, graph_edge_count
        from social.rebuild import rebuild_all

        call_command("migrate", verbosity=0, interactive=False)
        started = time.perf_counter()
        if graph_edge_count() == expected_edges(Scale()):
            rebuild_all()  # only the follow mirror: the feeds are not read here
        else:
            ensure_graph(Scale(), Setup())
        rng = random.Random(args.seed)
        results: dict[str, Any] = {
            "graph": "soc-Slashdot0902.txt.gz",
            "setup_seconds": round(time.perf_counter() - started, 1),
            "cost": cost(args.readers, rng),
            "quality": quality(args.readers, random.Random(args.seed)),
        }
    print_and_save(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

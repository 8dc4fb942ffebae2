"""Where a follow + unfollow spends its time: a cProfile of the write path, beside its p50 and
django-activity-stream's in the same process.

Run it after ``bench/run.py`` (``make bench`` does), on the harness's database::

    .venv/bin/python bench/write_path_profile.py [--pairs 300] [--out bench/results/profile_write_path.txt]

It takes ``--pairs`` pairs of imported accounts that do not follow each
other, times follow + unfollow through ``social.services`` and
``actstream.actions`` in alternating rounds (p50 of each), then profiles
``--pairs`` more follow + unfollow calls of followfeed and prints the 30
functions with the most cumulative time. With ``--out`` the file keeps its
section that starts with ``== before`` and gets a new ``== after`` section.
Settings: ``bench.settings`` (its database, Redis prefix and RabbitMQ
queue, which no worker consumes: the messages are counted in the cost).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--pairs", type=int, default=300, help="follow + unfollow pairs per round and in the profile (default 300)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per way (default 3)")
    parser.add_argument("--out", default=None, help="keep the file's 'before' section and write the 'after' one here")
    args = parser.parse_args(argv)

    import django

    from bench.servers import redis_for_run

    # A private redis-server for the run (settings read REDIS_URL when Django sets up).
    with redis_for_run(None):
        django.setup()
        from actstream import actions, registry

        from core.outbox import now_ms
        from core.redis import get_redis, write_sentinels
        from social import services
        from social.models import Follow
        from users.models import User

        write_sentinels(get_redis(), now_ms())
        registry.register(User)
        ids = list(User.objects.filter(is_active=True).order_by("pk").values_list("pk", flat=True)[:4000])
        users = {user.pk: user for user in User.objects.filter(pk__in=ids)}
        pairs = [(a, b) for a, b in zip(ids[::2], ids[1::2]) if not Follow.objects.filter(follower_id=a, followee_id=b).exists()][
            : args.pairs
        ]

        def followfeed(index: int) -> None:
            a, b = pairs[index % len(pairs)]
            services.follow_create(actor=users[a], followee_id=b)
            services.follow_delete(actor=users[a], followee_id=b)

        def stream(index: int) -> None:
            a, b = pairs[index % len(pairs)]
            actions.follow(users[a], users[b], send_action=False)
            actions.unfollow(users[a], users[b])

        def p50_ms(call: object) -> float:
            taken = []
            for index in range(len(pairs)):
                started = time.perf_counter()
                call(index)  # type: ignore[operator]
                taken.append(time.perf_counter() - started)
            return statistics.median(taken) * 1000

        for index in range(5):
            followfeed(index)
            stream(index)
        rounds = [(p50_ms(followfeed), p50_ms(stream)) for _ in range(args.rounds)]
        ours = statistics.median(r[0] for r in rounds)
        theirs = statistics.median(r[1] for r in rounds)
        profiler = cProfile.Profile()
        profiler.enable()
        for index in range(len(pairs)):
            followfeed(index)
        profiler.disable()

    buffer = io.StringIO()
    stats = pstats.Stats(profiler, stream=buffer)
    stats.sort_stats("cumulative").print_stats(30)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    section = (
        f"== after ({commit}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {load}) ==\n"
        f"follow + unfollow p50 over {len(pairs)} pairs, median of {args.rounds} rounds: followfeed {ours:.2f} ms, "
        f"django-activity-stream {theirs:.2f} ms ({ours / theirs:.2f}x)\n"
        f"cProfile of {len(pairs)} follow + unfollow pairs, cumulative seconds:\n{buffer.getvalue()}"
    )
    print(section)
    if args.out:
        path = Path(args.out)
        before = path.read_text() if path.exists() else ""
        kept = before.split("== after", 1)[0].rstrip("\n")
        path.write_text((kept + "\n\n" if kept else "") + section)
    return 0


if __name__ == "__main__":
    sys.exit(main())

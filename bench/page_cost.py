"""Per-request cost of the pages in one process: wall and CPU milliseconds of the Django test client.

Against the benchmark database of ``bench/http_load.py`` (``followfeed_http`` and a Redis server
loaded with its snapshot ``var/bench-http/followfeed_http.rdb``), with the settings of the HTTP
benchmark (``bench.http_settings``: production's)::

    DJANGO_SETTINGS_MODULE=bench.http_settings DJANGO_SECRET_KEY=... DATABASE_URL=mysql://.../followfeed_http \\
    REDIS_URL=redis://127.0.0.1:PORT/0 CELERY_BROKER_URL=amqp://... BENCH_STATIC_ROOT=/tmp/static \\
    .venv/bin/python bench/page_cost.py [--requests 200] [PATH ...]

CPU time (``time.process_time``) is this process's alone, so it moves less than wall time when
other work shares the cores: run the code before and after a change in turn and compare the CPU
columns. Prints one line per path, with its SQL queries and Redis round trips (commands sent,
a pipeline or script counting once) per request; ``--profile DIR`` also writes a cProfile summary
per path; ``--token`` sends an access token of the reader, for the Mastodon API's paths.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
from pathlib import Path
from typing import Any

import django

READER = "u2494"  # the benchmark's reader (bench/http_setup.py)
FOLLOWED = "u398"  # the benchmark's followed account


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", help="paths to load (default: profile, followers, home, the JSON feed and followers)")
    parser.add_argument("--requests", type=int, default=200, help="requests per path (default 200)")
    parser.add_argument("--profile", default=None, help="a directory for a cProfile summary of each path")
    parser.add_argument(
        "--token", action="store_true", help="send the reader's access token (made here) for the Mastodon API's paths"
    )
    args = parser.parse_args()
    django.setup()
    from django.test import Client

    from users.models import User

    reader = User.objects.get(username=READER)
    headers = {"X-Forwarded-Proto": "https"}
    if args.token:
        from bench.http_setup import mastodon_token

        headers["Authorization"] = f"Bearer {mastodon_token(reader.pk)}"
    client = Client(headers=headers)
    client.force_login(reader)
    followed = User.objects.get(username=FOLLOWED)
    paths = args.paths or [
        f"/u/{FOLLOWED}/",
        f"/u/{FOLLOWED}/followers/",
        "/home",
        "/api/feed",
        f"/api/users/{followed.pk}/followers",
    ]
    for path in paths:
        response = client.get(path, secure=True)  # warm: templates, routes, connections
        if response.status_code != 200:
            raise SystemExit(f"{path}: status {response.status_code}")
        started, cpu_started = time.perf_counter(), time.process_time()
        for _ in range(args.requests):
            client.get(path, secure=True)
        wall_ms = (time.perf_counter() - started) / args.requests * 1000
        cpu_ms = (time.process_time() - cpu_started) / args.requests * 1000
        queries, sent = round_trips(client, path)
        print(
            f"{path}: {wall_ms:.2f} ms wall, {cpu_ms:.2f} ms CPU per request ({args.requests} requests); "
            f"{queries} queries, {sent} Redis round trips",
            flush=True,
        )
        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(args.requests):
                client.get(path, secure=True)
            profiler.disable()
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(60)
            Path(args.profile).mkdir(parents=True, exist_ok=True)
            Path(args.profile, path.strip("/").replace("/", "_").replace("?", "_") + ".txt").write_text(out.getvalue())


def round_trips(client: Any, path: str) -> tuple[int, int]:
    """SQL queries and Redis round trips (commands sent; a pipeline or a script is one) of one GET of ``path``."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from redis.connection import AbstractConnection

    sent = 0
    send = AbstractConnection.send_packed_command

    def counted(self: AbstractConnection, command: Any, check_health: bool = True) -> None:
        nonlocal sent
        sent += 1
        send(self, command, check_health)

    AbstractConnection.send_packed_command = counted  # type: ignore[method-assign]
    try:
        with CaptureQueriesContext(connection) as queries:
            client.get(path, secure=True)
    finally:
        AbstractConnection.send_packed_command = send  # type: ignore[method-assign]
    return len(queries), sent


if __name__ == "__main__":
    main()

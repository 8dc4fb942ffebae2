"""The streaming process under idle load, and how fast a delivery reaches a reader's stream.

Run it alone (``make bench`` runs it too)::

    .venv/bin/python bench/streaming.py [--streams 2000] [--samples 50] [--out FILE.json]

What it does: a database of its own (``followfeed_bench_streaming``, migrated), a private
``redis-server``, and one streaming process (uvicorn serving ``config.asgi``, production
settings) on a free port. It opens ``--streams`` idle ``/api/v1/streaming/user`` streams, each
of an account of its own with its own token, from one asyncio loop, and reads the process's
RSS before and after (memory per stream). With them open, a reader who follows an author
streams too; ``--samples`` times a note of the author is fanned out (``feed.outbox.note_fan_out``,
as the worker runs it) and the time from the fan-out's start to the ``update`` frame's arrival
is taken, beside the fan-out's own time. The goal is a p50 under 50 ms on an idle machine.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATABASE_URL = "mysql://root:@127.0.0.1:3306/followfeed_bench_streaming"
# Streams opened at once: below the listen backlog (somaxconn), so no SYN is dropped.
OPEN_BATCH = 200


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=2000, help="idle streams to hold (default 2000)")
    parser.add_argument("--samples", type=int, default=50, help="notes fanned out for the latency (default 50)")
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    return parser.parse_args(argv)


def rss_kib(pid: int) -> int:
    """The resident set size of process ``pid`` in KiB (``VmRSS``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def accounts_with_tokens(count: int) -> list[tuple[Any, str]]:
    """``count`` fresh accounts, each with a read token; returns ``[(account, token)]``."""
    from django.utils import timezone
    from oauth2_provider.models import AccessToken, Application

    from users.models import User

    app = Application.objects.create(
        name="bench streams",
        redirect_uris="urn:ietf:wg:oauth:2.0:oob",
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        algorithm="",
    )
    stamp = int(time.time())
    users = User.objects.bulk_create([User(username=f"s{stamp}_{i}", password="!") for i in range(count)])
    expires = timezone.now() + timedelta(days=30)
    tokens = [f"bench-{stamp}-{user.pk}" for user in users]
    AccessToken.objects.bulk_create(
        [
            AccessToken(
                user=user,
                application=app,
                token=token,
                token_checksum=hashlib.sha256(token.encode()).hexdigest(),
                scope="read",
                expires=expires,
            )
            for user, token in zip(users, tokens)
        ]
    )
    return list(zip(users, tokens))


async def hold_streams(port: int, tokens: list[str]) -> list[asyncio.StreamWriter]:
    """Open one stream per token and read each up to its greeting; returns the open connections."""
    writers: list[asyncio.StreamWriter] = []

    async def open_one(token: str) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            f"GET /api/v1/streaming/user HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
            "Accept: text/event-stream\r\n\r\n".encode()
        )
        await writer.drain()
        try:
            head = await reader.readuntil(b":)\n\n")
        except asyncio.IncompleteReadError as exc:
            raise RuntimeError(exc.partial[:700].decode(errors="replace")) from None
        if b" 200 " not in head.split(b"\r\n", 1)[0]:
            raise RuntimeError(head[:200].decode(errors="replace"))
        writers.append(writer)

    for start in range(0, len(tokens), OPEN_BATCH):
        await asyncio.gather(*(open_one(token) for token in tokens[start : start + OPEN_BATCH]))
    return writers


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("DATABASE_URL", DATABASE_URL)
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    os.environ["REDIS_KEY_PREFIX"] = "benchstream:"
    os.environ["CELERY_TASK_ALWAYS_EAGER"] = "true"
    from bench.servers import PrivateRedis

    redis_server = PrivateRedis()
    os.environ["REDIS_URL"] = redis_server.url
    import MySQLdb

    connection = MySQLdb.connect(host="127.0.0.1", user="root", passwd="")
    connection.cursor().execute(
        "CREATE DATABASE IF NOT EXISTS followfeed_bench_streaming CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
    )
    connection.close()
    import django

    django.setup()
    from django.core.management import call_command
    from django.utils import timezone

    call_command("migrate", interactive=False, verbosity=0)
    from bench.report import print_and_save
    from bench.timing import summarize
    from core.outbox import now_ms
    from core.redis import get_redis, write_sentinels
    from datatools.management.commands.run_demo import streaming_command
    from feed import outbox as feed_outbox
    from feed.models import Note
    from feed.rebuild import inbox_rebuild
    from social.services import follow_create
    from tests.support.faults import free_port, stop_process
    from tests.support.streaming import open_stream
    from users.models import User

    write_sentinels(get_redis(), now_ms())
    accounts = accounts_with_tokens(args.streams + 1)
    tokens = [token for _, token in accounts]
    reader = accounts[-1][0]
    author = User.objects.create(username=f"author{int(time.time())}", password="!")
    User.objects.filter(pk=reader.pk).update(last_seen_at=timezone.now())
    reader.refresh_from_db()
    follow_create(actor=reader, followee_id=author.pk)
    inbox_rebuild(user_id=reader.pk)

    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.production",
        "DJANGO_SECRET_KEY": "bench-streaming-only",
        "CELERY_BROKER_URL": os.environ.get("CELERY_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//"),
        "DJANGO_ALLOWED_HOSTS": "localhost,127.0.0.1",
        "DJANGO_SECURE_SSL_REDIRECT": "false",
        "CONN_MAX_AGE": "0",
    }
    command = [*streaming_command(host="127.0.0.1", port=port), "--log-level", "warning", "--backlog", "4096"]
    process = subprocess.Popen(command, cwd=ROOT, env=env)
    results: dict[str, Any] = {"streams": args.streams, "samples": args.samples}
    try:
        import requests

        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(f"http://127.0.0.1:{port}/api/v1/streaming/health", timeout=1).text == "OK":
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("the streaming process did not start")
            time.sleep(0.2)
        # One stream first: the process has imported and connected what a stream needs.
        with open_stream(f"http://127.0.0.1:{port}", tokens[-1]):
            time.sleep(1)
        before = rss_kib(process.pid)
        loop = asyncio.new_event_loop()
        started = time.perf_counter()
        writers = loop.run_until_complete(hold_streams(port, tokens[: args.streams]))
        opened_s = time.perf_counter() - started
        time.sleep(3)
        after = rss_kib(process.pid)
        results["idle"] = {
            "open": len(writers),
            "open_seconds": round(opened_s, 2),
            "rss_before_kib": before,
            "rss_after_kib": after,
            "kib_per_stream": round((after - before) / max(1, len(writers)), 1),
        }
        latencies: list[int] = []
        fan_outs: list[int] = []
        with open_stream(f"http://127.0.0.1:{port}", tokens[-1]) as stream:
            time.sleep(0.5)
            for i in range(args.samples):
                note = Note.objects.create(author=author, body=f"bench stream {i}")
                begun = time.perf_counter()
                feed_outbox.note_fan_out(note_id=note.pk)
                fan_outs.append(int((time.perf_counter() - begun) * 1e9))
                frame = stream.next_event("update", timeout=10)
                assert frame.id == str(note.pk), (frame.id, note.pk)
                latencies.append(int((frame.received_at - begun) * 1e9))
                time.sleep(0.05)
        results["publish_to_event_ms"] = {
            key.replace("_us", "_ms"): round(value / 1e3, 2)
            for key, value in summarize(latencies).as_dict().items()
            if key.endswith("_us")
        }
        results["fan_out_ms"] = {
            key.replace("_us", "_ms"): round(value / 1e3, 2)
            for key, value in summarize(fan_outs).as_dict().items()
            if key.endswith("_us")
        }
        results["goal_p50_ms"] = 50
        results["load"] = os.getloadavg()
        for writer in writers:
            writer.close()
        loop.close()
    finally:
        stop_process(process, timeout=10)  # open streams keep uvicorn's graceful shutdown waiting
        redis_server.stop()
    print_and_save(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

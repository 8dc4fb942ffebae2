"""HTTP under load: gunicorn and wrk against the real stack on the Slashdot graph, beside the framework's floor.

Run it standalone (the services up: MariaDB, RabbitMQ; ``wrk`` from Debian)::

    .venv/bin/python bench/http_load.py --out bench/results [--seconds 10] [--quick]
    .venv/bin/python bench/http_load.py --profile home --profile-label after [--profile-only]

or from another harness: ``bench.http_load.run(out_dir, seconds=10, quick=False)``.
Nothing Django-related runs in the caller's process (the data is made by
``bench/http_setup.py`` in a child process), so a caller already set up with
other settings can call ``run``.

What one run does:

1. Starts a private ``redis-server`` (``bench.servers.PrivateRedis``) that
   loads the snapshot the last setup saved in ``var/bench-http/`` (if any),
   makes the RabbitMQ vhost ``http_bench`` (idempotent) and empties its queues.
2. ``bench/http_setup.py`` in a child process: the database
   ``followfeed_http`` (``followfeed_http_quick`` for ``--quick``, a slice of
   the graph) created, migrated and loaded with the Slashdot graph from
   ``FOLLOWFEED_DATA_DIR`` (once), the Higgs replay as notes (once), the
   last run's writes undone, the follow mirror and the feeds of the reader,
   the writers and the writers' followers rebuilt (or the snapshot kept when
   it was taken of the same database state), signed-in sessions for the
   reader and the writers.
3. One Celery worker (solo pool) on the followfeed server's queue, and two
   gunicorn servers of the production settings (``bench.http_settings``,
   ``GUNICORN_WORKERS`` sync workers each, as the README's production lines
   run it; the access log on, to a file): *followfeed* (Redis up) and
   *database-only* (``REDIS_URL`` a port nobody listens on, the breaker open
   for an hour, so every read takes its database fallback; its tasks go to a
   queue no worker consumes, deleted at the end).
4. Checks every request once on both servers (status, signed in, feed not
   catching up), then loads each endpoint with ``wrk`` (``CONNECTIONS``
   connections, ``THREADS`` threads, a warm-up first) on followfeed, then
   on database-only, with a floor run before the first endpoint and after
   each one: an endpoint's share of the floor uses the floor runs beside it,
   since the cores are shared and the floor moves with whatever else runs.
   Between runs the servers finish the requests wrk left queued, so no run
   pays for the last one's; after the followfeed write mix the worker gets
   10 s to drain its queue, and what is left is purged.
5. Writes ``http_load.json`` and ``http_load.md`` into ``--out``.

The load is sent as the TLS proxy of production sends it
(``X-Forwarded-Proto: https``, and ``Origin`` on writes for the CSRF
check), so production's HTTPS settings run unchanged. Errors are wrk's:
responses of 400 and above plus socket errors (connect, read, write,
timeout after ``WRK_TIMEOUT``); 3xx answers are counted apart (none is
expected). Server-side, every run's share of the access log gives the
statuses and the time gunicorn spent per request, and the error log's
tracebacks are kept with the run that produced them.

``--profile PAGE`` also records the followfeed server's workers with
py-spy while ``PAGE`` is under the same load, and writes a summary of the
top frames (own and cumulative) to ``http_profile_<label>.txt``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.servers import PrivateRedis, free_port  # noqa: E402
from tests.support.commands import celery_worker_command  # noqa: E402

DATABASE_URL = "mysql://root:@127.0.0.1:3306/followfeed_http"
QUICK_DATABASE_URL = "mysql://root:@127.0.0.1:3306/followfeed_http_quick"
BROKER = "amqp://guest:guest@127.0.0.1:5672/"
VHOST = "http_bench"
QUEUE = "http_bench"
DATABASE_ONLY_QUEUE = "http_bench_database_only"
CONNECTIONS = 32
THREADS = 2
WRK_TIMEOUT = "5s"
GUNICORN_WORKERS = 3
GUNICORN_WORKER_CLASS = "sync"
# The goals, per endpoint with no errors: at least this share of the floor's requests per
# second (a page's; a JSON endpoint's), and at most this server time p50 (ms) for the pages it names.
PAGE_GOAL_SHARE = 0.25
JSON_GOAL_SHARE = 0.40
SERVER_P50_GOAL_MS = 3.0
SERVER_P50_GOAL_PAGES = ("profile", "followers_page_1", "home")
# Follow toggles per publish in the write mix.
FOLLOWS_PER_PUBLISH = 3
DEEP_DEPTH = 2000
# Seconds of each floor run (one before the first endpoint and one after each).
FLOOR_SECONDS = 5.0
SETTINGS_MODULE = "bench.http_settings"
# The private Redis's snapshot (RDB) of the last setup, and its description: git-ignored, reused
# by the next run of the same database state instead of rebuilding the mirror (bench/http_setup.py).
SNAPSHOT_DIR = ROOT / "var" / "bench-http"
MARKER = "HTTPLOAD "
ACCESS_LOG_FORMAT = "%(s)s %(D)s %(m)s %(U)s"
INHERITED_SETTINGS_PREFIXES = (
    "DJANGO_",
    "CELERY_",
    "REDIS_",
    "DATABASE_",
    "FANOUT_",
    "FEED_",
    "FOLLOW_",
    "FOLLOWERS_",
    "FOLLOWING_",
    "NOTE_",
    "INBOX_",
    "OUTBOX_",
    "SOCIAL_",
    "SIGNUP_",
    "LOGIN_",
    "CLIENT_ADDRESS",
    "CONN_MAX_AGE",
    "REPLICA_",
    "LONG_TASK",
    "FOLLOWFEED_VAR_DIR",
)

Spec = tuple[str, str, dict[str, str], str | None]
"""One request: ``(method, path with query, headers, body or None)``."""


@dataclass
class Scale:
    """How big a run is: the graph slice (``limit`` edges, None: all), notes, writers, seconds."""

    database_url: str = DATABASE_URL
    limit: int | None = None
    notes: int = 20_000
    profiles: int = 50
    writers_per_thread: int = 4
    targets_per_writer: int = 100
    warmup_seconds: float = 1.0


QUICK = Scale(database_url=QUICK_DATABASE_URL, limit=30_000, notes=2_000, profiles=20, targets_per_writer=30, warmup_seconds=0.0)
QUICK_SECONDS = 1.0


@dataclass
class Endpoint:
    """One row of the table: what is loaded and how its answers are checked.

    ``specs(mode)`` gives one request list per wrk thread, cycled in order;
    ``check(status, body)`` returns a problem (str) or None for one answer
    of the preflight.
    """

    key: str
    title: str
    describe: str
    specs: Callable[[str], list[list[Spec]]]
    check: Callable[[int, bytes], str | None]
    goal_share: float | None = PAGE_GOAL_SHARE  # None: a row for comparison, not a goal


@dataclass
class Server:
    """A gunicorn master with its log files and how far the last run read them (bytes)."""

    mode: str
    port: int
    process: subprocess.Popen[bytes]
    access_log: Path
    error_log: Path
    access_offset: int = 0
    error_offset: int = 0

    def settle(self, *, quiet_s: float = 0.2, cap_s: float = 30.0) -> float:
        """Wait until the access log has not grown for ``quiet_s``, at most ``cap_s``; returns the seconds waited.

        Needed between runs: when wrk stops, the connections it left queued in the listen backlog
        are still served by the sync workers (up to ``CONNECTIONS`` requests), and that work must
        not land in the next run's seconds.
        """
        started = time.monotonic()
        size = self.access_log.stat().st_size
        quiet_since = started
        while time.monotonic() - started < cap_s:
            time.sleep(0.05)
            now_size = self.access_log.stat().st_size
            if now_size != size:
                size, quiet_since = now_size, time.monotonic()
            elif time.monotonic() - quiet_since >= quiet_s:
                break
        return round(time.monotonic() - started, 2)

    def new_access_lines(self) -> list[str]:
        """Access-log lines written since the last call (``ACCESS_LOG_FORMAT``)."""
        data = self.access_log.read_bytes()
        lines = data[self.access_offset :].decode(errors="replace").splitlines()
        self.access_offset = len(data)
        return lines

    def new_errors(self) -> list[str]:
        """Tracebacks and ERROR lines the error log got since the last call (each block one string)."""
        data = self.error_log.read_bytes()
        text = data[self.error_offset :].decode(errors="replace")
        self.error_offset = len(data)
        return tracebacks(text)


@dataclass
class Run:
    """One wrk run's figures (times in ms) and the server's view of the same seconds."""

    requests_per_s: float
    p50_ms: float
    p99_ms: float
    mean_ms: float
    max_ms: float
    requests: int
    seconds: float
    errors: int
    status_errors: int
    socket_errors: dict[str, int]
    status_3xx: int
    status_4xx: int
    status_5xx: int
    server_statuses: dict[str, int] = field(default_factory=dict)
    server_p50_ms: float | None = None
    server_p99_ms: float | None = None
    redis_commands_per_request: float | None = None
    loadavg_1m_after: float = 0.0
    tracebacks: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


def loadavg() -> list[float]:
    """The 1, 5 and 15 minute load averages."""
    return [round(x, 2) for x in os.getloadavg()]


def tracebacks(text: str) -> list[str]:
    """The Python tracebacks (with the log line before each, e.g. Django's "Internal Server Error:
    /path") and other error records (gunicorn's ``[ERROR]``, ``[CRITICAL]``: a worker timeout) in a
    chunk of log ``text``: at most 20, each cut to 4,000 characters."""
    found: list[str] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines) and len(found) < 20:
        line = lines[index]
        if line.startswith("Traceback (most recent call last)"):
            block = [lines[index - 1], line] if index and not lines[index - 1].startswith(" ") else [line]
            index += 1
            while index < len(lines) and (lines[index].startswith((" ", "\t")) or not lines[index].strip()):
                block.append(lines[index])
                index += 1
            if index < len(lines):
                block.append(lines[index])  # the exception's own line ends the traceback
            found.append("\n".join(block)[:4000])
        elif any(level in line for level in ("[ERROR]", "[CRITICAL]", " ERROR ")) and not (
            index + 1 < len(lines) and lines[index + 1].startswith("Traceback")
        ):
            found.append(line[:4000])
        index += 1
    return found


# --- requests -----------------------------------------------------------------


def page_headers(*, session: str | None, csrf: str) -> dict[str, str]:
    """Headers of a page request as the TLS proxy forwards it, signed in with ``session``."""
    cookie = f"csrftoken={csrf}" + (f"; sessionid={session}" if session else "")
    return {"X-Forwarded-Proto": "https", "Cookie": cookie, "Accept": "text/html"}


def api_headers(*, session: str | None, csrf: str, port: int, write: bool = False) -> dict[str, str]:
    """Headers of a JSON API request; ``write`` adds the CSRF token and the site's origin."""
    headers = {**page_headers(session=session, csrf=csrf), "Accept": "application/json"}
    if write:
        headers.update({"X-CSRFToken": csrf, "Origin": f"https://127.0.0.1:{port}", "Content-Type": "application/json"})
    return headers


def write_mix(writers: list[dict[str, Any]], *, csrf: str, port: int, label: str) -> list[Spec]:
    """One thread's write cycle: every writer follows each of its targets in turn, then unfollows
    them in the same order (so a full cycle leaves the graph as it found it), with one note
    published (``POST /api/notes``) after every ``FOLLOWS_PER_PUBLISH`` toggles, the writers in turn.

    :param writers: ``Writer`` dicts of ``bench/http_setup.py`` (session, targets).
    :param label: goes into the notes' text, with the request's index.
    :returns: the requests in order.
    """
    toggles: list[tuple[dict[str, Any], int]] = []
    for index in range(max(len(w["targets"]) for w in writers)):
        toggles += [(w, w["targets"][index]) for w in writers if index < len(w["targets"])]
    specs: list[Spec] = []
    published = 0
    for flag in ("true", "false"):
        for writer, target in toggles:
            headers = api_headers(session=writer["session"], csrf=csrf, port=port, write=True)
            specs.append(("PUT", f"/api/follow/{target}/{flag}", headers, None))
            if len(specs) % (FOLLOWS_PER_PUBLISH + 1) == FOLLOWS_PER_PUBLISH:
                author = writers[published % len(writers)]
                body = json.dumps({"body": f"http bench note {label} {published}: three toggles, one note"})
                specs.append(
                    ("POST", "/api/notes", api_headers(session=author["session"], csrf=csrf, port=port, write=True), body)
                )
                published += 1
    return specs


def expect_json(*, statuses: tuple[int, ...] = (200,), feed: bool = False) -> Callable[[int, bytes], str | None]:
    """A preflight check of an API answer: ``statuses``, the success envelope; ``feed``: not catching up."""

    def check(status: int, body: bytes) -> str | None:
        if status not in statuses:
            return f"status {status}, expected {statuses}: {body[:300]!r}"
        try:
            data = json.loads(body)
        except ValueError:
            return f"not JSON: {body[:200]!r}"
        if not data.get("success"):
            return f"envelope says failure: {body[:300]!r}"
        if feed and data["data"].get("catchingUp"):
            return "the feed is catching up (inbox not synced)"
        return None

    return check


def expect_page(*, marker: bytes | None = None, signed_in_as: str | None = None) -> Callable[[int, bytes], str | None]:
    """A preflight check of a page: 200, ``marker`` in the body, the account name shown, not catching up."""

    def check(status: int, body: bytes) -> str | None:
        if status != 200:
            return f"status {status}, expected 200: {body[:300]!r}"
        if marker is not None and marker not in body:
            return f"{marker!r} not in the page"
        if signed_in_as is not None and signed_in_as.encode() not in body:
            return f"not signed in as {signed_in_as}"
        if b"Catching up" in body:
            return "the home feed is catching up (inbox not synced)"
        return None

    return check


def expect_statuses() -> Callable[[int, bytes], str | None]:
    """A preflight check of a Mastodon list answer: 200 and a JSON array of statuses."""

    def check(status: int, body: bytes) -> str | None:
        if status != 200:
            return f"status {status}: {body[:300]!r}"
        try:
            data = json.loads(body)
        except ValueError:
            return f"not JSON: {body[:200]!r}"
        if not isinstance(data, list) or not data or "account" not in data[0]:
            return f"not a list of statuses: {body[:300]!r}"
        return None

    return check


def endpoints(plan: dict[str, Any], deep_cursor: str, depth: int) -> list[Endpoint]:
    """The floor and every endpoint of the table, from the setup's ``plan``; ``specs`` takes a mode
    (``followfeed``, ``database_only``) or, for the write mix, a writer group of the plan.

    :param deep_cursor: the followers cursor after ``depth`` followers of the followed account.
    """
    csrf = plan["csrf_token"]
    reader = plan["reader"]
    followed = plan["followed"]
    session = reader["session"]
    pages = page_headers(session=session, csrf=csrf)
    api = api_headers(session=session, csrf=csrf, port=0)

    def same(*specs: Spec) -> Callable[[str], list[list[Spec]]]:
        return lambda mode: [list(specs)] * THREADS

    def writes(group: str) -> list[list[Spec]]:
        # The Origin header is the server's own, set per server by ``_with_origin``.
        return [write_mix(w, csrf=csrf, port=0, label=f"{group} t{i}") for i, w in enumerate(plan["writer_groups"][group])]

    profiles: list[Spec] = [("GET", f"/u/{quote(name)}/", pages, None) for name in plan["profiles"]]
    followers_path = f"/u/{quote(followed['username'])}/followers/"
    return [
        Endpoint(
            "floor",
            "floor: minimal Django view",
            "GET /bench/floor (a two-byte HttpResponse, same middleware)",
            same(("GET", "/bench/floor", pages, None)),
            lambda status, body: None if status == 200 and body == b"ok" else f"status {status}: {body[:100]!r}",
        ),
        Endpoint(
            "data_floor",
            "data floor: a signed-in JSON page's round trips",
            "GET /bench/data-floor signed in as the reader: the session and account, one Redis read of the inbox, "
            "one query over its 20 notes, a small JSON answer (bench/http_urls.py; none of followfeed's logic)",
            same(("GET", "/bench/data-floor", api, None)),
            expect_json(),
            goal_share=None,
        ),
        Endpoint(
            "profile",
            "profile page",
            f"GET /u/<name>/ of the {len(profiles)} most followed accounts in turn, viewed by the reader",
            lambda mode: [profiles] * THREADS,
            expect_page(signed_in_as=reader["username"]),
        ),
        Endpoint(
            "followers_page_1",
            "followers page 1",
            f"GET {followers_path} ({followed['followers']:,} followers), 50 per page",
            same(("GET", followers_path, pages, None)),
            expect_page(marker=b"Older"),
        ),
        Endpoint(
            "followers_page_deep",
            f"followers page at depth {depth:,}",
            f"GET {followers_path}?cursor=... ({depth:,} followers in)",
            same(("GET", f"{followers_path}?cursor={quote(deep_cursor)}", pages, None)),
            expect_page(),
        ),
        Endpoint(
            "home",
            "home feed",
            f"GET /home signed in as {reader['username']} (follows {reader['following']:,})",
            same(("GET", "/home", pages, None)),
            expect_page(signed_in_as=reader["username"]),
        ),
        Endpoint(
            "api_followers",
            "JSON followers",
            f"GET /api/users/{followed['id']}/followers (page 1, 50)",
            same(("GET", f"/api/users/{followed['id']}/followers", api, None)),
            expect_json(),
            goal_share=JSON_GOAL_SHARE,
        ),
        Endpoint(
            "api_feed",
            "JSON home feed",
            f"GET /api/feed signed in as {reader['username']} (page 1, 20)",
            same(("GET", "/api/feed", api, None)),
            expect_json(feed=True),
            goal_share=JSON_GOAL_SHARE,
        ),
        Endpoint(
            "api_feed_40",
            "JSON home feed, 40",
            f"GET /api/feed?limit=40 signed in as {reader['username']}",
            same(("GET", "/api/feed?limit=40", api, None)),
            expect_json(feed=True),
            goal_share=JSON_GOAL_SHARE,
        ),
        Endpoint(
            "mastodon_home",
            "Mastodon home timeline, 40",
            f"GET /api/v1/timelines/home?limit=40 with {reader['username']}'s token",
            same(
                (
                    "GET",
                    "/api/v1/timelines/home?limit=40",
                    {
                        "X-Forwarded-Proto": "https",
                        "Authorization": f"Bearer {reader.get('token', '')}",
                        "Accept": "application/json",
                    },
                    None,
                )
            ),
            expect_statuses(),
            goal_share=JSON_GOAL_SHARE,
        ),
        Endpoint(
            "write_mix",
            "write mix: follow toggles + publishes",
            f"PUT /api/follow/<id>/true|false by {THREADS * len(plan['writer_groups']['followfeed'][0])} signed-in writers "
            f"(each follows then unfollows its targets), and one POST /api/notes per {FOLLOWS_PER_PUBLISH} toggles",
            writes,
            expect_json(statuses=(200, 201)),
            goal_share=JSON_GOAL_SHARE,
        ),
    ]


# --- wrk ------------------------------------------------------------------------


def lua_string(text: str) -> str:
    """``text`` (ASCII) as a Lua string literal."""
    if not text.isascii():
        raise ValueError(f"not ASCII: {text!r}")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r") + '"'


def lua_script(per_thread: list[list[Spec]]) -> str:
    """A wrk script that sends thread *i* the requests ``per_thread[i]`` in order, cycling, counts
    3xx/4xx/5xx answers per thread, and prints one line ``HTTPLOAD {json}`` at the end with
    requests, duration (µs), latency percentiles (µs) and errors."""
    tables = []
    for specs in per_thread:
        rows = []
        for method, path, headers, body in specs:
            header_table = "{" + ", ".join(f"[{lua_string(k)}] = {lua_string(v)}" for k, v in headers.items()) + "}"
            rows.append(
                f"{{{lua_string(method)}, {lua_string(path)}, {header_table}, {lua_string(body) if body is not None else 'nil'}}}"
            )
        tables.append("{\n" + ",\n".join(rows) + "\n}")
    return (
        "local specs = {\n"
        + ",\n".join(tables)
        + "\n}\n"
        + """
local threads = {}
local count = 0
function setup(thread)
  thread:set("tid", count)
  count = count + 1
  table.insert(threads, thread)
end
function init(args)
  local mine = specs[(tid % #specs) + 1]
  reqs = {}
  for i, s in ipairs(mine) do reqs[i] = wrk.format(s[1], s[2], s[3], s[4]) end
  n = 0
  s3xx = 0
  s4xx = 0
  s5xx = 0
end
function request()
  n = n + 1
  return reqs[((n - 1) % #reqs) + 1]
end
function response(status, headers, body)
  if status >= 500 then s5xx = s5xx + 1
  elseif status >= 400 then s4xx = s4xx + 1
  elseif status >= 300 then s3xx = s3xx + 1 end
end
function done(summary, latency, requests)
  local c3, c4, c5 = 0, 0, 0
  for _, t in ipairs(threads) do
    c3 = c3 + t:get("s3xx")
    c4 = c4 + t:get("s4xx")
    c5 = c5 + t:get("s5xx")
  end
  local e = summary.errors
  io.write(string.format('HTTPLOAD {"requests": %d, "duration_us": %d, "p50_us": %d, "p99_us": %d, '
    .. '"mean_us": %.1f, "max_us": %d, "connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d, '
    .. '"s3xx": %d, "s4xx": %d, "s5xx": %d}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), latency.mean, latency.max,
    e.connect, e.read, e.write, e.status, e.timeout, c3, c4, c5))
end
"""
    )


def wrk(port: int, script: Path, seconds: float) -> dict[str, Any]:
    """Run wrk against 127.0.0.1:``port`` for ``seconds`` with ``script``; returns the figures its
    ``done`` printed (see ``lua_script``).

    :raises RuntimeError: wrk failed or printed no figures.
    """
    command = [
        "wrk",
        "-t",
        str(THREADS),
        "-c",
        str(CONNECTIONS),
        "-d",
        f"{max(1, round(seconds))}s",
        "--timeout",
        WRK_TIMEOUT,
        "-s",
        str(script),
        f"http://127.0.0.1:{port}/",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60, check=False)
    for line in done.stdout.splitlines():
        if line.startswith(MARKER):
            figures: dict[str, Any] = json.loads(line[len(MARKER) :])
            return figures
    raise RuntimeError(f"wrk printed no figures (exit {done.returncode}): {done.stdout[-1000:]} {done.stderr[-1000:]}")


# --- processes ------------------------------------------------------------------


def base_environment(redis_url: str, database_url: str, static_root: Path) -> dict[str, str]:
    """The environment of the setup process, gunicorn and the worker (production settings, private services)."""
    # The caller's own settings variables (bench/run.py sets some) must not reach these processes;
    # FOLLOWFEED_DATA_DIR, where the graphs are, does.
    env = {key: value for key, value in os.environ.items() if not key.startswith(INHERITED_SETTINGS_PREFIXES)}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": SETTINGS_MODULE,
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url,
            "CELERY_BROKER_URL": BROKER + VHOST,
            "CELERY_TASK_DEFAULT_QUEUE": QUEUE,
            "FOLLOW_RATE": "1000000000/d",
            "NOTE_RATE": "1000000000/d",
            "BENCH_STATIC_ROOT": str(static_root),
            "LOG_LEVEL": "WARNING",
            "PYTHONPATH": str(ROOT),
        }
    )
    return env


def ensure_vhost() -> None:
    """Create the RabbitMQ vhost ``VHOST`` and give guest every permission on it, unless guest
    already has them there (idempotent)."""
    listed = subprocess.run(["rabbitmqctl", "-q", "list_permissions", "-p", VHOST], capture_output=True, text=True, check=False)
    if listed.returncode == 0 and any(line.split() == ["guest", ".*", ".*", ".*"] for line in listed.stdout.splitlines()):
        return
    vhosts = subprocess.run(["rabbitmqctl", "-q", "list_vhosts"], capture_output=True, text=True, check=True).stdout.split()
    if VHOST not in vhosts:
        subprocess.run(["rabbitmqctl", "-q", "add_vhost", VHOST], check=True, capture_output=True)
    subprocess.run(
        ["rabbitmqctl", "-q", "set_permissions", "-p", VHOST, "guest", ".*", ".*", ".*"], check=True, capture_output=True
    )


def delete_queues(*names: str) -> None:
    """Delete the queues ``names`` of ``VHOST`` with their messages (missing ones are fine)."""
    from kombu.connection import Connection

    with Connection(BROKER + VHOST) as conn:
        for name in names:
            channel = conn.channel()
            try:
                channel.queue_delete(name)
            except Exception:  # noqa: BLE001, S110 - never declared: nothing to delete
                pass
            finally:
                channel.close()


def queued_messages(name: str) -> int:
    """Messages ready in queue ``name`` of ``VHOST`` (0 when it does not exist)."""
    from kombu.connection import Connection

    with Connection(BROKER + VHOST) as conn:
        channel = conn.channel()
        try:
            return int(channel.queue_declare(name, passive=True).message_count)
        except Exception:  # noqa: BLE001 - not declared yet
            return 0
        finally:
            try:
                channel.close()
            except Exception:  # noqa: BLE001, S110 - closed by the failed declare
                pass


def run_setup(env: dict[str, str], scale: Scale, plan_path: Path, log: Path, snapshot: Path) -> dict[str, Any]:
    """``bench/http_setup.py`` in a child process; returns its plan.

    :param snapshot: the description of the Redis snapshot (``http_setup.snapshot_save``).

    :raises SystemExit: the setup failed (its log's tail in the message).
    """
    command = [
        sys.executable,
        str(ROOT / "bench" / "http_setup.py"),
        "--plan",
        str(plan_path),
        "--notes",
        str(scale.notes),
        "--threads",
        str(THREADS),
        "--writers-per-thread",
        str(scale.writers_per_thread),
        "--targets-per-writer",
        str(scale.targets_per_writer),
        "--profiles",
        str(scale.profiles),
        "--snapshot",
        str(snapshot),
    ]
    if scale.limit is not None:
        command += ["--limit", str(scale.limit)]
    with log.open("wb") as out:
        done = subprocess.run(command, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench/http_setup.py failed ({done.returncode}):\n{log.read_text()[-3000:]}")
    plan: dict[str, Any] = json.loads(plan_path.read_text())
    return plan


def launch_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Start one Celery worker (solo pool) on ``QUEUE``; ``wait_worker`` waits until it is ready."""
    return subprocess.Popen(
        celery_worker_command(QUEUE, f"{QUEUE}@%h"),
        cwd=ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )


def wait_worker(worker: subprocess.Popen[bytes], log: Path) -> None:
    """Wait until ``worker`` logged that it is ready.

    :raises SystemExit: it did not start within 60 s.
    """
    deadline = time.monotonic() + 60
    while b"ready" not in log.read_bytes():
        if time.monotonic() > deadline or worker.poll() is not None:
            raise SystemExit(f"the Celery worker did not start: {log.read_text()[-2000:]}")
        time.sleep(0.1)


def launch_server(mode: str, env: dict[str, str], directory: Path, *, workers: int, worker_class: str, threads: int) -> Server:
    """Start gunicorn ``config.wsgi`` on a free port with ``workers`` workers of ``worker_class``
    (``threads`` threads each for ``gthread``); ``wait_server`` waits until it answers."""
    port = free_port()
    access_log = directory / f"gunicorn-{mode}-access.log"
    error_log = directory / f"gunicorn-{mode}-error.log"
    access_log.touch()
    process = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "gunicorn"),
            "config.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--worker-class",
            worker_class,
            "--threads",
            str(threads),
            "--access-logfile",
            str(access_log),
            "--access-logformat",
            ACCESS_LOG_FORMAT,
            "--error-logfile",
            str(error_log),
            "--capture-output",
        ],
        cwd=ROOT,
        env=env,
        stdout=error_log.open("ab"),
        stderr=subprocess.STDOUT,
    )
    return Server(mode=mode, port=port, process=process, access_log=access_log, error_log=error_log)


def wait_server(server: Server) -> None:
    """Wait until ``server`` answers ``/bench/floor`` with 200, then start its logs' offsets there.

    :raises SystemExit: it did not answer within 60 s.
    """
    deadline = time.monotonic() + 60
    while True:
        try:
            status, _ = fetch(server.port, ("GET", "/bench/floor", {"X-Forwarded-Proto": "https"}, None))
            if status == 200:
                break
        except OSError:
            pass
        if time.monotonic() > deadline or server.process.poll() is not None:
            raise SystemExit(f"gunicorn ({server.mode}) did not start: {server.error_log.read_text()[-2000:]}")
        time.sleep(0.2)
    server.new_access_lines()
    server.new_errors()


def stop_all(processes: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM every process at once (gunicorn and Celery stop gracefully), SIGKILL what is left after 20 s."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    deadline = time.monotonic() + 20
    for process in processes:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def fetch(port: int, spec: Spec) -> tuple[int, bytes]:
    """Send one request to 127.0.0.1:``port``; returns ``(status, body)``."""
    method, path, headers, body = spec
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body=body.encode() if body is not None else None, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def followers_cursor(port: int, plan: dict[str, Any], depth: int) -> str:
    """The cursor of the followed account's followers after ``depth`` of them, walked through the
    JSON API's ``next_cursor`` one page (``FOLLOW_PAGE_SIZE``) at a time, as "Older" pages.

    :raises SystemExit: the list ended first.
    """
    headers = api_headers(session=plan["reader"]["session"], csrf=plan["csrf_token"], port=port)
    limit = int(plan["follow_page_size"])
    cursor = ""
    seen = 0
    while seen < depth:
        path = f"/api/users/{plan['followed']['id']}/followers?limit={limit}" + (f"&cursor={quote(cursor)}" if cursor else "")
        status, body = fetch(port, ("GET", path, headers, None))
        data = json.loads(body)["data"] if status == 200 else None
        if not data or not data["next_cursor"]:
            raise SystemExit(f"followers of {plan['followed']['username']} ended before {depth} (status {status})")
        seen += len(data["list"])
        cursor = data["next_cursor"]
    return cursor


def preflight(endpoint: Endpoint, servers: dict[str, Server]) -> list[str]:
    """Send the first requests of each thread of ``endpoint`` once to each server and check them
    (the write mix: a few toggles and publishes of the ``preflight`` writers, then the unfollows that
    undo those toggles).

    :returns: problems found, empty when every answer passed.
    """
    problems = []
    for mode, server in servers.items():
        for per_thread in endpoint.specs("preflight" if endpoint.key == "write_mix" else mode)[:THREADS]:
            sample = per_thread[: 2 * (FOLLOWS_PER_PUBLISH + 1)] if endpoint.key == "write_mix" else per_thread[:2]
            undo = [
                next(s for s in per_thread if s[1] == path.replace("/true", "/false") and s[2]["Cookie"] == headers["Cookie"])
                for method, path, headers, _ in sample
                if method == "PUT"
            ]
            for spec in sample + undo:
                status, body = fetch(server.port, _with_origin(spec, server.port))
                problem = endpoint.check(status, body)
                if problem:
                    problems.append(f"{endpoint.key} on {mode}: {spec[0]} {spec[1]}: {problem}")
    return problems


def _with_origin(spec: Spec, port: int) -> Spec:
    method, path, headers, body = spec
    if "Origin" in headers:
        headers = {**headers, "Origin": f"https://127.0.0.1:{port}"}
    return method, path, headers, body


# --- measuring ----------------------------------------------------------------


def redis_commands(client: Any) -> int:
    """Commands the private Redis has processed so far (INFO stats)."""
    return int(client.info("stats")["total_commands_processed"])


def server_side(lines: list[str]) -> tuple[dict[str, int], float | None, float | None]:
    """Statuses and gunicorn's time per request (p50, p99 in ms) from access-log lines."""
    statuses: Counter[str] = Counter()
    durations: list[int] = []
    for line in lines:
        parts = line.split()
        if len(parts) >= 2 and parts[1].isdigit():
            statuses[parts[0]] += 1
            durations.append(int(parts[1]))
    if not durations:
        return dict(statuses), None, None
    durations.sort()
    return (
        dict(statuses),
        round(durations[len(durations) // 2] / 1000, 2),
        round(durations[min(len(durations) - 1, int(len(durations) * 0.99))] / 1000, 2),
    )


def measure(endpoint: Endpoint, mode: str, server: Server, directory: Path, *, seconds: float, warmup: float, redis: Any) -> Run:
    """Warm up (writers of ``warmup_<mode>`` for the write mix), then load ``endpoint`` on
    ``server`` for ``seconds``; the server's access and error logs of the measured seconds are kept
    with the run."""
    if warmup > 0:
        warm_mode = f"warmup_{mode}" if endpoint.key == "write_mix" else mode
        script = directory / f"{endpoint.key}-{mode}-warmup.lua"
        script.write_text(lua_script([[_with_origin(s, server.port) for s in specs] for specs in endpoint.specs(warm_mode)]))
        wrk(server.port, script, warmup)
    server.settle()
    server.new_access_lines()
    server.new_errors()
    script = directory / f"{endpoint.key}-{mode}.lua"
    script.write_text(lua_script([[_with_origin(s, server.port) for s in specs] for specs in endpoint.specs(mode)]))
    before = redis_commands(redis) if mode == "followfeed" else None
    figures = wrk(server.port, script, seconds)
    after = redis_commands(redis) if mode == "followfeed" else None
    statuses, server_p50, server_p99 = server_side(server.new_access_lines())
    settled = server.settle()
    left_over = len(server.new_access_lines())
    seconds_run = figures["duration_us"] / 1e6
    socket_errors = {name: int(figures[name]) for name in ("connect", "read", "write", "timeout")}
    run = Run(
        requests_per_s=round(figures["requests"] / seconds_run, 1) if seconds_run else 0.0,
        p50_ms=round(figures["p50_us"] / 1000, 2),
        p99_ms=round(figures["p99_us"] / 1000, 2),
        mean_ms=round(figures["mean_us"] / 1000, 2),
        max_ms=round(figures["max_us"] / 1000, 2),
        requests=int(figures["requests"]),
        seconds=round(seconds_run, 2),
        errors=int(figures["status"]) + sum(socket_errors.values()),
        status_errors=int(figures["status"]),
        socket_errors=socket_errors,
        status_3xx=int(figures["s3xx"]),
        status_4xx=int(figures["s4xx"]),
        status_5xx=int(figures["s5xx"]),
        server_statuses=statuses,
        server_p50_ms=server_p50,
        server_p99_ms=server_p99,
        loadavg_1m_after=loadavg()[0],
        tracebacks=server.new_errors(),
        extra={"served_after_the_end": left_over, "settled_s": settled},
    )
    if before is not None and after is not None and run.requests:
        run.redis_commands_per_request = round((after - before) / run.requests, 2)
    print(
        f"  {endpoint.key:22} {mode:14} {run.requests_per_s:8.1f} req/s  p50 {run.p50_ms:7.1f} ms  p99 {run.p99_ms:7.1f} ms  "
        f"errors {run.errors}  (server p50 {run.server_p50_ms} ms, load {run.loadavg_1m_after})",
        flush=True,
    )
    return run


def wait_for_worker(seconds: float) -> dict[str, float]:
    """Wait until the worker's queue stays empty (two looks 0.5 s apart), at most ``seconds``; then
    purge what is left, so the backlog does not run during the next measurements (its outbox
    entries stay pending in the database; the next run's setup supersedes them).

    :returns: ``{"queued_at_end": messages when called, "waited_s": seconds waited, "purged": messages purged}``.
    """
    from kombu.connection import Connection

    started = time.monotonic()
    queued = queued_messages(QUEUE)
    empty_looks = 0
    while empty_looks < 2 and time.monotonic() - started < seconds:
        time.sleep(0.5)
        empty_looks = empty_looks + 1 if queued_messages(QUEUE) == 0 else 0
    waited = round(time.monotonic() - started, 1)
    purged = 0
    if empty_looks < 2:
        with Connection(BROKER + VHOST) as conn:
            channel = conn.channel()
            try:
                purged = int(channel.queue_purge(QUEUE) or 0)
            finally:
                channel.close()
    return {"queued_at_end": queued, "waited_s": waited, "purged": purged}


# --- profile --------------------------------------------------------------------


def profile(endpoint: Endpoint, server: Server, directory: Path, *, seconds: float, warmup: float) -> tuple[str, Path]:
    """Record the workers of ``server`` with py-spy (raw stacks, 100 Hz, idle frames included,
    non-blocking) for ``seconds`` while wrk loads ``endpoint``.

    :returns: ``(summary text, path of the raw stacks)``.
    :raises SystemExit: py-spy is not installed.
    """
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(py_spy).exists():
        raise SystemExit("py-spy is not installed: bash scripts/bootstrap.sh dev (the bench extra)")
    script = directory / f"{endpoint.key}-profile.lua"
    script.write_text(lua_script([[_with_origin(s, server.port) for s in specs] for specs in endpoint.specs("followfeed")]))
    raw = directory / f"{endpoint.key}-profile.raw.txt"
    load = subprocess.Popen(
        [
            "wrk",
            "-t",
            str(THREADS),
            "-c",
            str(CONNECTIONS),
            "-d",
            f"{round(warmup + seconds + 2)}s",
            "--timeout",
            WRK_TIMEOUT,
            "-s",
            str(script),
            f"http://127.0.0.1:{server.port}/",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    time.sleep(max(warmup, 1.0))
    spy = subprocess.run(
        [
            py_spy,
            "record",
            "--pid",
            str(server.process.pid),
            "--subprocesses",
            "--format",
            "raw",
            "--rate",
            "100",
            "--idle",
            "--nonblocking",
            "--duration",
            str(round(seconds)),
            "--output",
            str(raw),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    out, _ = load.communicate(timeout=seconds + warmup + 60)
    figures = next((json.loads(line[len(MARKER) :]) for line in out.splitlines() if line.startswith(MARKER)), None)
    if spy.returncode != 0 or not raw.exists():
        raise SystemExit(f"py-spy failed: {spy.stdout[-1000:]} {spy.stderr[-1000:]}")
    header = f"load while recording: {json.dumps(figures)}" if figures else "load: wrk printed no figures"
    return summarize_profile(raw.read_text(), header=header), raw


FRAME = re.compile(r"^(?P<function>.+?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")
# Areas of the code by the start of a frame's file as py-spy names it (relative to sys.path, e.g.
# ``django/db/models/query.py``, ``feed/views.py``); the first matching area wins.
PROJECT_APPS = ("core/", "users/", "social/", "feed/", "datatools/", "config/", "bench/")
AREAS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("template rendering (django.template)", ("django/template/", "django/templatetags/")),
    ("database driver and backend (MySQLdb, django.db.backends)", ("MySQLdb/", "django/db/backends/")),
    ("ORM (django.db: queries, rows to objects)", ("django/db/",)),
    ("Redis client (redis-py, django-redis)", ("redis/", "django_redis/")),
    ("URL reversing and resolving (django.urls)", ("django/urls/",)),
    ("sessions and auth (django.contrib.sessions, .auth)", ("django/contrib/sessions/", "django/contrib/auth/")),
    ("middleware (django.middleware, csp, whitenoise)", ("django/middleware/", "csp/", "whitenoise/")),
    ("translation and thread-locals (django.utils.translation, asgiref)", ("django/utils/translation/", "asgiref/")),
    ("followfeed code (core, users, social, feed, templatetags)", PROJECT_APPS),
    ("Celery, kombu, amqp (queueing tasks)", ("celery/", "kombu/", "amqp/")),
    ("other Django (django.utils: lazy objects, escaping, dates; http)", ("django/",)),
    ("gunicorn (HTTP parsing, socket I/O)", ("gunicorn/", "gunicorn")),
)
OTHER_AREA = "other (the standard library, other packages)"
IN_DJANGO = "inside Django (the middleware, the view, the template)"
GUNICORN = "gunicorn: reading the request, writing the response"
CLOSING = "gunicorn: closing the connection after the response (close_graceful waits for the client's FIN, up to 2 s)"
WAITING = "gunicorn: waiting for the next connection (SyncWorker.wait)"
# Files of the frames that hold (nearly) every sample of a request: left out of the cumulative tables.
WRAPPERS = ("gunicorn/", "gunicorn", "django/core/handlers/", "django/utils/deprecation.py")


def parse_frame(frame: str) -> tuple[str, str]:
    """``(function, file)`` of a py-spy frame ``function (file:line)``."""
    match = FRAME.match(frame)
    return (match["function"], match["file"]) if match else (frame, "")


def area_of(files: list[str]) -> str:
    """The area (``AREAS``) of the frame nearest the leaf whose file belongs to one, else ``OTHER_AREA``
    (so a standard-library leaf, a socket read or a regex, counts for its caller's area)."""
    for path in reversed(files):
        for area, prefixes in AREAS:
            if path.startswith(prefixes):
                return area
    return OTHER_AREA


def summarize_profile(raw: str, *, header: str = "", top: int = 25) -> str:
    """Summary of py-spy raw stacks (``--subprocesses``) as text.

    Only gunicorn's workers count (stacks with two process frames). Their samples are split into
    inside Django (``WSGIHandler.__call__`` on the stack), closing the connection (gunicorn's
    ``close_graceful``: after the response it waits for the client to close, up to 2 s), waiting
    for the next connection (``SyncWorker.wait``) and the rest of gunicorn (reading the request,
    writing the response). The samples inside Django are then shown by area, by own time (the
    leaf frame), followfeed's own functions by cumulative time, and every frame by cumulative
    time (request wrappers left out), each as a share of the samples inside Django.
    """
    own: Counter[str] = Counter()
    cumulative: Counter[str] = Counter()
    project: Counter[str] = Counter()
    areas: Counter[str] = Counter()
    phases: Counter[str] = Counter()
    master = 0
    for line in raw.splitlines():
        stack_text, _, count_text = line.rpartition(" ")
        if not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack_text.split(";")
        if sum(1 for f in frames if f.startswith("process ")) < 2:
            master += count
            continue
        parsed = [parse_frame(f) for f in frames if not f.startswith(("process ", "thread "))]
        functions = [function for function, _ in parsed]
        if "WSGIHandler.__call__" not in functions:
            if "close_graceful" in functions:
                phases[CLOSING] += count
            elif "SyncWorker.wait" in functions or (functions[-1] if functions else "") == "SyncWorker.run_for_one":
                phases[WAITING] += count
            else:
                phases[GUNICORN] += count
            continue
        phases[IN_DJANGO] += count
        names = [f"{function} ({path})" for function, path in parsed]
        own[names[-1]] += count
        for (_function, path), name in set(zip(parsed, names)):
            if path.startswith(WRAPPERS):
                continue
            cumulative[name] += count
            if path.startswith(PROJECT_APPS):
                project[name] += count
        areas[area_of([path for _, path in parsed])] += count
    total = sum(phases.values())
    lines = [header, ""] if header else []
    if not total:
        return "\n".join([*lines, "no worker samples"]) + "\n"
    lines.append(f"worker samples: {total:,} (the master's {master:,} left out)")
    for phase in (IN_DJANGO, GUNICORN, CLOSING, WAITING):
        lines.append(f"{phases[phase] / total:7.1%}  {phase}")
    django = phases[IN_DJANGO]
    if not django:
        return "\n".join(lines) + "\n"

    def table(title: str, counter: Counter[str], rows: int) -> None:
        lines.extend(["", title, f"{'% Django':>8}  frame"])
        for name, count in counter.most_common(rows):
            lines.append(f"{count / django:8.1%}  {name}")

    lines.extend(["", "samples inside Django by area (of the frame nearest the leaf that belongs to one; sums to 100%):"])
    for area, count in areas.most_common():
        lines.append(f"{count / django:8.1%}  {area}")
    table(f"top {top} by own time (the leaf frame: running there, or blocked in a C call made there):", own, top)
    table(f"followfeed's own functions by cumulative time (top {top}):", project, top)
    table(
        f"top {top + 15} by cumulative time (the frame anywhere on the stack; gunicorn and Django's handler left out):",
        cumulative,
        top + 15,
    )
    return "\n".join(lines) + "\n"


def summarize_profile_file(path: Path) -> str:
    """``summarize_profile`` of a raw py-spy file (to re-read a kept one)."""
    return summarize_profile(path.read_text())


# --- the run ----------------------------------------------------------------------


def run(
    out_dir: Path,
    *,
    seconds: float,
    quick: bool,
    profile_page: str | None = None,
    profile_label: str = "before",
    profile_only: bool = False,
    profile_seconds: float = 10.0,
    workers: int = GUNICORN_WORKERS,
    worker_class: str = GUNICORN_WORKER_CLASS,
    threads: int = 1,
    keep_logs: bool = False,
    command: str = "bench.http_load.run",
) -> dict[str, Any]:
    """Run the benchmark (module docstring) and write ``http_load.json`` and ``http_load.md`` into ``out_dir``.

    :param seconds: measured seconds per endpoint and mode (after a warm-up).
    :param quick: a 30,000-edge slice in its own database, short warm-ups (a smoke run; figures not comparable).
    :param profile_page: an endpoint key (``home``, ``profile``, ...): also profile it under load with
        py-spy into ``http_profile_<profile_label>.txt``; ``profile_only`` skips the table.
    :param workers: gunicorn workers per server; ``worker_class`` their class (``sync``, ``gthread``
        with ``threads`` threads each).
    :param keep_logs: keep the temporary directory (scripts, logs, raw profile) and print where.
    :param command: how the run was started, recorded in the results.
    :returns: the results written to ``http_load.json`` (with ``profile_summary`` when profiled);
        with ``profile_only``, ``{"profile": path, "profile_summary": text}``.
    :raises SystemExit: a service, the setup or the preflight failed.
    """
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed: apt-get install -y wrk")
    started = time.perf_counter()
    load_start = loadavg()
    scale = QUICK if quick else Scale()
    warmup = scale.warmup_seconds
    out_dir.mkdir(parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix="followfeed-http-"))
    results: dict[str, Any] = {}
    try:
        # Everything started is stopped in reverse order, however the run ends.
        with ExitStack() as stack:
            print(
                f"http load: RabbitMQ vhost {VHOST}, private redis-server, database {scale.database_url.rsplit('/', 1)[1]}",
                flush=True,
            )
            ensure_vhost()
            delete_queues(QUEUE, DATABASE_ONLY_QUEUE)
            stack.callback(delete_queues, QUEUE, DATABASE_ONLY_QUEUE)
            database = scale.database_url.rsplit("/", 1)[1]
            SNAPSHOT_DIR.mkdir(parents=True, exist_ok=True)
            # It loads the snapshot the last setup saved, if any; the setup decides whether it is usable.
            redis_server = PrivateRedis(
                config={
                    "zset-max-listpack-entries": "3000",
                    "set-max-intset-entries": "3000",
                    "dir": str(SNAPSHOT_DIR),
                    "dbfilename": f"{database}.rdb",
                }
            )
            stack.callback(redis_server.stop)
            env = base_environment(redis_server.url, scale.database_url, directory / "static")
            print("setup (bench/http_setup.py): graph, notes, feeds, sessions ...", flush=True)
            setup_started = time.perf_counter()
            plan = run_setup(env, scale, directory / "plan.json", directory / "setup.log", SNAPSHOT_DIR / f"{database}.json")
            setup_seconds = round(time.perf_counter() - setup_started, 1)
            print(
                f"  {plan['graph']['edges']:,} follows, {plan['notes']:,} notes, {plan['inboxes']:,} inboxes ({setup_seconds} s)",
                flush=True,
            )
            worker = launch_worker(env, directory / "worker.log")
            database_only_env = {
                **env,
                "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",  # nobody listens there
                "REDIS_CIRCUIT_OPEN_SECONDS": "3600",
                "CELERY_TASK_DEFAULT_QUEUE": DATABASE_ONLY_QUEUE,
            }
            servers = {
                "followfeed": launch_server(
                    "followfeed", env, directory, workers=workers, worker_class=worker_class, threads=threads
                ),
                "database_only": launch_server(
                    "database_only", database_only_env, directory, workers=workers, worker_class=worker_class, threads=threads
                ),
            }
            stack.callback(stop_all, [worker, *(server.process for server in servers.values())])
            wait_worker(worker, directory / "worker.log")
            for server in servers.values():
                wait_server(server)
            print(f"  servers and worker ready [{time.perf_counter() - started:.0f} s]", flush=True)
            ports = {mode: server.port for mode, server in servers.items()}
            followers = int(plan["followed"]["followers"])
            page = int(plan["follow_page_size"])
            depth = max(page, min(DEEP_DEPTH, (followers - 1) // page * page))
            cursor = followers_cursor(ports["followfeed"], plan, depth)
            rows = endpoints(plan, cursor, depth)
            by_key = {row.key: row for row in rows}
            problems = []
            for row in rows:
                problems += preflight(row, servers)
            if problems:
                raise SystemExit(
                    "preflight failed:\n" + "\n".join(problems) + "\n" + servers["followfeed"].error_log.read_text()[-3000:]
                )
            print(
                f"preflight: every request answered as expected on both servers (ports {ports}) [{time.perf_counter() - started:.0f} s]",
                flush=True,
            )
            if not profile_only:
                results = measure_all(
                    rows,
                    servers,
                    directory,
                    seconds=seconds,
                    warmup=warmup,
                    redis=redis_server.client,
                    drain_s=5 if quick else 10,
                )
                # The breaker's warning, once per worker process that found Redis unreachable.
                results["database_only_breaker_warnings"] = (
                    servers["database_only"].error_log.read_text().count("Redis unavailable")
                )
            if profile_page:
                print(f"profile of {profile_page} under load ({profile_seconds:.0f} s, py-spy) ...", flush=True)
                summary, _raw = profile(
                    by_key[profile_page], servers["followfeed"], directory, seconds=profile_seconds, warmup=warmup
                )
                title = (
                    f"py-spy profile of the followfeed server's {workers} {worker_class} gunicorn workers, page '{by_key[profile_page].title}' "
                    f"({by_key[profile_page].describe}) under {CONNECTIONS} connections, {datetime.now(UTC):%Y-%m-%d %H:%M UTC}, "
                    f"label '{profile_label}', {os.cpu_count()} cores, load average {loadavg()[0]}\n"
                )
                path = out_dir / f"http_profile_{profile_label}.txt"
                path.write_text(title + summary)
                print(f"wrote {path}", flush=True)
                results["profile"] = str(path)
                results["profile_summary"] = summary
            if profile_only:
                return results
            results.update(
                {
                    "generated_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
                    "command": command,
                    "code": code_state(),
                    "machine": {
                        "cpus": os.cpu_count(),
                        "loadavg_start": load_start,
                        "loadavg_end": loadavg(),
                        "platform": platform.platform(),
                        "python": platform.python_version(),
                    },
                    "server": {
                        "gunicorn": _version([str(Path(sys.executable).parent / "gunicorn"), "--version"]),
                        "workers": workers,
                        "worker_class": worker_class,
                        "threads": threads,
                        "settings": SETTINGS_MODULE,
                        "access_log": f"on, to a file (format {ACCESS_LOG_FORMAT!r})",
                        "celery_worker": f"1 solo-pool worker on queue {QUEUE} (vhost {VHOST}); the database-only server's tasks go to "
                        f"{DATABASE_ONLY_QUEUE}, which nobody consumes (deleted at the end); no beat",
                        "redis": "private redis-server, zset-max-listpack-entries 3000, set-max-intset-entries 3000; its data: "
                        + plan["redis"],
                        "database_only": "REDIS_URL is a closed port and REDIS_CIRCUIT_OPEN_SECONDS 3600: every read takes its database fallback",
                    },
                    "load": {
                        "tool": _version(["wrk", "--version"]).splitlines()[0].split(" Copyright")[0],
                        "connections": CONNECTIONS,
                        "threads": THREADS,
                        "seconds": seconds,
                        "warmup_seconds": warmup,
                        "timeout": WRK_TIMEOUT,
                    },
                    "data": {
                        "database": plan["database"],
                        "graph": plan["graph"],
                        "notes": plan["notes"],
                        "maintained_inboxes": plan["inboxes"],
                        "reader": _public(plan["reader"]),
                        "followed": _public(plan["followed"]),
                        "profiles": len(plan["profiles"]),
                        "writers": {g: sum(len(t) for t in lists) for g, lists in plan["writer_groups"].items()},
                        "setup_steps_s": plan["steps_s"],
                        "setup_s": setup_seconds,
                        "undone_from_last_run": plan["undone"],
                    },
                    "quick": quick,
                }
            )
            for row in rows:
                for run_row in results["endpoints"]:
                    if run_row["key"] == row.key:
                        run_row["title"], run_row["requests"] = row.title, row.describe
            results["floor"]["requests"] = by_key["floor"].describe
    finally:
        if keep_logs:
            print(f"logs, scripts and plan kept in {directory}", flush=True)
        else:
            shutil.rmtree(directory, ignore_errors=True)
    results["duration_s"] = round(time.perf_counter() - started, 1)
    (out_dir / "http_load.json").write_text(
        json.dumps({k: v for k, v in results.items() if k != "profile_summary"}, indent=2) + "\n"
    )
    (out_dir / "http_load.md").write_text(markdown(results))
    return results


def measure_all(
    rows: list[Endpoint],
    servers: dict[str, Server],
    directory: Path,
    *,
    seconds: float,
    warmup: float,
    redis: Any,
    drain_s: float,
) -> dict[str, Any]:
    """The floor, then each endpoint on followfeed and on database-only followed by the floor
    again; each endpoint's ratio uses the mean of the floor runs just before and just after it
    (the machine is shared, so the floor is measured beside every endpoint, not once).

    :param seconds: measured seconds per endpoint and mode; a floor run takes ``FLOOR_SECONDS``
        (at most ``seconds``).
    :param drain_s: how long the worker gets to drain its queue after the followfeed write mix.
    :returns: ``{"floor": {...}, "endpoints": [...], "goal": {...}, "errors": [...]}``.
    """
    floor_row = rows[0]
    floor_seconds = min(seconds, FLOOR_SECONDS)
    print(
        f"load: wrk, {CONNECTIONS} connections, {THREADS} threads, {seconds:.0f} s per endpoint and mode after {warmup} s of warm-up, "
        f"the floor ({floor_seconds:.0f} s) beside each endpoint",
        flush=True,
    )
    floor_server = servers["followfeed"]
    floors = [measure(floor_row, "followfeed", floor_server, directory, seconds=floor_seconds, warmup=warmup, redis=redis)]
    measured: list[dict[str, Any]] = []
    for row in rows[1:]:
        entry: dict[str, Any] = {"key": row.key}
        for mode, server in servers.items():
            entry[mode] = measure(row, mode, server, directory, seconds=seconds, warmup=warmup, redis=redis)
            if row.key == "write_mix" and mode == "followfeed":
                # The worker's backlog is part of the write path's cost; it must not run into the next runs.
                entry[mode].extra["background"] = wait_for_worker(drain_s)
        floors.append(measure(floor_row, "followfeed", floor_server, directory, seconds=floor_seconds, warmup=0, redis=redis))
        entry["floor_runs_rps"] = [floors[-2].requests_per_s, floors[-1].requests_per_s]
        measured.append(entry)
    errors = []
    goal_shares = {row.key: row.goal_share for row in rows}
    for entry in measured:
        floor_rps = statistics.mean(entry["floor_runs_rps"])
        followfeed, database_only = entry["followfeed"], entry["database_only"]
        entry["floor_rps"] = round(floor_rps, 1)
        entry["ratio_to_floor"] = round(followfeed.requests_per_s / floor_rps, 3) if floor_rps else 0.0
        entry["database_only_ratio_to_floor"] = round(database_only.requests_per_s / floor_rps, 3) if floor_rps else 0.0
        entry["goal_share"] = row_goal = goal_shares[entry["key"]]
        entry["goal_met"] = None if row_goal is None else entry["ratio_to_floor"] >= row_goal and followfeed.errors == 0
        if entry["key"] in SERVER_P50_GOAL_PAGES:
            entry["server_p50_goal_ms"] = SERVER_P50_GOAL_MS
            p50 = followfeed.server_p50_ms
            entry["goal_met"] = entry["goal_met"] and p50 is not None and p50 <= SERVER_P50_GOAL_MS
        for mode in ("followfeed", "database_only"):
            run = entry[mode]
            if run.errors or run.status_5xx or run.status_3xx or run.tracebacks:
                errors.append(
                    {
                        "endpoint": entry["key"],
                        "mode": mode,
                        "errors": run.errors,
                        "socket_errors": run.socket_errors,
                        "status_3xx": run.status_3xx,
                        "status_4xx": run.status_4xx,
                        "status_5xx": run.status_5xx,
                        "server_statuses": run.server_statuses,
                        "tracebacks": run.tracebacks,
                    }
                )
            entry[mode] = run.__dict__
    for run in floors:
        if run.errors or run.tracebacks:
            errors.append(
                {
                    "endpoint": "floor",
                    "mode": "followfeed",
                    "errors": run.errors,
                    "socket_errors": run.socket_errors,
                    "tracebacks": run.tracebacks,
                }
            )
    met = [entry["goal_met"] for entry in measured if entry["goal_met"] is not None]
    data_floor = next((entry for entry in measured if entry["key"] == "data_floor"), None)
    if data_floor is not None and data_floor["ratio_to_floor"]:
        # Each row beside the least a signed-in page's round trips allow (shares of the floor: the
        # floor moves between rows).
        for entry in measured:
            entry["ratio_to_data_floor"] = round(entry["ratio_to_floor"] / data_floor["ratio_to_floor"], 3)
    rates = [run.requests_per_s for run in floors]
    return {
        "floor": {
            "requests_per_s": round(statistics.mean(rates), 1),
            "min": min(rates),
            "max": max(rates),
            "seconds": floor_seconds,
            "runs": [run.__dict__ for run in floors],
        },
        "endpoints": measured,
        "goal": {
            "target": (
                f">= {PAGE_GOAL_SHARE:.0%} (pages) or {JSON_GOAL_SHARE:.0%} (JSON) of the floor's requests/s and 0 errors, "
                f"per endpoint (followfeed mode); server p50 <= {SERVER_P50_GOAL_MS:g} ms for {', '.join(SERVER_P50_GOAL_PAGES)}"
            ),
            "met": sum(met),
            "of": len(met),
        },
        "errors": errors,
    }


def code_state() -> dict[str, Any]:
    """The commit the servers ran and the tracked files that differed from it (the working tree is what gunicorn loads)."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    status = subprocess.run(
        ["git", "status", "--short", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout
    return {"commit": commit, "uncommitted": [line[3:] for line in status.splitlines() if line.strip()]}


def _public(account: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in account.items() if k not in ("session", "targets")}


def _version(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    return (done.stdout or done.stderr).strip()


# --- report ---------------------------------------------------------------------


def _cell(run: dict[str, Any]) -> str:
    errors = f"**{run['errors']}**" if run["errors"] else "0"
    return f"{run['requests_per_s']:,.0f} · {run['p50_ms']:.1f} ms · {run['p99_ms']:.1f} ms · {errors}"


def markdown(results: dict[str, Any]) -> str:
    """The table of ``results`` (``run``'s return value) as markdown."""
    machine, server, load, data = results["machine"], results["server"], results["load"], results["data"]
    floor = results["floor"]
    graph = data["graph"]
    lines = [
        "# HTTP under load",
        "",
        f"`{results['command']}`, run {results['generated_at']} on {machine['cpus']} cores (load average {machine['loadavg_start'][0]} at the start, "
        f"{machine['loadavg_end'][0]} at the end; wrk and gunicorn share the cores), {results['duration_s'] / 60:.1f} min"
        + (" — **quick run on a slice: figures not comparable**" if results.get("quick") else "")
        + ".",
        "",
        f"Server: {server['gunicorn']}, {server['workers']} {server['worker_class']} workers"
        + (f" of {server['threads']} threads" if server.get("threads", 1) > 1 else "")
        + f" per server, settings `{server['settings']}` "
        f"(production's, plus the floor's URL), access log {server['access_log']}; {server['celery_worker']}. "
        f"Load: {load['tool']}, {load['connections']} connections, {load['threads']} threads, {load['seconds']:.0f} s per endpoint "
        f"and mode after {load['warmup_seconds']} s of warm-up, timeout {load['timeout']}.",
        "",
        f"Code: commit {results['code']['commit']}"
        + (f" with uncommitted changes in {', '.join(results['code']['uncommitted'])}" if results["code"]["uncommitted"] else "")
        + " (gunicorn loads the working tree).",
        "",
        f"Data: `{data['database']}`, {graph['dataset']} ({graph['edges']:,} follows, {graph['users']:,} accounts"
        + (f", first {graph['limit']:,} rows" if graph["limit"] else "")
        + f"), {data['notes']:,} notes (Higgs replay), "
        f"{data['maintained_inboxes']:,} maintained inboxes (the reader, the writers and their followers); Redis: {server['redis']}. Reader {data['reader']['username']} "
        f"(follows {data['reader']['following']:,}); followed account {data['followed']['username']} ({data['followed']['followers']:,} followers).",
        "",
        (
            "Each cell: requests/s · p50 · p99 · errors (wrk: answers >= 400 and socket errors). Database-only: the same gunicorn with "
            f"Redis unreachable (every read takes its database fallback; the breaker's warning is in its log "
            f"{results.get('database_only_breaker_warnings', '?')} times, once per worker process). Floor: `GET /bench/floor`, a two-byte HttpResponse through the "
            f"same middleware, measured for {floor['seconds']:.0f} s before the first endpoint and after each one: "
            f"{floor['min']:,.0f} to {floor['max']:,.0f} requests/s over the run (mean {floor['requests_per_s']:,.0f}); each row's floor "
            "is the mean of the runs just before and after it."
        ),
        "",
        "| endpoint | followfeed | database-only | floor req/s | % of floor | goal met (share of floor, 0 errors, server p50) |",
        "|---|---|---|---|---|---|",
    ]
    for entry in results["endpoints"]:
        if entry["goal_met"] is None:
            met = "(for comparison, not a goal)"
        else:
            met = "yes" if entry["goal_met"] else "**no**"
            met += f" (>= {entry['goal_share']:.0%}" + (
                f", p50 <= {entry['server_p50_goal_ms']:g} ms)" if "server_p50_goal_ms" in entry else ")"
            )
        lines.append(
            f"| {entry['title']} | {_cell(entry['followfeed'])} | {_cell(entry['database_only'])} | {entry['floor_rps']:,.0f} | "
            f"{entry['ratio_to_floor']:.0%} (database-only {entry['database_only_ratio_to_floor']:.0%}) | {met} |"
        )
    lines += [
        "",
        f"Goal met by {results['goal']['met']} of {results['goal']['of']} endpoints.",
        "",
    ]
    if any("ratio_to_data_floor" in entry for entry in results["endpoints"]):
        lines += [
            "Share of the data floor (each row's share of the floor over the data floor's): "
            + ", ".join(
                f"{entry['title']} {entry['ratio_to_data_floor']:.0%}"
                for entry in results["endpoints"]
                if entry["key"] != "data_floor" and "ratio_to_data_floor" in entry
            )
            + ".",
            "",
        ]
    lines += [
        "What each endpoint sends:",
        "",
    ]
    lines += [f"- {entry['title']}: {entry['requests']}" for entry in results["endpoints"]]
    lines += [
        "",
        "Server side (gunicorn's access log of the measured seconds): time per request p50 / p99, Redis commands per request:",
        "",
    ]
    for entry in results["endpoints"]:
        ff, db = entry["followfeed"], entry["database_only"]
        extra = ""
        background = ff.get("extra", {}).get("background")
        if background:
            extra = f"; the worker's queue held {background['queued_at_end']} tasks at the end, " + (
                f"{background['purged']} still queued after {background['waited_s']} s and purged"
                if background["purged"]
                else f"drained in {background['waited_s']} s"
            )
        lines.append(
            f"- {entry['title']}: followfeed {ff['server_p50_ms']} / {ff['server_p99_ms']} ms, {ff['redis_commands_per_request']} Redis "
            f"commands; database-only {db['server_p50_ms']} / {db['server_p99_ms']} ms{extra}"
        )
    if results["errors"]:
        lines += ["", "Errors and unexpected answers:", ""]
        for error in results["errors"]:
            lines.append(
                f"- {error['endpoint']} ({error['mode']}): {json.dumps({k: v for k, v in error.items() if k != 'tracebacks'})}"
            )
            for trace in error["tracebacks"][:2]:
                lines += ["", "```", trace, "```"]
    else:
        lines += ["", "No errors, no 3xx, no tracebacks in the servers' logs."]
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"), help="output directory (default bench/results)")
    parser.add_argument(
        "--seconds", type=float, default=None, help="measured seconds per endpoint and mode, whole (default 10; 1 with --quick)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="a 30,000-edge slice, short runs: a smoke run, figures not comparable"
    )
    parser.add_argument(
        "--profile", default=None, metavar="PAGE", help="also profile this endpoint under load with py-spy (e.g. home)"
    )
    parser.add_argument("--profile-label", default="before", help="the profile goes to http_profile_<label>.txt (default before)")
    parser.add_argument("--profile-only", action="store_true", help="with --profile: skip the table")
    parser.add_argument("--profile-seconds", type=float, default=10.0, help="seconds recorded by py-spy (default 10)")
    parser.add_argument(
        "--workers", type=int, default=GUNICORN_WORKERS, help=f"gunicorn workers per server (default {GUNICORN_WORKERS})"
    )
    parser.add_argument("--worker-class", default=GUNICORN_WORKER_CLASS, help="gunicorn worker class (default sync)")
    parser.add_argument("--threads", type=int, default=1, help="threads per gunicorn worker (gthread; default 1)")
    parser.add_argument("--keep-logs", action="store_true", help="keep the temporary directory with logs and wrk scripts")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.profile_only and not args.profile:
        raise SystemExit("--profile-only needs --profile PAGE")
    seconds = args.seconds if args.seconds is not None else (QUICK_SECONDS if args.quick else 10.0)
    results = run(
        Path(args.out),
        seconds=seconds,
        quick=args.quick,
        profile_page=args.profile,
        profile_label=args.profile_label,
        profile_only=args.profile_only,
        profile_seconds=args.profile_seconds,
        workers=args.workers,
        worker_class=args.worker_class,
        threads=args.threads,
        keep_logs=args.keep_logs,
        command="bench/http_load.py " + " ".join(argv if argv is not None else sys.argv[1:]),
    )
    if not args.profile_only:
        print()
        print((Path(args.out) / "http_load.md").read_text())
    else:
        print(results.get("profile_summary", ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

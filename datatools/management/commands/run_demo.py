"""manage.py run_demo: the site on a real graph with the embedded default (no services)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, cast

from django.conf import settings
from django.contrib.staticfiles.management.commands.runserver import Command as RunserverCommand
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser
from django.utils.html import escape

from core import embedded
from core.exit_codes import EXIT_CODES_HELP, unavailable
from core.outbox import BackgroundDrain
from core.redis import REDIS_ERRORS, get_redis, redis_available, redis_failed
from datatools import redis_keys
from datatools.selectors import WarmupProgress, mirror_state, warmup_progress, warmup_reason
from datatools.services import STAGE_FAILED, STAGE_WAITING, mirror_forget
from social.models import Follow

logger = logging.getLogger(__name__)

DEMO_PASSWORD = "followfeed"  # noqa: S105 - the local demo's published password
# How long (seconds) a stopped warm-up may take to unwind before it is killed.
WARMER_STOP_SECONDS = 10.0
# How long (seconds) one server thread trusts its last look at the warm-up's progress.
BANNER_TTL_SECONDS = 1.0


class Command(BaseCommand):
    help = (
        "Serve the demo: migrate, import FOLLOWFEED_DATASET (default soc-Slashdot0902) on first run with "
        f"password '{DEMO_PASSWORD}' for every imported user, then run "
        "the development server at once. The notes (the Higgs activity replayed, on the first run) and the "
        "Redis mirror, when it is not current for the database (sentinel, watermark, pending outbox entries; "
        "the embedded server keeps it across restarts), are warmed up in a background process (manage.py "
        "warm_mirror --replay-notes) while pages read the database and say so. Pending outbox entries are "
        "applied every SOCIAL_OUTBOX_DRAIN_SECONDS in the server's process, as beat would. "
        "--dry-run prints the plan. " + EXIT_CODES_HELP
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", default="8000", help="port to serve on (default 8000)")
        parser.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
        parser.add_argument("--dataset", default=None, help="dataset name or path (default FOLLOWFEED_DATASET)")
        parser.add_argument(
            "--no-serve", action="store_true", help="prepare the data and the mirror (in the foreground), then exit"
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="print what would be migrated, imported and warmed up, change nothing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["dry_run"]:
            self._plan(options)
            return
        warmer: subprocess.Popen[bytes] | None = None
        streamer: subprocess.Popen[bytes] | None = None
        drainer: BackgroundDrain | None = None
        # A SIGTERM (kill, a service manager) stops the site as Ctrl-C does: the clean-up below runs.
        signal.signal(signal.SIGTERM, _terminate)
        try:
            self._prepare(options)
            if options["no_serve"]:
                self._warm_up_here()
                return
            warmer = self._start_warm_up(options)
            streamer = self._start_streaming(options)
            drainer = start_drain(warmer)
            self.stdout.write(f"Sign in as any imported user, e.g. u2494, password '{DEMO_PASSWORD}'.")
            call_command(_DemoServer(), f"{options['host']}:{options['port']}", use_reloader=False, skip_checks=True)
        except REDIS_ERRORS as exc:
            raise unavailable("Redis", exc) from exc
        finally:
            # The clean-up runs to its end: a second SIGTERM (a signal to the whole process group,
            # which `timeout` passes on to the group again) must not cut it short and leave the
            # embedded server or the warm-up running.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            if drainer is not None:
                drainer.stop()
            if warmer is not None:
                _stop(warmer)
            if streamer is not None:
                _stop(streamer)
            self._stop_embedded_server()

    def _prepare(self, options: dict[str, Any]) -> None:
        """Migrate, then import the graph when there is none (one transaction; the mirror is forgotten first)."""
        call_command("migrate", interactive=False, verbosity=0)
        if not Follow.objects.exists():
            started = time.perf_counter()
            self.stdout.write("First run: importing the graph...")
            mirror_forget()
            positional = [options["dataset"]] if options["dataset"] else []
            call_command("import_graph", *positional, password=DEMO_PASSWORD, no_rebuild=True, stdout=self.stdout)
            self.stdout.write(f"Graph imported in {time.perf_counter() - started:.1f} s.")

    def _start_warm_up(self, options: dict[str, Any]) -> subprocess.Popen[bytes] | None:
        """Start ``manage.py warm_mirror --replay-notes`` beside the server when the notes are not
        replayed yet or the mirror is not current.

        :returns: the warm-up process, or None when nothing is to do.
        """
        client = get_redis()
        state = mirror_state(client)
        reason = warmup_reason(state, replay_notes=True)
        if not reason:
            client.delete(redis_keys.warmup_key())  # a leftover of an interrupted run
            self.stdout.write("The Redis mirror is current (kept from the last run): no warm-up.")
            return None
        if state.needs_rebuild:
            # Before the first page: no page may read a mirror built from other data.
            mirror_forget()
        self._render_first_page(options)
        self.stdout.write(f"Warming up in the background ({reason}); pages read the database meanwhile and say so.")
        command = [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), "warm_mirror", "--replay-notes"]
        return subprocess.Popen(command, cwd=settings.BASE_DIR, env=os.environ.copy())  # noqa: S603 - this manage.py, fixed argv

    def _start_streaming(self, options: dict[str, Any]) -> subprocess.Popen[bytes]:
        """Start the streaming process (uvicorn serving ``config.asgi``) on the next port, and point
        the site's pages and the instance's ``urls.streaming_api`` at it.

        :returns: the streaming process.
        """
        port = int(options["port"]) + 1
        settings.STREAMING_API_URL = f"ws://{options['host']}:{port}"
        # The home page's EventSource reads it: the page's policy lets it connect there.
        directives = cast(dict[str, list[str]], settings.CONTENT_SECURITY_POLICY["DIRECTIVES"])
        directives["connect-src"] = [*directives["connect-src"], f"http://{options['host']}:{port}"]
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "config.settings.local")}
        command = streaming_command(host=options["host"], port=port)
        self.stdout.write(f"Live updates from the streaming process on port {port}.")
        return subprocess.Popen(command, cwd=settings.BASE_DIR, env=env)  # noqa: S603 - uvicorn, fixed argv

    def _render_first_page(self, options: dict[str, Any]) -> None:
        """Render ``/`` once before the warm-up starts, so the first visitor finds views, templates and the cached ranking ready."""
        from django.test import Client

        try:
            Client(HTTP_HOST=options["host"]).get("/")
        except Exception:  # a visitor's request would fail the same way, and say why
            logger.exception("rendering the first page failed")

    def _warm_up_here(self) -> None:
        """--no-serve: the warm-up in this process, with its progress lines."""
        call_command("warm_mirror", "--replay-notes", stdout=self.stdout)

    def _stop_embedded_server(self) -> None:
        """Stop the embedded Valkey server unless another process uses it (also one this process
        did not start: a run killed before it could stop its own leaves it running)."""
        if not settings.REDIS_EMBEDDED:
            return
        server = embedded.EmbeddedRedis(settings.FOLLOWFEED_VAR_DIR)
        # This process's own pooled connections are not "other" users of the server.
        get_redis().connection_pool.disconnect()
        others = server.other_clients()
        if others:
            self.stdout.write(
                f"The embedded Valkey server stays up: {others} other connections use it (manage.py embedded_redis stop stops it)."
            )
            return
        server.stop()
        self.stdout.write("The embedded Valkey server is stopped.")

    def _plan(self, options: dict[str, Any]) -> None:
        """--dry-run: the pending migrations, whether the graph would be imported, whether the mirror would be warmed up."""
        from django.db import connection
        from django.db.migrations.executor import MigrationExecutor

        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
        has_graph = Follow._meta.db_table in connection.introspection.table_names() and Follow.objects.exists()
        dataset = options["dataset"] or settings.FOLLOWFEED_DATASET
        self.stdout.write(f"would apply {len(pending)} migrations")
        self.stdout.write("the graph is imported already" if has_graph else f"would import {dataset}")
        if has_graph and not pending:
            state = mirror_state(get_redis())
            self.stdout.write(
                "the Redis mirror is current" if state.current else f"would warm up the Redis mirror: {state.reason()}"
            )
        else:
            self.stdout.write("would warm up the Redis mirror after the import")
        self.stdout.write("would serve" if not options["no_serve"] else "would not serve (--no-serve)")


def streaming_command(*, host: str, port: int) -> list[str]:
    """The streaming process's command line: uvicorn serving ``config.asgi`` on ``host``:``port``
    (one process, one event loop: it holds thousands of idle streams)."""
    return [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", host, "--port", str(port), "--no-access-log"]


def start_drain(warmer: subprocess.Popen[bytes] | None) -> BackgroundDrain:
    """Beat's outbox drain in a thread of the server's process (``core.outbox.BackgroundDrain``), paused
    while ``warmer`` runs (it drains at its end; the two would compete for SQLite); a lost mirror
    is left to the next start's warm-up.
    """
    return BackgroundDrain(paused=lambda: warmer is not None and warmer.poll() is None, start_rebuild=False).start()


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop the warm-up process: SIGTERM (it releases its lock), then SIGKILL after ``WARMER_STOP_SECONDS``."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(WARMER_STOP_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# --- the warm-up banner -------------------------------------------------------


def banner_html(progress: WarmupProgress) -> bytes:
    """The note the pages carry while a warm-up runs (or after it failed), as HTML."""
    if progress.stage == STAGE_FAILED:
        text = f"The Redis mirror's warm-up failed ({progress.error}). Pages read the database; run make run again to retry."
    elif progress.stage == STAGE_WAITING:
        text = f"Warming up: {progress.stage}. Pages read the database meanwhile."
    else:
        text = f"Warming up: {progress.stage}, {progress.percent}% done. Pages read the database meanwhile, a little more slowly."
    return f'<p class="catching-up" role="status" data-warmup="{escape(progress.stage)}">{escape(text)}</p>'.encode()


def with_banner(html: bytes, banner: bytes) -> bytes:
    """``html`` with ``banner`` at the top of the page's main element (after ``<body>`` without one; unchanged without either)."""
    for opening in (b'<main id="content"', b"<body"):
        at = html.find(opening)
        if at >= 0:
            end = html.find(b">", at)
            if end >= 0:
                return html[: end + 1] + banner + html[end + 1 :]
    return html


StartResponse = Callable[..., Callable[[bytes], object]]


class WarmupBanner:
    """WSGI middleware of the demo server: while a warm-up runs, every HTML page says so."""

    def __init__(self, application: Callable[[dict[str, Any], StartResponse], Iterable[bytes]]) -> None:
        self.application = application
        self._seen: tuple[float, WarmupProgress | None] = (0.0, None)

    def progress(self) -> WarmupProgress | None:
        """The warm-up's progress, looked up at most once per ``BANNER_TTL_SECONDS``; None while
        Redis is down (the breaker is open) or no warm-up runs."""
        now = time.monotonic()
        if self._seen[0] > now:
            return self._seen[1]
        found: WarmupProgress | None = None
        if redis_available():
            try:
                found = warmup_progress(get_redis())
            except REDIS_ERRORS as exc:
                redis_failed(exc)
        self._seen = (now + BANNER_TTL_SECONDS, found)
        return found

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        progress = self.progress()
        if progress is None:
            return self.application(environ, start_response)
        captured: list[Any] = []

        def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], object]:
            captured[:] = [status, headers, exc_info]
            return lambda data: None

        body = self.application(environ, capture)
        status, headers, exc_info = captured
        kind = next((value for name, value in headers if name.lower() == "content-type"), "")
        if not (status.startswith("200") and kind.startswith("text/html")):
            start_response(status, headers, exc_info)
            return body
        try:
            page = with_banner(b"".join(body), banner_html(progress))
        finally:
            close = getattr(body, "close", None)
            if close is not None:
                close()
        headers = [(name, value) for name, value in headers if name.lower() != "content-length"]
        start_response(status, [*headers, ("Content-Length", str(len(page)))], exc_info)
        return [page]


class _DemoServer(RunserverCommand):
    """The development server (with static files), its pages carrying the warm-up banner."""

    def get_handler(self, *args: Any, **options: Any) -> Any:
        return WarmupBanner(super().get_handler(*args, **options))


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM: leave ``handle`` as an interrupt does, through its clean-up."""
    raise SystemExit(128 + signum)

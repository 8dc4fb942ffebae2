"""The streaming process for tests: uvicorn serving ``config.asgi`` with the production settings
on a free port, on the test database, this test's Redis, key prefix and Celery queue; and a small reader of
server-sent events for looks Mastodon.py's listener does not give (ids, heartbeats)."""

from __future__ import annotations

import os
import queue
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import requests
from django.conf import settings
from django.db import connection

from config.celery_app import app as celery_app
from datatools.management.commands.run_demo import streaming_command
from tests.support.faults import BASE_DIR, free_port, log_dir, stop_process, wait_until


class StreamingServer:
    """``python -m uvicorn config.asgi:application`` on 127.0.0.1 and a free port."""

    def __init__(self, *, redis_url: str | None = None, extra_env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.redis_url = redis_url or str(settings.REDIS_URL)
        self.extra_env = extra_env or {}
        self.process: subprocess.Popen[bytes] | None = None
        self.log = log_dir() / f"streaming-{self.port}-{os.getpid()}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start the process and wait until ``/api/v1/streaming/health`` answers."""
        db = connection.settings_dict
        env = {
            **{key: value for key, value in os.environ.items() if not key.startswith(("PYTEST_", "DJANGO_"))},
            "DJANGO_SETTINGS_MODULE": "config.settings.production",
            "DJANGO_SECRET_KEY": "streaming-tests-only",
            "DATABASE_URL": f"mysql://{db['USER']}:{db['PASSWORD']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 3306}/{db['NAME']}",
            "REDIS_URL": self.redis_url,
            "REDIS_KEY_PREFIX": str(settings.REDIS_KEY_PREFIX),
            "CELERY_BROKER_URL": str(settings.CELERY_BROKER_URL),
            "CELERY_TASK_ALWAYS_EAGER": "false",
            # The tasks it sends (a catch-up when a stream opens) go where this test's worker listens.
            "CELERY_TASK_DEFAULT_QUEUE": str(celery_app.conf.task_default_queue),
            "DJANGO_ALLOWED_HOSTS": "localhost,127.0.0.1",
            "DJANGO_SECURE_SSL_REDIRECT": "false",
            "DJANGO_SECURE_COOKIES": "false",
            "DJANGO_SECURE_HSTS_SECONDS": "0",
            "CONN_MAX_AGE": "0",
            **self.extra_env,
        }
        command = [*streaming_command(host="127.0.0.1", port=self.port), "--log-level", "warning"]
        self.log.write_bytes(b"")
        self.process = process = subprocess.Popen(
            command, cwd=BASE_DIR, env=env, stdout=self.log.open("ab"), stderr=subprocess.STDOUT
        )

        def answers() -> bool:
            if process.poll() is not None:
                return True
            try:
                return requests.get(f"{self.url}/api/v1/streaming/health", timeout=1).text == "OK"
            except requests.RequestException:
                return False

        wait_until(answers, timeout=60, what="the streaming process")
        assert process.poll() is None, self.log.read_text()[-3000:]

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)
            self.process = None


@dataclass
class Frame:
    """One server-sent event: ``event``, ``data`` and ``id`` (None when absent), or a ``comment``;
    ``received_at``: ``time.perf_counter()`` when its last line arrived."""

    event: str = ""
    data: str = ""
    id: str | None = None
    comment: str | None = None
    received_at: float = 0.0


@dataclass
class EventReader:
    """Reads a stream on a thread of its own into ``frames`` (a queue)."""

    response: requests.Response
    frames: queue.Queue[Frame] = field(default_factory=queue.Queue)
    # Set when the server ended the stream (or the connection broke).
    ended: threading.Event = field(default_factory=threading.Event)

    def start(self) -> EventReader:
        threading.Thread(target=self._read, daemon=True).start()
        return self

    def _read(self) -> None:
        current = Frame()
        try:
            for raw in self.response.iter_lines():
                line = raw.decode() if isinstance(raw, bytes) else str(raw or "")
                if line.startswith(":"):
                    self.frames.put(Frame(comment=line[1:], received_at=time.perf_counter()))
                elif line == "":
                    if current.event:
                        current.received_at = time.perf_counter()
                        self.frames.put(current)
                    current = Frame()
                else:
                    key, _, value = line.partition(": ")
                    setattr(current, key if key in ("event", "data", "id") else "comment", value)
        except (requests.RequestException, AttributeError, ValueError):
            pass
        self.ended.set()

    def next_event(self, kind: str, *, timeout: float) -> Frame:
        """The next frame of event ``kind`` (others are skipped).

        :raises AssertionError: none within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"no {kind} event within {timeout} s"
            try:
                frame = self.frames.get(timeout=left)
            except queue.Empty:
                continue
            if frame.event == kind:
                return frame

    def drain(self) -> list[Frame]:
        """Every frame received so far."""
        found = []
        while True:
            try:
                found.append(self.frames.get_nowait())
            except queue.Empty:
                return found

    def close(self) -> None:
        self.response.close()


@contextmanager
def open_stream(base: str, token: str, *, path: str = "/api/v1/streaming/user", **headers: Any) -> Iterator[EventReader]:
    """Open the stream at ``path`` (the user stream) with ``token`` (and ``headers``) and read it until closed."""
    response = requests.get(
        f"{base}{path}", headers={"Authorization": f"Bearer {token}", **headers}, stream=True, timeout=(5, 120)
    )
    assert response.status_code == 200, response.text
    reader = EventReader(response).start()
    try:
        yield reader
    finally:
        reader.close()

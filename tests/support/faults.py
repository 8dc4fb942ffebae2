"""Real faults for tests: a private redis-server to kill and restart, a real Celery worker to kill.

How a test points the application at the private Redis: it overrides
``settings.CACHES["default"]["LOCATION"]`` with pytest-django's ``settings``
fixture. Django's ``setting_changed`` receiver for CACHES closes and drops
the cache handlers, so the next ``get_redis()`` builds a django-redis client
for the new URL (django-redis keeps one connection pool per URL); redis-py
reconnects by itself after the server is restarted on the same port.
Processes forked afterwards inherit the override; a Celery worker is a new
process, so it gets the URL, the key prefix and the test database's name
through the environment.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
from django.conf import settings
from django.db import connection
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.support.commands import celery_worker_command, redis_server_command

BASE_DIR = Path(__file__).resolve().parents[2]
# Where the logs of the processes tests start go: the session's pytest temporary directory
# (tests/conftest.py sets it), never files of their own in /tmp.
LOG_DIR: Path | None = None
# Seconds a test waits for a Celery worker to deliver (fan-out, notifications).
DELIVERY_TIMEOUT = 60


def stop_process(process: subprocess.Popen[bytes], *, timeout: float = 20) -> None:
    """SIGTERM ``process``, then SIGKILL if it has not ended within ``timeout`` seconds; wait for it."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def log_dir() -> Path:
    return LOG_DIR or Path(tempfile.gettempdir())


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(condition: Callable[[], Any], *, timeout: float, interval: float = 0.05, what: str = "condition") -> Any:
    """Poll ``condition`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def wait_for_worker(condition: Callable[[], Any], *, queue: str, timeout: float, what: str) -> Any:
    """``wait_until(condition)`` on a live worker of ``queue``; if a quarter of ``timeout`` passes
    first, one ``outbox_drain`` is sent there, as beat would next period (the message that should
    have woken the worker may have been refused: its entries wait for the drain)."""
    try:
        return wait_until(condition, timeout=timeout / 4, what=what)
    except AssertionError:
        send_drain(queue)
        return wait_until(condition, timeout=timeout, what=what)


class RedisServer:
    """A real ``redis-server`` on a spare port that a test may kill and restart.

    Without ``data_dir`` it keeps nothing (a restart comes back empty); with
    it, ``snapshot()`` writes an RDB file there (SAVE) and a restart loads it,
    as a crash of a server that keeps snapshots does.
    """

    def __init__(self, data_dir: Path | None = None) -> None:
        self.port = free_port()
        self.data_dir = data_dir
        self.process: subprocess.Popen[bytes] | None = None
        self.started_once = False

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self, password: str | None = None) -> redis.Redis:
        """A plain client of this server (not the application's), for the test's own looks."""
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=2, password=password)

    def start(self) -> None:
        """Start (or restart: empty, or from the last snapshot) the server and wait until it answers PING.

        :raises AssertionError: the server ended (its log's end in the message), or another
            process's server held the port at every try.
        """
        persistence = ["--dir", str(self.data_dir), "--dbfilename", "dump.rdb"] if self.data_dir is not None else []
        for _ in range(5):
            log = log_dir() / f"redis-server-{self.port}-{os.getpid()}.log"
            with log.open("wb") as output:
                self.process = process = subprocess.Popen(
                    redis_server_command(self.port, *persistence), stdout=output, stderr=subprocess.STDOUT
                )
            owner: int | None = None
            try:
                owner = self._owner_of_port(process)
            finally:
                if owner != process.pid:  # not this server's port, or the wait failed
                    process.kill()
                    process.wait()
            if owner == process.pid:
                self.started_once = True
                return
            if owner is None:
                raise AssertionError(f"redis-server on {self.port} ended ({process.returncode}): {log.read_text()[-2000:]}")
            # free_port's port was taken before this server bound it (by another test process's
            # server): a first start moves to another port; a restart keeps the URL the
            # application holds and waits for the port.
            if self.started_once:
                time.sleep(1)
            else:
                self.port = free_port()
        raise AssertionError(f"redis-server found no port of its own (last {self.port})")

    def _owner_of_port(self, process: subprocess.Popen[bytes]) -> int | None:
        """Wait until ``process`` ends or the port answers PING: the process id of the server that
        answers (None: none does)."""
        # No retries: redis-py's own backoff on a refused connection would make each look last seconds.
        probe = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=2, retry=Retry(NoBackoff(), 0))
        wait_until(lambda: process.poll() is not None or _pings(probe), timeout=10, what=f"redis-server on {self.port}")
        return int(probe.info("server")["process_id"]) if _pings(probe) else None

    def kill(self) -> None:
        """SIGKILL the server: every client command now fails with a connection error."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def snapshot(self) -> None:
        """Write the data to the RDB file now (SAVE); a restart after a kill loads it."""
        assert self.data_dir is not None, "a server without data_dir keeps no snapshot"
        self.client().save()

    def pause(self) -> None:
        """SIGSTOP: connections are accepted by the kernel but nothing answers (a hung Redis)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after ``pause``."""
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        """End the server for good (test teardown)."""
        if self.process is not None:
            self.process.send_signal(signal.SIGCONT)
        self.kill()


def refuse_every_command(server: RedisServer) -> None:
    """The server answers every command of every client with NOAUTH (a password was set and clients dropped)."""
    server.client().config_set("requirepass", "rotated-secret")
    server.client(password="rotated-secret").execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")


def accept_commands_again(server: RedisServer) -> None:
    """Undo ``refuse_every_command``."""
    server.client(password="rotated-secret").config_set("requirepass", "")


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.exceptions.RedisError:
        return False


def point_at(settings_fixture: Any, server: RedisServer) -> None:
    """Make the application use ``server`` (see the module docstring)."""
    default = settings_fixture.CACHES["default"]
    # A single server, also during a --redis-cluster session.
    options = {name: value for name, value in default["OPTIONS"].items() if name not in ("CONNECTION_FACTORY", "CLUSTER_NODES")}
    settings_fixture.CACHES = {**settings_fixture.CACHES, "default": {**default, "LOCATION": server.url, "OPTIONS": options}}
    settings_fixture.REDIS_CLUSTER = False


class CeleryWorker:
    """A real ``celery worker`` process on a queue of its own, using the test database and ``redis_url``."""

    def __init__(self, *, queue: str, redis_url: str, extra_env: dict[str, str] | None = None) -> None:
        self.queue = queue
        self.redis_url = redis_url
        self.extra_env = extra_env or {}
        self.process: subprocess.Popen[bytes] | None = None
        self.log = log_dir() / f"{queue}-{id(self):x}.worker.log"  # one per worker: tests read whose log has what

    def start(self) -> None:
        """Start the worker (solo pool, prefetch 1, acks late) and wait until it is ready."""
        db = connection.settings_dict
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
            "CELERY_TASK_ALWAYS_EAGER": "false",
            "CELERY_TASK_DEFAULT_QUEUE": self.queue,
            "DATABASE_URL": f"mysql://{db['USER']}:{db['PASSWORD']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 3306}/{db['NAME']}",
            "REDIS_URL": self.redis_url,
            "REDIS_KEY_PREFIX": str(settings.REDIS_KEY_PREFIX),
            "CELERY_BROKER_URL": str(settings.CELERY_BROKER_URL),
            **self.extra_env,
        }
        self.log.write_bytes(b"")
        self.process = process = subprocess.Popen(
            celery_worker_command(self.queue, f"{self.queue}-{id(self):x}@%h"),
            cwd=BASE_DIR,
            env=env,
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
        )
        wait_until(lambda: b"ready." in self.log.read_bytes() or process.poll() is not None, timeout=60, what="worker ready")
        assert self.process.poll() is None, self.log.read_text()[-3000:]

    def kill(self) -> None:
        """SIGKILL the worker (no clean shutdown: an unacked task goes back to the queue)."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def stop(self) -> None:
        """Stop for good (test teardown)."""
        self.kill()


def send_drain(queue: str, *, timeout: float = 30.0) -> None:
    """Send one ``core.tasks.outbox_drain`` to ``queue``, as beat does every period.

    Beat sends again next period when the broker refuses a message; a test
    that needs this one drain retries the same way, on a fresh connection,
    for up to ``timeout`` seconds.

    Raises:
        kombu.exceptions.OperationalError: the broker refused for ``timeout`` seconds.
    """
    from kombu.exceptions import OperationalError

    from config.celery_app import app

    deadline = time.monotonic() + timeout
    while True:
        try:
            with app.connection_for_write() as connection:
                app.send_task("core.tasks.outbox_drain", queue=queue, connection=connection)
            return
        except OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def purge_queue(queue: str) -> None:
    """Drop the messages left in ``queue`` and delete it and the exchange Celery named after it (teardown)."""
    from config.celery_app import app

    with app.connection_for_write() as conn:
        channel = conn.default_channel
        try:
            channel.queue_purge(queue)
            channel.queue_delete(queue)
        except Exception:  # noqa: BLE001, S110 - the queue may not exist
            pass
    with app.connection_for_write() as conn:
        try:
            conn.default_channel.exchange_delete(queue)
        except Exception:  # noqa: BLE001, S110 - nor its exchange
            pass

"""A private ``redis-server`` for the benchmark: no other client's load in the figures.

The harness measures followfeed against the raw speed of Redis, so it runs
its own server (a free port on 127.0.0.1, no persistence, the tuned
encoding limits of ``bench.memory.TUNED``) and stops it at the end. On a
shared development Redis the figures measured the other clients instead:
with the test suite running and 2M keys in database 0 (the suite's per-test
cleanup SCANs them all), PING took 3 ms at p50 there against 28 µs on a
private server of the same build, on the same machine, at the same moment.
``bench/run.py --redis-url`` uses an existing server instead.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import redis

from tests.support.commands import redis_server_command


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrivateRedis:
    """A ``redis-server`` child process on a free port, without persistence; ``stop`` ends it."""

    def __init__(self, *, config: dict[str, str] | None = None) -> None:
        self.port = free_port()
        extra: list[str] = []
        for name, value in (config or {}).items():
            extra += [f"--{name}", value]
        self.process = subprocess.Popen(
            redis_server_command(self.port, *extra),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=60)
        deadline = time.monotonic() + 15
        while True:
            try:
                self.client.ping()
                return
            except redis.exceptions.ConnectionError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise SystemExit(f"redis-server on port {self.port} did not start") from None
                time.sleep(0.05)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after 10 s) and wait for it."""
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@contextlib.contextmanager
def redis_for_run(url: str | None) -> Iterator[bool]:
    """Point ``REDIS_URL`` at ``url``, or at a ``PrivateRedis`` started for the block when ``url``
    is empty (stopped when the block ends).

    :returns: (as the block's value) whether a private server was started.
    """
    if url:
        os.environ["REDIS_URL"] = url
        yield False
        return
    server = PrivateRedis()
    os.environ["REDIS_URL"] = server.url
    try:
        yield True
    finally:
        server.stop()


def unlink_matching(client: Any, pattern: str, *, batch: int = 500) -> int:
    """Unlink every key matching ``pattern`` (SCAN, then pipelines of ``batch`` UNLINKs, one key
    each so a cluster routes them); returns how many went."""
    from core.cluster import pipeline

    keys = list(client.scan_iter(match=pattern, count=5000))
    removed = 0
    for start in range(0, len(keys), batch):
        pipe = pipeline(client)
        for key in keys[start : start + batch]:
            pipe.unlink(key)
        removed += sum(int(reply) for reply in pipe.execute())
    return removed

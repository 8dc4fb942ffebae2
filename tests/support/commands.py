"""Command lines of the private servers and workers that tests and benchmarks start (no Django
needed to build them)."""

from __future__ import annotations

import sys


def redis_server_command(port: int, *extra: str) -> list[str]:
    """The argv of a private ``redis-server`` on 127.0.0.1:``port``: in the foreground, no
    snapshots, no append-only file, warnings only; ``extra`` options after these (a later one wins)."""
    return [
        "redis-server",
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--daemonize",
        "no",
        "--loglevel",
        "warning",
        *extra,
    ]


def celery_worker_command(queue: str, name: str) -> list[str]:
    """The argv of a Celery worker of this project on ``queue`` named ``name`` (``-n``): one
    process (solo pool), no gossip, mingle or heartbeat events, INFO logs (they say "ready")."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "config.celery_app",
        "worker",
        "--pool=solo",
        "-Q",
        queue,
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        "-n",
        name,
        "--loglevel=INFO",
    ]

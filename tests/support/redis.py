"""Redis helpers of the tests."""

from __future__ import annotations

from typing import Any


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


def unlink_prefix(client: Any, prefix: str) -> int:
    """Unlink every key under ``prefix`` (SCAN, never KEYS); returns how many."""
    removed = 0
    batch: list[bytes] = []
    for key in client.scan_iter(match=f"{prefix}*", count=1000):
        batch.append(key)
        if len(batch) >= 500:
            removed += client.unlink(*batch)
            batch = []
    if batch:
        removed += client.unlink(*batch)
    return removed

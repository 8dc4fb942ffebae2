"""Redis helpers of the tests."""

from __future__ import annotations

from typing import Any


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

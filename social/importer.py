"""Import a SNAP edge list ("a b" = a follows b) as users and follows.

Users are named ``u<node id>``. Follow times are deterministic when the
file has none: ``IMPORT_EPOCH`` plus one second per edge in file order, so
two imports of one file give identical data and every edge has its own
second. Rows are inserted in batches with INSERT IGNORE (MariaDB) or
``bulk_create(ignore_conflicts=True)`` (elsewhere), so an interrupted
import can simply be re-run: nothing is duplicated. Self-loops are skipped
and counted. The bulk insert fires no signals and writes no outbox rows: the
caller rebuilds the Redis mirror afterwards (``rebuild_all``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.db import connection, transaction

from .datasets import read_edges
from .models import Follow

User = get_user_model()

# Slashdot Zoo was crawled in February 2009: imported follows start there.
IMPORT_EPOCH = datetime(2009, 2, 1, tzinfo=dt_timezone.utc)
BATCH = 20_000


@dataclass
class ImportStats:
    """Counts of one import: ``users_created``, ``edges_read``, ``self_loops`` skipped,
    ``duplicates`` skipped within the file, ``edges_inserted`` (new rows)."""

    users_created: int = 0
    edges_read: int = 0
    self_loops: int = 0
    duplicates: int = 0
    edges_inserted: int = 0


def username_for(node_id: int) -> str:
    """The username of dataset node ``node_id`` (``u12831``)."""
    return f"u{node_id}"


def _ensure_users(node_ids: list[int], password_hash: str) -> tuple[dict[int, int], int]:
    existing = dict(User.objects.filter(username__startswith="u").values_list("username", "pk"))
    missing = [n for n in node_ids if username_for(n) not in existing]
    for start in range(0, len(missing), BATCH):
        User.objects.bulk_create(
            [User(username=username_for(n), password=password_hash) for n in missing[start : start + BATCH]],
            ignore_conflicts=True,
            batch_size=5000,
        )
    if missing:
        existing = dict(User.objects.filter(username__startswith="u").values_list("username", "pk"))
    return {n: existing[username_for(n)] for n in node_ids}, len(missing)


def _insert_follows(rows: list[tuple[int, int, datetime]]) -> int:
    """Insert ``(follower_id, followee_id, created_at)`` rows, skipping existing pairs."""
    if connection.vendor == "mysql":
        table = Follow._meta.db_table
        with connection.cursor() as cursor:
            # mysqlclient turns executemany of one INSERT ... VALUES into
            # multi-row statements: the fastest path short of LOAD DATA.
            cursor.executemany(
                f"INSERT IGNORE INTO {table} (follower_id, followee_id, created_at) VALUES (%s, %s, %s)",
                [(a, b, at.replace(tzinfo=None)) for a, b, at in rows],
            )
            return int(cursor.rowcount)
    created = Follow.objects.bulk_create(
        [Follow(follower_id=a, followee_id=b, created_at=at) for a, b, at in rows],
        ignore_conflicts=True,
        batch_size=5000,
    )
    return len(created)


def graph_import(
    path: Path,
    *,
    password: str | None = None,
    limit: int | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> ImportStats:
    """Import the edge list at ``path``.

    :param password: password given to every created user (None: unusable).
    :param limit: import only the first ``limit`` edges (test slices).
    :param on_progress: called with the number of edges just handled.
    :returns: ``ImportStats``.
    :raises DatasetError: on a malformed line.
    """
    stats = ImportStats()
    edges: list[tuple[int, int]] = []
    seen: set[tuple[int, int]] = set()
    for a, b in _limited(read_edges(path), limit):
        stats.edges_read += 1
        if a == b:
            stats.self_loops += 1
            continue
        if (a, b) in seen:
            stats.duplicates += 1
            continue
        seen.add((a, b))
        edges.append((a, b))
    del seen
    node_ids = sorted({n for edge in edges for n in edge})
    password_hash = make_password(password) if password else make_password(None)
    user_of, stats.users_created = _ensure_users(node_ids, password_hash)
    for start in range(0, len(edges), BATCH):
        chunk = edges[start : start + BATCH]
        rows = [
            (user_of[a], user_of[b], IMPORT_EPOCH + timedelta(seconds=start + offset))
            for offset, (a, b) in enumerate(chunk)
        ]
        with transaction.atomic():
            stats.edges_inserted += _insert_follows(rows)
        if on_progress is not None:
            on_progress(len(chunk))
    return stats


def _limited(edges: Iterable[tuple[int, int]], limit: int | None) -> Iterable[tuple[int, int]]:
    for index, edge in enumerate(edges):
        if limit is not None and index >= limit:
            return
        yield edge

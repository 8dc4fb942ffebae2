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
# Rows per INSERT statement (about 2 MB of SQL; max_allowed_packet is 16 MB by default).
BATCH = 50_000


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


def _insert_users_mysql(usernames: list[str], password_hash: str) -> None:
    """Multi-row INSERT IGNORE of new accounts; every other column takes the model's default.

    The column values are rendered once through Django (a template
    ``User``) and MySQLdb's escaping; only the username differs per row, and
    it is ``u<int>`` (no quoting needed). bulk_create spent most of its
    time rendering 13 fields per row.
    """
    template = User(username="", password=password_hash)
    fields = [f for f in User._meta.concrete_fields if not f.primary_key]
    literal = connection.connection.literal
    rendered = {
        f.column: literal(f.get_db_prep_save(f.pre_save(template, add=True), connection)).decode()
        for f in fields
        if f.column != "username"
    }
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    values = ",".join(
        "(" + ", ".join(f"'{name}'" if f.column == "username" else rendered[f.column] for f in fields) + ")"
        for name in usernames
    )
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT IGNORE INTO {User._meta.db_table} ({columns}) VALUES {values}")


def _ensure_users(node_ids: list[int], password_hash: str) -> tuple[dict[int, int], int]:
    existing = dict(User.objects.filter(username__startswith="u").values_list("username", "pk"))
    missing = [n for n in node_ids if username_for(n) not in existing]
    for start in range(0, len(missing), BATCH):
        names = [username_for(n) for n in missing[start : start + BATCH]]
        if connection.vendor == "mysql":
            _insert_users_mysql(names, password_hash)
        else:
            User.objects.bulk_create(
                [User(username=name, password=password_hash) for name in names], ignore_conflicts=True, batch_size=5000
            )
    if missing:
        existing = dict(User.objects.filter(username__startswith="u").values_list("username", "pk"))
    return {n: existing[username_for(n)] for n in node_ids}, len(missing)


def _insert_follows(rows: list[tuple[int, int, int]]) -> int:
    """Insert ``(follower_id, followee_id, offset_seconds)`` rows, skipping existing pairs.

    ``offset_seconds`` counts from IMPORT_EPOCH.

    :returns: the number of new rows.
    """
    if connection.vendor == "mysql":
        table = Follow._meta.db_table
        # Every value is an int we computed, so the statement is built
        # directly: escaping 2.6M parameters one by one (MySQLdb's
        # executemany) took half of the import. Foreign-key checks are
        # skipped for this session's bulk insert (MySQL manual, "Bulk Data
        # Loading for InnoDB Tables"): both ids come from rows just read;
        # the unique index still rejects duplicates, so re-runs stay safe.
        epoch = IMPORT_EPOCH.strftime("%Y-%m-%d %H:%M:%S")
        values = ",".join(f"({a},{b},'{epoch}' + INTERVAL {offset} SECOND)" for a, b, offset in rows)
        with connection.cursor() as cursor:
            cursor.execute("SET SESSION foreign_key_checks = 0")
            try:
                cursor.execute(f"INSERT IGNORE INTO {table} (follower_id, followee_id, created_at) VALUES {values}")
                return int(cursor.rowcount)
            finally:
                cursor.execute("SET SESSION foreign_key_checks = 1")
    created = Follow.objects.bulk_create(
        [Follow(follower_id=a, followee_id=b, created_at=IMPORT_EPOCH + timedelta(seconds=offset)) for a, b, offset in rows],
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
        rows = [(user_of[a], user_of[b], start + offset) for offset, (a, b) in enumerate(chunk)]
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

"""Import a SNAP edge list ("a b" = a follows b) as users ``u<node id>`` and follows.

Follow times are ``IMPORT_EPOCH`` plus one second per edge in file order (deterministic);
self-loops and repeats are skipped and counted; re-running duplicates nothing. No signals, no
outbox rows: the caller rebuilds the mirror (``rebuild_all``). The three write methods
(``load``, ``sqlite``, ``insert``): docs/operations.md#management-commands.
"""

from __future__ import annotations

import gzip
import os
import re
import sqlite3
import tempfile
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from django.contrib.auth.hashers import make_password
from django.db import connection, transaction

from social.models import Follow
from users.models import User

from .datasets import read_edges

# Slashdot Zoo was crawled in February 2009: imported follows start there.
IMPORT_EPOCH = datetime(2009, 2, 1, tzinfo=UTC)
# Rows per INSERT statement (about 2 MB of SQL; max_allowed_packet is 16 MB by default).
BATCH = 50_000
# Exactly two unsigned integer columns per line, "#" comments and blank lines allowed.
_TWO_COLUMNS = re.compile(rb"(?:#[^\n]*\n|[ \t]*\r?\n|[ \t]*\d+[ \t]+\d+[ \t]*\r?\n)*(?:[ \t]*\d+[ \t]+\d+[ \t]*\r?|#[^\n]*)?")
_COMMENT = re.compile(rb"(?m)^#.*$")
# Node ids below this pack into one int per edge (a << 32 | b) for deduplication.
_PACK_LIMIT = 1 << 32
_LOW = _PACK_LIMIT - 1

METHOD_LOAD = "load"
METHOD_INSERT = "insert"
METHOD_SQLITE = "sqlite"

# PRAGMAs of the SQLite bulk load (restored when it ends): no fsync until the
# commit's data is written (the file is synced once afterwards, ``_fsync_database``),
# a page cache (KiB, negative) big enough to keep the tables and indexes being
# written in memory instead of spilling them to the file mid-transaction, the
# index builds' sorts in memory instead of temporary files, and a second thread
# for those sorts.
SQLITE_BULK_PRAGMAS = {"synchronous": "OFF", "cache_size": "-524288", "temp_store": "MEMORY", "threads": "2"}


@dataclass
class ImportStats:
    """Counts of one import: ``users_created``, ``edges_read``, ``self_loops`` and ``duplicates``
    skipped, ``edges_inserted`` (new rows), ``method`` (``"load"``, ``"sqlite"`` or ``"insert"``).
    """

    users_created: int = 0
    edges_read: int = 0
    self_loops: int = 0
    duplicates: int = 0
    edges_inserted: int = 0
    method: str = METHOD_INSERT


def username_for(node_id: int) -> str:
    """The username of dataset node ``node_id`` (``u12831``)."""
    return f"u{node_id}"


# --- reading ----------------------------------------------------------------


def _read_bytes(path: Path) -> bytes:
    opener: Any = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        data: bytes = handle.read()
    return data


def read_edge_columns(path: Path, limit: int | None = None) -> tuple[list[int], list[int]]:
    """The first ``limit`` edges (all when None) of the edge list at ``path`` as two columns.

    :returns: ``(sources, targets)``: ``sources[i]`` follows ``targets[i]``, in file order.
    :raises DatasetError: on a malformed line (through ``read_edges``).
    """
    data = _read_bytes(path)
    if _TWO_COLUMNS.fullmatch(data) is None:
        pairs = list(_limited(read_edges(path), limit))
        return [a for a, _ in pairs], [b for _, b in pairs]
    if b"#" in data:
        data = _COMMENT.sub(b"", data)
    tokens = data.split()
    if limit is not None:
        del tokens[2 * max(limit, 0) :]
    numbers = list(map(int, tokens))
    return numbers[0::2], numbers[1::2]


def unique_edges(sources: list[int], targets: list[int], stats: ImportStats) -> list[tuple[int, int]]:
    """Edges without self-loops and without repeats (first occurrence kept, file order).

    Fills ``stats.edges_read``, ``self_loops`` and ``duplicates``.
    """
    stats.edges_read = len(sources)
    if max(sources, default=0) < _PACK_LIMIT and max(targets, default=0) < _PACK_LIMIT:
        packed = [a << 32 | b for a, b in zip(sources, targets) if a != b]
        stats.self_loops = stats.edges_read - len(packed)
        if len(set(packed)) != len(packed):
            packed = list(dict.fromkeys(packed))
        stats.duplicates = stats.edges_read - stats.self_loops - len(packed)
        return [(key >> 32, key & _LOW) for key in packed]
    kept = [(a, b) for a, b in zip(sources, targets) if a != b]
    stats.self_loops = stats.edges_read - len(kept)
    edges = list(dict.fromkeys(kept))
    stats.duplicates = len(kept) - len(edges)
    return edges


# --- users ------------------------------------------------------------------


def _insert_users_mysql(usernames: list[str], password_hash: str) -> None:
    """Multi-row INSERT IGNORE of new accounts; every other column takes the model's default.

    Values are rendered once from a template ``User`` (bulk_create spent most of its time
    rendering 13 fields per row); usernames are ``u<int>`` and need no quoting.
    """
    template = User(username="", password=password_hash)
    fields = [f for f in User._meta.concrete_fields if not f.primary_key]
    literal = connection.connection.literal
    rendered = {
        f.column: literal(f.get_db_prep_save(f.pre_save(template, add=True), connection)).decode()
        for f in fields
        if f.column != "username"
    }
    columns = ", ".join(connection.ops.quote_name(str(f.column)) for f in fields)
    values = ",".join(
        "(" + ", ".join(f"'{name}'" if f.column == "username" else rendered[f.column] for f in fields) + ")" for name in usernames
    )
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT IGNORE INTO {User._meta.db_table} ({columns}) VALUES {values}")


def _imported_users() -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT username, id FROM {User._meta.db_table} WHERE username LIKE %s", ["u%"])
        return {str(name): int(pk) for name, pk in cursor.fetchall()}


def _ensure_users(node_ids: list[int], password_hash: str) -> tuple[dict[int, int], int]:
    existing = _imported_users()
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
        existing = _imported_users()
    return {n: existing[username_for(n)] for n in node_ids}, len(missing)


# --- follows ----------------------------------------------------------------


def _insert_follows(rows: list[tuple[int, int, int]]) -> int:
    """Insert ``(follower_id, followee_id, offset_seconds)`` rows, skipping existing pairs.

    ``offset_seconds`` counts from IMPORT_EPOCH.

    :returns: the number of new rows.
    """
    if connection.vendor == "mysql":
        table = Follow._meta.db_table
        # Every value is an int we computed, so the statement is built
        # directly: escaping millions of parameters one by one (MySQLdb's
        # executemany) is half of an import. Foreign-key checks are
        # skipped for this session's bulk insert: both ids come from rows just read;
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


def _load_connection() -> Any:
    """A new MySQLdb connection to the default database with LOCAL INFILE allowed (client side)."""
    import MySQLdb

    params = connection.get_connection_params()
    params["local_infile"] = 1
    return MySQLdb.connect(**params)


def _load_follows_mysql(edges: list[tuple[int, int]], user_of: dict[int, int]) -> int | None:
    """Load every follow in one ``LOAD DATA LOCAL INFILE`` into the empty follows table.

    :returns: the number of rows loaded, or None when the fast path does not apply (the table
        has rows, or the server refuses LOCAL INFILE).
    """
    import MySQLdb

    table = connection.ops.quote_name(Follow._meta.db_table)
    epoch = IMPORT_EPOCH.strftime("%Y-%m-%d %H:%M:%S")
    handle, name = tempfile.mkstemp(prefix="followfeed-import-", suffix=".tsv")
    try:
        with os.fdopen(handle, "w") as out:
            out.write("".join([f"{user_of[a]}\t{user_of[b]}\t{offset}\n" for offset, (a, b) in enumerate(edges)]))
        loader = _load_connection()
        try:
            cursor = loader.cursor()
            cursor.execute("SET SESSION unique_checks = 0, foreign_key_checks = 0")
            cursor.execute("START TRANSACTION")
            # A plain read: a locking read (FOR UPDATE) here makes MariaDB
            # skip the bulk path.
            cursor.execute(f"SELECT 1 FROM {table} LIMIT 1")
            if cursor.fetchone() is not None:
                loader.rollback()
                return None
            try:
                cursor.execute(
                    f"LOAD DATA LOCAL INFILE %s INTO TABLE {table} (follower_id, followee_id, @offset) "
                    f"SET created_at = '{epoch}' + INTERVAL @offset SECOND",
                    [name],
                )
            except MySQLdb.OperationalError as exc:
                # 1148/2068/3948/4166: LOCAL INFILE disabled on either side.
                if exc.args and exc.args[0] in (1148, 2068, 3948, 4166):
                    loader.rollback()
                    return None
                raise
            loaded = int(cursor.rowcount)
            loader.commit()
            return loaded
        finally:
            loader.close()
    finally:
        os.unlink(name)


def _can_load() -> bool:
    return connection.vendor == "mysql" and not connection.in_atomic_block


def _sqlite_fast_path() -> bool:
    return connection.vendor == "sqlite" and not connection.in_atomic_block


@contextmanager
def sqlite_bulk_load(raw: sqlite3.Connection) -> Iterator[None]:
    """Set ``SQLITE_BULK_PRAGMAS`` on the sqlite3 connection ``raw`` for the block, then restore them.

    Enter outside a transaction (``temp_store`` and ``synchronous`` apply to later transactions).
    """
    saved = {name: raw.execute(f"PRAGMA {name}").fetchone()[0] for name in SQLITE_BULK_PRAGMAS}
    for name, value in SQLITE_BULK_PRAGMAS.items():
        raw.execute(f"PRAGMA {name} = {value}")
    try:
        yield
    finally:
        for name, value in saved.items():
            raw.execute(f"PRAGMA {name} = {value}")


def _fsync_database() -> None:
    """Flush the SQLite file to disk once, after a commit made with ``synchronous=OFF``."""
    name = str(connection.settings_dict["NAME"])
    if name == ":memory:" or name.startswith("file:"):
        return
    descriptor = os.open(name, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _insert_users_sqlite(cursor: sqlite3.Cursor, node_ids: list[int], password_hash: str) -> dict[int, int]:
    """``INSERT OR IGNORE`` an account per node (every column but the username from one
    template ``User``, prepared once by Django); existing accounts are kept.

    :returns: ``{node_id: user_id}`` of every node.
    """
    template = User(username="", password=password_hash)
    fields = [f for f in User._meta.concrete_fields if not f.primary_key]
    values = [f.get_db_prep_save(f.pre_save(template, add=True), connection) for f in fields]
    at = [f.column for f in fields].index("username")
    columns = ", ".join(connection.ops.quote_name(str(f.column)) for f in fields)
    marks = ", ".join("?" for _ in fields)
    table = connection.ops.quote_name(User._meta.db_table)
    cursor.executemany(
        f"INSERT OR IGNORE INTO {table} ({columns}) VALUES ({marks})",
        ([*values[:at], username_for(node), *values[at + 1 :]] for node in node_ids),
    )
    cursor.execute(f"SELECT username, id FROM {table} WHERE username LIKE 'u%'")
    existing = {str(name): int(pk) for name, pk in cursor.fetchall()}
    return {node: existing[username_for(node)] for node in node_ids}


def _import_sqlite(
    edges: list[tuple[int, int]],
    node_ids: list[int],
    password_hash: str,
    stats: ImportStats,
    on_progress: Callable[[int], None] | None,
    on_stage: Callable[[str], None] | None,
) -> None:
    """The ``sqlite`` method: accounts and follows in one transaction; fills ``stats.users_created``, ``edges_inserted``, ``method``."""
    connection.ensure_connection()
    raw = connection.connection
    follows = connection.ops.quote_name(Follow._meta.db_table)
    epoch = int(IMPORT_EPOCH.timestamp())
    with sqlite_bulk_load(raw), transaction.atomic():
        cursor = raw.cursor()
        users_before = raw.total_changes
        user_of = _insert_users_sqlite(cursor, node_ids, password_hash)
        stats.users_created = raw.total_changes - users_before
        cursor.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL",
            [Follow._meta.db_table],
        )
        indexes = cursor.fetchall()
        for name, _ in indexes:
            cursor.execute(f"DROP INDEX {connection.ops.quote_name(name)}")
        follows_before = raw.total_changes
        # datetime(s, 'unixepoch') writes 'YYYY-MM-DD HH:MM:SS', the text Django stores
        # for an aware datetime in whole seconds.
        insert = f"INSERT OR IGNORE INTO {follows} (follower_id, followee_id, created_at) VALUES (?, ?, datetime(?, 'unixepoch'))"
        for start in range(0, len(edges), BATCH):
            chunk = edges[start : start + BATCH]
            cursor.executemany(insert, [(user_of[a], user_of[b], epoch + offset) for offset, (a, b) in enumerate(chunk, start)])
            if on_progress is not None:
                on_progress(len(chunk))
        stats.edges_inserted = raw.total_changes - follows_before
        if on_stage is not None and indexes:
            on_stage(f"building {len(indexes)} indexes of {Follow._meta.db_table}")
        for _, sql in indexes:
            cursor.execute(sql)
    _fsync_database()
    stats.method = METHOD_SQLITE


def graph_import(
    path: Path,
    *,
    password: str | None = None,
    limit: int | None = None,
    on_progress: Callable[[int], None] | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> ImportStats:
    """Import the edge list at ``path``.

    :param password: password given to every created user (None: unusable).
    :param limit: import only the first ``limit`` edges (test slices).
    :param on_progress: called with the number of edges just handled.
    :param on_stage: called with a line saying what a long step without edge progress is doing.
    :returns: ``ImportStats``.
    :raises DatasetError: on a malformed line.
    """
    stats = ImportStats()
    # The password hash (PBKDF2, which releases the GIL) is computed beside the parsing.
    with ThreadPoolExecutor(max_workers=1) as pool:
        hashed = pool.submit(make_password, password or None)
        sources, targets = read_edge_columns(path, limit)
        edges = unique_edges(sources, targets, stats)
        del sources, targets
        nodes = {a for a, _ in edges}
        nodes.update(b for _, b in edges)
        password_hash = hashed.result()
    if _sqlite_fast_path():
        _import_sqlite(edges, sorted(nodes), password_hash, stats, on_progress, on_stage)
        return stats
    user_of, stats.users_created = _ensure_users(sorted(nodes), password_hash)
    if _can_load() and edges:
        loaded = _load_follows_mysql(edges, user_of)
        if loaded is not None:
            stats.method = METHOD_LOAD
            stats.edges_inserted = loaded
            if on_progress is not None:
                on_progress(len(edges))
            return stats
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

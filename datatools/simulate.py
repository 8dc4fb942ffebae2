"""Replay the real posting activity of SNAP higgs-activity_time as notes of the imported accounts.

Higgs poster rank *r* posts as the account of follower rank *r*; every *k*-th row is kept, times
keep their spacing shifted to end at ``end``. The mapping and its source:
docs/operations.md#demo-data.
"""

from __future__ import annotations

import gzip
import io
import math
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from django.db import connection, transaction
from django.db.models import Count
from django.utils import timezone

from feed.models import Note
from feed.note_counts import note_counts_load
from users.models import User

from .datasets import DatasetError

HIGGS_ACTIVITY = "higgs-activity_time.txt.gz"
VERBS = {b"RT": "Retweeted", b"MT": "Mentioned", b"RE": "Replied to"}
INSERT_BATCH = 2000
# About how many notes a replay publishes by default (simulate_activity, the demo's warm-up).
DEMO_NOTES = 20_000

Row = tuple[int, int, int, bytes]  # (userA, userB, unix seconds, type)


def read_activity(path: Path) -> Iterator[Row]:
    """Yield ``(a, b, unix_seconds, type)`` for each line of a Higgs activity file (.gz or plain).

    :raises DatasetError: on a line that is not ``int int int type``.
    """
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as raw:
        for number, line in enumerate(io.BufferedReader(raw), start=1):
            parts = line.split()
            if not parts:
                continue
            try:
                yield int(parts[0]), int(parts[1]), int(parts[2]), parts[3]
            except (ValueError, IndexError):
                raise DatasetError(f"{path}:{number}: not an activity row: {line[:80]!r}") from None


def accounts_by_followers() -> list[tuple[int, str]]:
    """Active accounts, most followed first (ties by id): ``[(user_id, username)]``."""
    from social.models import Follow

    # Counted without joining each follow to both accounts' rows: the follows
    # of the (few) inactive followers are left out by a subquery, and an
    # inactive followee's count is never looked at (it is not in ``users``).
    inactive = User.objects.filter(is_active=False).values("pk")
    counts = dict(
        Follow.objects.exclude(follower_id__in=inactive)
        .values("followee_id")
        .annotate(n=Count("pk"))
        .values_list("followee_id", "n")
        .order_by()
    )
    users = list(User.objects.filter(is_active=True).values_list("pk", "username"))
    # By id, then (a stable sort) by follower count descending: the order of
    # the key (-count, id) without building a tuple per account.
    users.sort()
    users.sort(key=lambda u: counts.get(u[0], 0), reverse=True)
    return users


@dataclass
class ReplayPlan:
    """What a replay will write: ``rows`` (Higgs rows kept), the ``mapping`` of Higgs user
    ids to ``(user_id, username)``, the time ``shift`` (seconds) and the sampling ``step``."""

    rows: list[Row]
    mapping: dict[int, tuple[int, str]]
    shift: int
    step: int
    rows_read: int
    posters: int


def plan_replay(path: Path, *, notes: int, accounts: list[tuple[int, str]], end: datetime) -> ReplayPlan:
    """Choose the rows to replay and map their users onto ``accounts`` (see the module docstring)."""
    rows = list(read_activity(path))
    activity = Counter(a for a, _, _, _ in rows)
    # (-rows, id) as two stable sorts, as in accounts_by_followers.
    posters = sorted(activity)
    posters.sort(key=activity.__getitem__, reverse=True)
    mapping = {higgs: accounts[rank] for rank, higgs in enumerate(posters[: len(accounts)])}
    kept = [row for row in rows if row[0] in mapping]
    step = max(1, math.ceil(len(kept) / max(1, notes)))
    chosen = kept[::step][:notes]
    shift = int(end.timestamp()) - chosen[-1][2] if chosen else 0
    return ReplayPlan(rows=chosen, mapping=mapping, shift=shift, step=step, rows_read=len(rows), posters=len(activity))


def _body(row: Row, mapping: dict[int, tuple[int, str]]) -> str:
    a, b, ts, kind = row
    when = datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")
    verb = VERBS.get(kind, "Posted about")
    if a == b:
        target = "my own post"
    elif b in mapping:
        target = f"@{mapping[b][1]}"
    else:
        target = "someone outside this graph"
    return f"{verb} {target} about the Higgs boson. (Replayed from the SNAP Higgs Twitter activity, {when} UTC.)"


def replay(plan: ReplayPlan, *, on_progress: Callable[[int], None] | None = None) -> int:
    """Insert the planned notes in bulk (id order = publish order), marked fanned out, in ONE
    transaction (an interrupted replay leaves none, so ``--if-empty`` runs it again); no
    signals, no fan-out: the caller rebuilds the feeds.

    :param on_progress: called with the number of notes just written.
    :returns: the number of notes created.
    """
    fanned_out_at = timezone.now()
    created = 0
    with transaction.atomic():
        for start in range(0, len(plan.rows), INSERT_BATCH):
            chunk = plan.rows[start : start + INSERT_BATCH]
            rows = [
                (plan.mapping[row[0]][0], _body(row, plan.mapping), datetime.fromtimestamp(row[2] + plan.shift, tz=UTC))
                for row in chunk
            ]
            if connection.vendor == "sqlite":
                _insert_notes_sqlite(rows, fanned_out_at)
            else:
                notes = [
                    Note(author_id=author, body=body, created_at=at, fanned_out_at=fanned_out_at) for author, body, at in rows
                ]
                Note.objects.bulk_create(notes, batch_size=INSERT_BATCH)
            created += len(rows)
            if on_progress is not None:
                on_progress(len(rows))
        note_counts_load()
    return created


def _insert_notes_sqlite(rows: list[tuple[int, str, datetime]], fanned_out_at: datetime) -> None:
    """``executemany`` one INSERT of ``(author_id, body, created_at)`` rows into the notes table."""
    template = Note(author_id=0, body="", fanned_out_at=fanned_out_at)
    fields = [f for f in Note._meta.concrete_fields if not f.primary_key]
    columns = [str(f.column) for f in fields]
    values = [f.get_db_prep_save(f.pre_save(template, add=True), connection) for f in fields]
    at = {name: columns.index(name) for name in ("author_id", "body", "created_at")}
    created_field = Note._meta.get_field("created_at")

    def row_values(author: int, body: str, published: datetime) -> list[Any]:
        row = list(values)
        row[at["author_id"]], row[at["body"]] = author, body
        row[at["created_at"]] = created_field.get_db_prep_save(published, connection)
        return row

    table = connection.ops.quote_name(Note._meta.db_table)
    names = ", ".join(connection.ops.quote_name(name) for name in columns)
    marks = ", ".join("?" for _ in columns)
    connection.ensure_connection()
    connection.connection.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks})", [row_values(*row) for row in rows])


def default_end() -> datetime:
    """When the last replayed note is published: a minute ago, in whole seconds."""
    return (timezone.now() - timedelta(minutes=1)).replace(microsecond=0)


def has_notes() -> bool:
    """Whether any note exists (``--if-empty``)."""
    return Note.objects.exists()

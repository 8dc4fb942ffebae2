"""Mastodon's ``statuses_count``: each author's ``AuthorNoteCount``, moved by the transaction of
each change of a note (``feed.services``), remade by the reconcile, set at once after bulk loads."""

from __future__ import annotations

from django.db import connection, transaction
from django.db.models import F

from .models import FEED_VISIBILITIES, AuthorNoteCount, Note
from .selectors import shown_note_count


def count_change(*, author_id: int, delta: int) -> None:
    """Move ``author_id``'s ``AuthorNoteCount`` by ``delta`` in the caller's transaction, after the
    note's own change. Without a row, the row starts from a count of the notes (which include
    the change already)."""
    if AuthorNoteCount.objects.filter(author_id=author_id).update(notes=F("notes") + delta):
        return
    table = AuthorNoteCount._meta.db_table
    # The first change of an author without a row inserts the count of its notes (its own change
    # included); a concurrent first change waits on that row and adds its delta to it.
    if connection.vendor == "mysql":
        upsert = f"INSERT INTO {table} (author_id, notes) VALUES (%s, %s) ON DUPLICATE KEY UPDATE notes = notes + %s"
    else:
        upsert = (
            f"INSERT INTO {table} (author_id, notes) VALUES (%s, %s) ON CONFLICT (author_id) DO UPDATE SET notes = notes + %s"
        )
    with connection.cursor() as cursor:
        cursor.execute(upsert, [author_id, shown_note_count(author_id=author_id), delta])


def count_recount(*, author_id: int) -> None:
    """Make ``author_id``'s ``AuthorNoteCount`` again from a count of its notes: safe beside
    concurrent changes (each one either is in the count or adds its delta to the new row)."""
    with transaction.atomic():
        AuthorNoteCount.objects.filter(author_id=author_id).delete()
        count_change(author_id=author_id, delta=0)


def note_counts_load() -> int:
    """Set every author's ``AuthorNoteCount`` from its notes in one statement, after a bulk load
    of notes (datatools, benchmarks): only while nothing else changes notes.

    :returns: rows written.
    """
    table, notes = AuthorNoteCount._meta.db_table, Note._meta.db_table
    shown = ", ".join(["%s"] * len(FEED_VISIBILITIES))
    counted = (
        f"SELECT author_id, COUNT(*) FROM {notes} WHERE is_hidden = 0 AND deleted_at IS NULL"
        f" AND visibility IN ({shown}) GROUP BY author_id"
    )
    if connection.vendor == "mysql":
        statement = f"INSERT INTO {table} (author_id, notes) {counted} ON DUPLICATE KEY UPDATE notes = VALUES(notes)"
    else:
        statement = (
            f"INSERT INTO {table} (author_id, notes) {counted} ON CONFLICT (author_id) DO UPDATE SET notes = excluded.notes"
        )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statement, list(FEED_VISIBILITIES))
        return int(cursor.rowcount)

"""Mastodon's ``statuses_count``: ``AuthorNoteCount`` kept in each change's transaction, counted
from the notes where no row is, and reconciled (``feed.reconcile.note_counts_drift``)."""

from __future__ import annotations

import io
import threading

import pytest
from django.core.management import call_command
from django.db import connection

from client_api.selectors import status_facts
from core.exit_codes import EXIT_DRIFT_FOUND
from feed import note_counts, services
from feed.models import AuthorNoteCount, Note
from feed.reconcile import note_counts_drift
from feed.selectors import shown_note_count
from tests.support.accounts import make_user

pytestmark = pytest.mark.django_db(transaction=True)


def shown_count(author_id: int) -> int:
    """The count an Account shows (the row, or a count of the notes)."""
    return status_facts(author_ids=[author_id], note_ids=()).authors[author_id].statuses_count


def stored(author_id: int) -> int | None:
    return AuthorNoteCount.objects.filter(author_id=author_id).values_list("notes", flat=True).first()


def test_each_change_moves_the_count_in_its_transaction() -> None:
    author = make_user("counted")
    public = services.note_create(author=author, body="one")
    services.note_create(author=author, body="two", visibility="private")
    services.note_create(author=author, body="to myself", visibility="direct")
    assert (stored(author.pk), shown_count(author.pk)) == (2, 2)

    services.note_hide(note=public, hidden=True)
    assert (stored(author.pk), shown_count(author.pk)) == (1, 1)
    services.note_hide(note=public, hidden=True)  # no change, no move
    assert stored(author.pk) == 1
    services.note_hide(note=public, hidden=False)
    assert stored(author.pk) == 2

    services.note_delete(note=public)
    services.note_delete(note=public)  # deleted once only
    assert (stored(author.pk), shown_count(author.pk), shown_note_count(author_id=author.pk)) == (1, 1, 1)


def test_a_hidden_note_deleted_and_a_direct_note_hidden_leave_the_count_alone() -> None:
    author = make_user("quiet")
    hidden = services.note_create(author=author, body="hidden then deleted")
    direct = services.note_create(author=author, body="mine", visibility="direct")
    services.note_hide(note=hidden, hidden=True)
    services.note_delete(note=hidden)
    services.note_hide(note=direct, hidden=True)
    services.note_hide(note=direct, hidden=False)
    assert (stored(author.pk), shown_note_count(author_id=author.pk)) == (0, 0)


def test_without_a_row_the_notes_are_counted_and_the_next_change_starts_the_row_from_them() -> None:
    author = make_user("bulk")
    Note.objects.bulk_create([Note(author_id=author.pk, body=f"loaded {index}") for index in range(5)])
    assert (stored(author.pk), shown_count(author.pk)) == (None, 5)

    services.note_create(author=author, body="sixth")
    assert (stored(author.pk), shown_count(author.pk)) == (6, 6)


def test_the_reconcile_remakes_a_drifted_row_and_makes_the_missing_ones() -> None:
    right, drifted, loaded = make_user("right"), make_user("drifted"), make_user("loaded")
    services.note_create(author=right, body="a")
    services.note_create(author=drifted, body="b")
    Note.objects.bulk_create([Note(author_id=loaded.pk, body=f"loaded {index}") for index in range(3)])
    AuthorNoteCount.objects.filter(author_id=drifted.pk).update(notes=40)
    assert shown_count(drifted.pk) == 40

    assert note_counts_drift(repair=False) == 1
    assert (stored(drifted.pk), stored(loaded.pk)) == (40, None)
    assert note_counts_drift(repair=True, batch=1) == 1

    assert (stored(right.pk), stored(drifted.pk), stored(loaded.pk)) == (1, 1, 3)
    assert (shown_count(drifted.pk), shown_count(loaded.pk)) == (1, 3)
    assert note_counts_drift(repair=True) == 0


def test_concurrent_first_notes_of_an_author_are_all_counted() -> None:
    author = make_user("busy")
    Note.objects.bulk_create([Note(author_id=author.pk, body="loaded")])
    start = threading.Barrier(6)

    def publish(index: int) -> None:
        start.wait()
        try:
            services.note_create(author=author, body=f"at once {index}")
        finally:
            connection.close()

    threads = [threading.Thread(target=publish, args=(index,)) for index in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert (stored(author.pk), shown_note_count(author_id=author.pk)) == (7, 7)


def test_a_bulk_load_sets_every_authors_count_from_its_notes() -> None:
    counted, silent = make_user("loaded_a"), make_user("silent")
    services.note_create(author=counted, body="kept")
    AuthorNoteCount.objects.filter(author_id=counted.pk).update(notes=9)
    Note.objects.bulk_create(
        [Note(author_id=counted.pk, body="loaded"), Note(author_id=counted.pk, body="mine", visibility="direct")]
    )

    note_counts.note_counts_load()

    assert (stored(counted.pk), stored(silent.pk)) == (2, None)


def test_the_command_reports_drift_on_a_dry_run_and_repairs_without_it() -> None:
    author = make_user("commanded")
    services.note_create(author=author, body="a")
    AuthorNoteCount.objects.filter(author_id=author.pk).update(notes=5)

    with pytest.raises(SystemExit) as exited:
        call_command("reconcile_feeds", "--note-counts", "--dry-run", stdout=io.StringIO())
    out = io.StringIO()
    call_command("reconcile_feeds", "--note-counts", stdout=out)

    assert exited.value.code == EXIT_DRIFT_FOUND
    assert "note_counts_drifted=1" in out.getvalue()
    assert stored(author.pk) == 1

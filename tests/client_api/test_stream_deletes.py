"""Which streams a ``delete`` reaches (``client_api.selectors.stream_delete_shown``): a stream
learns of a deletion only where it could have shown the note. Found by a break-it pass: a former
follower's list stream, opened before a private account removed it, heard of that account's
deleted notes."""

from __future__ import annotations

import pytest

from client_api.selectors import stream_delete_shown
from feed.models import DIRECT, PRIVATE, PUBLIC
from feed.services import note_create, note_delete
from social.controls import follower_remove
from social.services import follow_create

pytestmark = pytest.mark.django_db


def deleted(author, visibility: str) -> int:
    note = note_create(author=author, body="soon gone", visibility=visibility)
    note_delete(note=note, actor=author)
    return note.pk


def test_a_delete_reaches_followers_and_the_author_and_nobody_else(alice, bob, charlie) -> None:
    follow_create(actor=alice, followee_id=bob.pk)
    public, private, direct = deleted(bob, PUBLIC), deleted(bob, PRIVATE), deleted(bob, DIRECT)

    assert [stream_delete_shown(reader=alice, note_id=note) for note in (public, private, direct)] == [True, True, False]
    assert [stream_delete_shown(reader=bob, note_id=note) for note in (public, private, direct)] == [True, True, True]
    assert [stream_delete_shown(reader=charlie, note_id=note) for note in (public, private, direct)] == [False, False, False]


def test_a_follower_removed_hears_of_no_later_deletion(alice, bob) -> None:
    follow_create(actor=alice, followee_id=bob.pk)
    follower_remove(actor=bob, follower_id=alice.pk)

    assert stream_delete_shown(reader=alice, note_id=deleted(bob, PRIVATE)) is False


def test_a_note_gone_from_the_database_is_told(alice) -> None:
    assert stream_delete_shown(reader=alice, note_id=10**12) is True

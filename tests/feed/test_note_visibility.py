"""Mastodon's visibilities and content warnings on notes: public, unlisted, private (followers
only, whatever the account's setting) and direct (the author only, never fanned out); every page
and feed honours them."""

from __future__ import annotations

import pytest
from django.test import Client

from feed import selectors, services
from feed.models import DIRECT, PRIVATE, UNLISTED, Note
from feed.rebuild import inbox_rebuild
from feed.services import NoteInvalidError
from tests.support.accounts import signed_in
from tests.support.feed import inbox_ids

pytestmark = pytest.mark.django_db


@pytest.fixture
def notes(active_alice, active_bob, follow, synced, django_capture_on_commit_callbacks):
    """alice follows bob (public account); bob published one note of each visibility."""
    follow(active_alice, active_bob)
    synced(active_alice)
    made = {}
    for visibility in ("public", UNLISTED, PRIVATE, DIRECT):
        with django_capture_on_commit_callbacks(execute=True):
            made[visibility] = services.note_create(author=active_bob, body=f"{visibility} note", visibility=visibility)
    return made


class TestFeeds:
    def test_a_direct_note_reaches_no_inbox_and_the_rest_do(self, active_alice, notes, redis_client) -> None:
        assert set(inbox_ids(redis_client, active_alice)) == {notes["public"].pk, notes[UNLISTED].pk, notes[PRIVATE].pk}

    def test_the_database_feed_and_a_rebuild_agree(self, active_alice, notes, redis_client) -> None:
        database = selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=20, database_only=True)
        inbox_rebuild(user_id=active_alice.pk)

        assert {note.pk for note in database.notes} == {notes["public"].pk, notes[UNLISTED].pk, notes[PRIVATE].pk}
        assert notes[DIRECT].pk not in inbox_ids(redis_client, active_alice)


class TestPages:
    def test_a_follower_sees_followers_only_notes_not_direct_ones(self, active_alice, active_bob, notes) -> None:
        page = signed_in(active_alice).get(f"/u/{active_bob.username}/notes/")

        assert b"private note" in page.content
        assert b"direct note" not in page.content
        assert signed_in(active_alice).get(f"/n/{notes[DIRECT].pk}/").status_code == 404

    def test_a_stranger_sees_public_and_unlisted_notes_only(self, active_charlie, active_bob, notes) -> None:
        for client in (signed_in(active_charlie), Client()):
            page = client.get(f"/u/{active_bob.username}/notes/")

            assert b"public note" in page.content and b"unlisted note" in page.content
            assert b"private note" not in page.content and b"direct note" not in page.content
            assert client.get(f"/n/{notes[PRIVATE].pk}/").status_code == 404
            assert client.get(f"/api/notes/{notes[PRIVATE].pk}").status_code == 404

    def test_the_author_sees_every_note(self, active_bob, notes) -> None:
        page = signed_in(active_bob).get(f"/u/{active_bob.username}/notes/")

        assert all(f"{visibility} note".encode() in page.content for visibility in notes)
        assert signed_in(active_bob).get(f"/n/{notes[DIRECT].pk}/").status_code == 200

    def test_a_content_warning_folds_the_body(self, active_bob, django_capture_on_commit_callbacks) -> None:
        with django_capture_on_commit_callbacks(execute=True):
            note = services.note_create(author=active_bob, body="the ending", spoiler_text="spoilers")

        page = Client().get(f"/n/{note.pk}/")

        assert b"<summary>spoilers</summary>" in page.content
        assert b"the ending" not in page.content.split(b"<title>")[1].split(b"</title>")[0]

    def test_the_publish_form_takes_visibility_and_a_warning(self, active_bob) -> None:
        signed_in(active_bob).post("/notes/", {"body": "mine", "visibility": PRIVATE, "spoiler_text": "cw"})

        note = Note.objects.get(author=active_bob)
        assert (note.visibility, note.spoiler_text) == (PRIVATE, "cw")

    def test_a_bad_visibility_on_the_form_is_a_400_and_writes_nothing(self, active_bob) -> None:
        response = signed_in(active_bob).post("/notes/", {"body": "mine", "visibility": "everyone"})

        assert response.status_code == 400
        assert not Note.objects.exists()


class TestNoteCreate:
    @pytest.mark.parametrize(("visibility", "warning"), [("everyone", ""), ("public", "x" * 501)])
    def test_bad_input_is_refused_and_writes_nothing(self, active_bob, visibility: str, warning: str) -> None:
        with pytest.raises(NoteInvalidError):
            services.note_create(author=active_bob, body="hi", visibility=visibility, spoiler_text=warning)

        assert not Note.objects.exists()


class TestWarningsInTheHomeFeed:
    def test_the_home_page_folds_a_warned_note_from_the_cache_and_the_database(
        self, active_alice, active_bob, follow, synced, django_capture_on_commit_callbacks
    ) -> None:
        follow(active_alice, active_bob)
        synced(active_alice)
        with django_capture_on_commit_callbacks(execute=True):
            note = services.note_create(author=active_bob, body="the ending", spoiler_text="spoilers")

        first = signed_in(active_alice).get("/home")  # fills the note cache
        second = signed_in(active_alice).get("/home")  # read from it
        database = selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=20, database_only=True)

        for page in (first, second):
            assert b'<details class="note-warning"><summary>spoilers</summary>' in page.content
        assert [(n.pk, n.spoiler_text, n.body) for n in database.notes] == [(note.pk, "spoilers", "the ending")]

    def test_a_cached_value_keeps_the_warning_apart_from_the_body(self, active_bob) -> None:
        from feed import note_cache
        from feed.models import from_ms

        note = Note(pk=1, author_id=active_bob.pk, body="body \\x1f text", spoiler_text="cw")
        note.created_at = from_ms(1_700_000_000_000)

        _, _, text = note_cache.parse_note_value(note_cache.note_value(note))

        assert note_cache.split_warning(text) == ("cw", "body \\x1f text")
        assert note_cache.split_warning("plain") == ("", "plain")

    def test_a_warning_with_a_control_character_is_refused(self, active_bob) -> None:
        with pytest.raises(NoteInvalidError):
            services.note_create(author=active_bob, body="hi", spoiler_text="a\x1fb")

        assert not Note.objects.exists()


class TestTheDatabaseDecides:
    def test_a_removed_follower_loses_followers_only_notes_before_the_mirror_knows(
        self, active_alice, active_bob, notes, django_capture_on_commit_callbacks
    ) -> None:
        from social.controls import follower_remove

        with django_capture_on_commit_callbacks(execute=False):  # the mirror still says alice follows bob
            follower_remove(actor=active_bob, follower_id=active_alice.pk)

        assert selectors.note_detail(note_id=notes[PRIVATE].pk, viewer_id=active_alice.pk) is None
        assert b"private note" not in signed_in(active_alice).get(f"/u/{active_bob.username}/notes/").content

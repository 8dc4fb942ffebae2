"""Feed pages and API: signed out, owner, other user; bad input is a 4xx; query counts."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from feed import redis_keys
from feed.models import Note
from tests.support.accounts import signed_in
from tests.support.feed import inbox_ids

pytestmark = pytest.mark.django_db

BASE_MS = int((timezone.now() - timedelta(hours=1)).timestamp() * 1000)


@pytest.fixture
def feed(active_alice, active_bob, active_charlie, follow, publish, synced):
    """alice follows bob and charlie, who published 5 notes; alice's inbox is synced."""
    follow(active_alice, active_bob)
    follow(active_alice, active_charlie)
    synced(active_alice)
    notes = [publish(active_bob if i % 2 else active_charlie, f"note {i}", at_ms=BASE_MS + i) for i in range(5)]
    return notes


class TestHomePage:
    def test_signed_out_is_sent_to_sign_in(self, db):
        response = Client().get("/home")

        assert response.status_code == 302
        assert response["Location"].startswith("/login/")

    def test_shows_the_followed_notes_newest_first(self, active_alice, feed):
        html = signed_in(active_alice).get("/home").content.decode()

        positions = [html.index(f"note {i}<") for i in range(5)]
        assert positions == sorted(positions, reverse=True)
        assert "Catching up" not in html

    def test_another_user_sees_their_own_feed_not_alices(self, active_charlie, feed):
        html = signed_in(active_charlie).get("/home").content.decode()

        assert "note 1<" not in html  # bob's notes: charlie does not follow bob
        assert "No notes yet from the accounts you follow" in html

    def test_load_more_is_a_plain_link_with_the_cursor(self, active_alice, feed, settings):
        settings.FEED_PAGE_SIZE = 2
        client = signed_in(active_alice)

        first = client.get("/home").content.decode()
        cursor = first.split('class="load-more" href="?cursor=')[1].split('"')[0]
        second = client.get(f"/home?cursor={cursor}").content.decode()

        assert "note 4<" in first and "note 3<" in first and "note 2<" not in first
        assert "note 2<" in second and "note 1<" in second and "note 4<" not in second

    def test_a_malformed_cursor_is_a_400(self, active_alice, feed):
        response = signed_in(active_alice).get("/home?cursor=%%%")

        assert response.status_code == 400

    def test_the_home_feed_costs_a_fixed_number_of_queries(
        self, active_alice, feed, people, follow, publish, django_assert_num_queries
    ):
        client = signed_in(active_alice)
        client.get("/home")  # warm: last_seen_at just written, the account's row kept (users.account_rows)
        # the database tail past the horizon (the notes come from the note cache) + the visibility
        # check of the page's authors + the home marker's read (the session and the account's token
        # are Redis's)
        with django_assert_num_queries(3):
            small = client.get("/home")
        for author in people(5):
            follow(active_alice, author)
            for i in range(6):
                publish(author, at_ms=BASE_MS + 100 + i)

        # A full page from Redis and the note cache: the visibility check, the home marker's read
        # and its move to the newer note on top.
        with django_assert_num_queries(3):
            big = client.get("/home")

        assert small.status_code == big.status_code == 200
        assert big.content.decode().count('class="note"') == 20

    def test_a_reader_back_from_away_sees_catching_up_and_the_database_feed(self, active_alice, feed, redis_client, monkeypatch):
        redis_client.delete(redis_keys.inbox_synced_key(active_alice.pk), redis_keys.inbox_key(active_alice.pk))

        monkeypatch.setattr("core.tasks.outbox_apply.apply_async", lambda *args, **kwargs: None)  # the worker is busy

        html = signed_in(active_alice).get("/home").content.decode()

        assert "Catching up" in html
        assert html.count('class="note"') == 5
        assert redis_client.exists(redis_keys.inbox_rebuilding_key(active_alice.pk))

    def test_with_the_rebuild_done_at_once_the_feed_is_back_on_redis(
        self, active_alice, feed, redis_client, django_capture_on_commit_callbacks
    ):
        redis_client.delete(redis_keys.inbox_synced_key(active_alice.pk), redis_keys.inbox_key(active_alice.pk))

        with django_capture_on_commit_callbacks(execute=True):
            html = signed_in(active_alice).get("/home").content.decode()

        assert html.count('class="note"') == 5
        assert len(inbox_ids(redis_client, active_alice)) == 5
        assert redis_client.exists(redis_keys.inbox_synced_key(active_alice.pk))
        assert not redis_client.exists(redis_keys.inbox_rebuilding_key(active_alice.pk))


class TestPublishPage:
    def test_signed_out_cannot_publish(self, db):
        response = Client().post("/notes/", {"body": "hi"})

        assert response.status_code == 302
        assert Note.objects.count() == 0

    def test_publishes_and_delivers_to_followers(
        self, active_alice, active_bob, follow, redis_client, django_capture_on_commit_callbacks
    ):
        follow(active_alice, active_bob)

        with django_capture_on_commit_callbacks(execute=True):
            response = signed_in(active_bob).post("/notes/", {"body": "fresh note"})

        note = Note.objects.get()
        assert response.status_code == 302
        assert response["Location"] == f"/n/{note.pk}/"
        assert (note.author_id, note.body) == (active_bob.pk, "fresh note")
        assert inbox_ids(redis_client, active_alice) == [note.pk]

    @pytest.mark.parametrize("body", ["", "   ", "x" * 501])
    def test_bad_input_is_a_400_and_changes_nothing(self, active_bob, body):
        response = signed_in(active_bob).post("/notes/", {"body": body})

        assert response.status_code == 400
        assert Note.objects.count() == 0

    def test_get_is_not_allowed(self, active_bob):
        assert signed_in(active_bob).get("/notes/").status_code == 405

    def test_without_a_csrf_token_it_is_a_403(self, active_bob):
        client = signed_in(active_bob, enforce_csrf_checks=True)

        response = client.post("/notes/", {"body": "hi"})

        assert response.status_code == 403
        assert Note.objects.count() == 0


class TestNotePages:
    def test_a_note_page_is_public(self, active_bob, publish):
        note = publish(active_bob, "public words")

        response = Client().get(f"/n/{note.pk}/")

        assert response.status_code == 200
        assert "public words" in response.content.decode()
        assert "Delete this note" not in response.content.decode()

    def test_the_author_sees_the_delete_button_and_others_do_not(self, active_bob, active_charlie, publish):
        note = publish(active_bob)

        assert "Delete this note" in signed_in(active_bob).get(f"/n/{note.pk}/").content.decode()
        assert "Delete this note" not in signed_in(active_charlie).get(f"/n/{note.pk}/").content.decode()

    @pytest.mark.parametrize("state", ["hidden", "deleted", "author_inactive", "missing"])
    def test_an_invisible_note_is_a_404(self, active_bob, publish, state):
        note = publish(active_bob)
        if state == "hidden":
            Note.objects.filter(pk=note.pk).update(is_hidden=True)
        elif state == "deleted":
            Note.objects.filter(pk=note.pk).update(deleted_at=timezone.now())
        elif state == "author_inactive":
            type(active_bob).objects.filter(pk=active_bob.pk).update(is_active=False)
        else:
            Note.objects.filter(pk=note.pk).delete()

        assert Client().get(f"/n/{note.pk}/").status_code == 404

    def test_only_the_author_deletes(
        self, active_alice, active_bob, active_charlie, follow, publish, redis_client, django_capture_on_commit_callbacks
    ):
        follow(active_alice, active_bob)
        note = publish(active_bob)

        signed_out = Client().post(f"/n/{note.pk}/delete/")
        other = signed_in(active_charlie).post(f"/n/{note.pk}/delete/")
        with django_capture_on_commit_callbacks(execute=True):
            owner = signed_in(active_bob).post(f"/n/{note.pk}/delete/")
        again = signed_in(active_bob).post(f"/n/{note.pk}/delete/")

        assert signed_out.status_code == 302 and signed_out["Location"].startswith("/login/")
        assert other.status_code == 403
        assert owner.status_code == 302
        assert again.status_code == 404
        assert Note.objects.get(pk=note.pk).deleted_at is not None
        assert inbox_ids(redis_client, active_alice) == []

    def test_user_notes_page_and_profile_list_the_authors_notes(self, active_bob, active_charlie, publish, settings):
        settings.FEED_PAGE_SIZE = 2
        for i in range(3):
            publish(active_bob, f"bob says {i}", at_ms=BASE_MS + i)
        publish(active_charlie, "charlie says")

        page = Client().get("/u/bob/notes/").content.decode()
        cursor = page.split('class="older" href="?cursor=')[1].split('"')[0]
        older = Client().get(f"/u/bob/notes/?cursor={cursor}").content.decode()
        profile = Client().get("/u/bob/").content.decode()

        assert "bob says 2" in page and "bob says 1" in page and "bob says 0" not in page
        assert "bob says 0" in older
        assert all(f"bob says {i}" in profile for i in range(3)) and "charlie says" not in profile

    def test_profile_shows_each_viewer_the_notes_it_may_see_with_their_visibility(
        self, active_alice, active_bob, active_charlie, follow
    ):
        follow(active_alice, active_bob)
        for body, shown in [("for everyone", "public"), ("for followers", "private"), ("for me", "direct")]:
            Note.objects.create(author=active_bob, body=body, visibility=shown)

        def notes_seen(client):
            html = client.get("/u/bob/").content.decode()
            found = [body for body in ("for everyone", "for followers", "for me") if body in html]
            return found, html.count('class="muted note-visibility"'), "Followers only" in html, "Only me" in html

        assert notes_seen(Client()) == (["for everyone"], 0, False, False)
        assert notes_seen(signed_in(active_charlie)) == (["for everyone"], 0, False, False)
        assert notes_seen(signed_in(active_alice)) == (["for everyone", "for followers"], 1, True, False)
        assert notes_seen(signed_in(active_bob)) == (["for everyone", "for followers", "for me"], 2, True, True)

    def test_user_notes_bad_cursor_and_unknown_user(self, active_bob):
        assert Client().get("/u/bob/notes/?cursor=zzz").status_code == 400
        assert Client().get("/u/nobody/notes/").status_code == 404


class TestApi:
    def test_signed_out_gets_401_everywhere(self, db):
        client = Client()

        answers = [
            client.post("/api/blog", {"body": "x"}),
            client.post("/api/notes", data=json.dumps({"body": "x"}), content_type="application/json"),
            client.get("/api/blog/of/follow"),
            client.get("/api/feed"),
            client.delete("/api/notes/1"),
        ]

        assert [a.status_code for a in answers] == [401] * 5
        assert all(a.json()["success"] is False for a in answers)
        assert Note.objects.count() == 0

    def test_publish_with_json_or_form_data(self, active_bob):
        client = signed_in(active_bob)

        by_json = client.post("/api/notes", data=json.dumps({"body": "json note"}), content_type="application/json")
        by_form = client.post("/api/blog", {"body": "form note"})

        assert by_json.status_code == by_form.status_code == 201
        assert by_json.json()["data"]["body"] == "json note"
        assert by_json.json()["data"]["author"]["id"] == active_bob.pk
        assert sorted(Note.objects.values_list("body", flat=True)) == ["form note", "json note"]

    @pytest.mark.parametrize(
        "payload",
        [
            "{not json",
            "[1, 2]",
            json.dumps({"body": 5}),
            json.dumps({}),
            json.dumps({"body": ""}),
            json.dumps({"body": "x" * 501}),
        ],
    )
    def test_bad_publish_input_is_a_400(self, active_bob, payload):
        response = signed_in(active_bob).post("/api/notes", data=payload, content_type="application/json")

        assert response.status_code == 400
        assert response.json()["success"] is False
        assert Note.objects.count() == 0

    def test_the_actor_is_always_the_signed_in_user(self, active_bob, active_charlie):
        payload = json.dumps({"body": "who am i", "author": active_charlie.pk, "author_id": active_charlie.pk})

        signed_in(active_bob).post("/api/notes", data=payload, content_type="application/json")

        assert Note.objects.get().author_id == active_bob.pk

    def test_scroll_contract(self, active_alice, feed):
        client = signed_in(active_alice)

        first = client.get("/api/blog/of/follow", {"limit": 2}).json()["data"]
        second = client.get("/api/blog/of/follow", {"lastId": first["minTime"], "offset": first["offset"], "limit": 2}).json()[
            "data"
        ]

        assert [n["body"] for n in first["list"]] == ["note 4", "note 3"]
        assert (first["minTime"], first["offset"], first["hasMore"]) == (BASE_MS + 3, 1, True)
        assert [n["body"] for n in second["list"]] == ["note 2", "note 1"]
        assert first["list"][0]["createdAt"] == BASE_MS + 4

    def test_the_seed_client_first_call_with_the_current_time(self, active_alice, feed):
        now_ms = int(timezone.now().timestamp() * 1000)

        data = signed_in(active_alice).get("/api/blog/of/follow", {"lastId": now_ms, "offset": 0}).json()["data"]

        assert [n["body"] for n in data["list"]] == [f"note {i}" for i in range(4, -1, -1)]
        assert data["hasMore"] is False

    def test_cursor_variant(self, active_alice, feed):
        client = signed_in(active_alice)

        first = client.get("/api/feed", {"limit": 3}).json()["data"]
        second = client.get("/api/feed", {"limit": 3, "cursor": first["next_cursor"]}).json()["data"]

        assert [n["body"] for n in first["list"] + second["list"]] == [f"note {i}" for i in range(4, -1, -1)]
        assert second["next_cursor"] is None

    @pytest.mark.parametrize(
        "query",
        [
            {"lastId": "abc"},
            {"lastId": "-5"},
            {"lastId": "1", "offset": "x"},
            {"offset": "2"},
            {"limit": "0"},
            {"limit": "101"},
            {"limit": "x"},
        ],
    )
    def test_bad_scroll_input_is_a_400(self, active_alice, query):
        response = signed_in(active_alice).get("/api/blog/of/follow", query)

        assert response.status_code == 400
        assert response.json()["success"] is False

    @pytest.mark.parametrize("cursor", ["abc", "%%%", "djE6eDp5", "a" * 100])
    def test_bad_cursor_is_a_400(self, active_alice, cursor):
        assert signed_in(active_alice).get("/api/feed", {"cursor": cursor}).status_code == 400

    def test_note_item_get_and_delete(self, active_bob, active_charlie, publish, django_capture_on_commit_callbacks):
        note = publish(active_bob, "item")

        public = Client().get(f"/api/notes/{note.pk}")
        other = signed_in(active_charlie).delete(f"/api/notes/{note.pk}")
        with django_capture_on_commit_callbacks(execute=True):
            owner = signed_in(active_bob).delete(f"/api/notes/{note.pk}")
        gone = Client().get(f"/api/notes/{note.pk}")

        assert public.status_code == 200 and public.json()["data"]["body"] == "item"
        assert other.status_code == 403
        assert owner.status_code == 200
        assert gone.status_code == 404

    @pytest.mark.parametrize("raw", ["abc", "-1", "0", "1.5", "9" * 30])
    def test_malformed_note_ids_are_a_400(self, db, raw):
        assert Client().get(f"/api/notes/{raw}").status_code == 400

    def test_unknown_note_is_a_404(self, db):
        assert Client().get("/api/notes/999999999").status_code == 404

    def test_api_without_csrf_is_a_403(self, active_bob):
        client = signed_in(active_bob, enforce_csrf_checks=True)

        response = client.post("/api/notes", data=json.dumps({"body": "x"}), content_type="application/json")

        assert response.status_code == 403
        assert response.json()["success"] is False
        assert Note.objects.count() == 0

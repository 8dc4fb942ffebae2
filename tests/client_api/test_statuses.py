"""Statuses, the home timeline (Mastodon's id paging over the home page's inbox read) and
notifications (v1 and grouped v2) through the Mastodon API."""

from __future__ import annotations

import pytest

from client_api.models import NotificationDismissal, StatusIdempotency
from core.redis import get_redis
from feed import redis_keys as feed_keys
from feed.models import Note
from feed.services import note_create
from notifications.models import Notification
from social.controls import block_create, mute_create
from social.services import follow_create
from tests.client_api.conftest import Api, make_token

pytestmark = pytest.mark.django_db


def post(run_commits, api: Api, text: str, **headers) -> dict:
    response = run_commits(lambda: api.post("/api/v1/statuses", {"status": text}, headers=headers))
    assert response.status_code == 200, response.content
    return response.json()


class TestStatuses:
    def test_publish_get_and_delete(self, alice, api_alice, api_bob, run_commits) -> None:
        status = post(run_commits, api_alice, "Hello <world>")

        assert status["content"] == "<p>Hello &lt;world&gt;</p>"
        assert status["account"]["id"] == str(alice.pk)
        assert status["visibility"] == "public"
        assert api_bob.get(f"/api/v1/statuses/{status['id']}").json()["id"] == status["id"]
        deleted = run_commits(lambda: api_alice.delete(f"/api/v1/statuses/{status['id']}"))
        assert deleted.json()["text"] == "Hello <world>"
        assert api_bob.get(f"/api/v1/statuses/{status['id']}").status_code == 404

    def test_an_idempotency_key_publishes_once(self, alice, api_alice, run_commits) -> None:
        first = post(run_commits, api_alice, "Once", **{"Idempotency-Key": "k1"})
        again = post(run_commits, api_alice, "Once", **{"Idempotency-Key": "k1"})

        assert first["id"] == again["id"]
        assert Note.objects.filter(author=alice).count() == 1
        assert StatusIdempotency.objects.get().note_id == int(first["id"])

    @pytest.mark.parametrize(
        "data",
        [
            {"status": ""},
            {"status": "   "},
            {"status": "x" * 501},
            {"status": "hi", "spoiler_text": "x" * 501},
            {"status": "hi", "in_reply_to_id": "5"},
        ],
    )
    def test_bad_input_is_a_422_or_400_and_writes_nothing(self, api_alice, data: dict) -> None:
        response = api_alice.post("/api/v1/statuses", data)

        assert response.status_code in (400, 422)
        assert set(response.json()) == {"error"}
        assert not Note.objects.exists()

    def test_only_the_author_deletes(self, api_alice, api_bob, run_commits) -> None:
        status = post(run_commits, api_alice, "Mine")

        assert api_bob.delete(f"/api/v1/statuses/{status['id']}").status_code == 404
        assert Note.objects.get(pk=status["id"]).deleted_at is None

    def test_a_missing_status_is_a_404(self, api_alice) -> None:
        assert api_alice.get("/api/v1/statuses/0").status_code == 404
        assert api_alice.get("/api/v1/statuses/999999").json() == {"error": "Record not found"}

    def test_a_private_accounts_note_is_404_to_a_non_follower(self, alice, bob, api_alice, api_bob, run_commits) -> None:
        status = post(run_commits, api_bob, "Followers only")
        bob.approve_followers = True
        bob.save()

        assert api_alice.get(f"/api/v1/statuses/{status['id']}").status_code == 404


class TestHomeTimeline:
    @pytest.fixture
    def notes(self, alice, bob, api_bob, run_commits) -> list[str]:
        run_commits(lambda: follow_create(actor=alice, followee_id=bob.pk))
        return [post(run_commits, api_bob, f"Note {i}")["id"] for i in range(5)]

    def test_newest_first_with_own_notes(self, api_alice, notes, run_commits) -> None:
        mine = post(run_commits, api_alice, "Mine")["id"]

        ids = [status["id"] for status in api_alice.get("/api/v1/timelines/home").json()]

        assert ids == [mine, *reversed(notes)]

    def test_max_since_and_min_id_as_mastodon_defines_them(self, api_alice, notes) -> None:
        def ids(**params) -> list[str]:
            return [status["id"] for status in api_alice.get("/api/v1/timelines/home", params).json()]

        assert ids(max_id=notes[3]) == [notes[2], notes[1], notes[0]]
        assert ids(since_id=notes[1], limit=2) == [notes[4], notes[3]]  # the newest above since_id
        assert ids(min_id=notes[1], limit=2) == [notes[3], notes[2]]  # the ones just above min_id
        assert ids(max_id=notes[4], min_id=notes[1]) == [notes[3], notes[2]]

    def test_link_headers_page_through_every_note_once(self, api_alice, notes) -> None:
        seen: list[str] = []
        url = "/api/v1/timelines/home?limit=2"
        while url:
            response = api_alice.get(url)
            seen += [status["id"] for status in response.json()]
            links = {
                part.split(";")[1].strip()[5:-1]: part.split(";")[0].strip()[1:-1]
                for part in response.get("Link", "").split(",")
                if part
            }
            url = links.get("next", "").replace("http://testserver", "")
            if response.json():
                assert "prev" in links

        assert seen == list(reversed(notes))

    def test_a_muted_accounts_notes_stay_out(self, alice, bob, api_alice, notes, run_commits) -> None:
        run_commits(lambda: mute_create(actor=alice, target_id=bob.pk))

        assert api_alice.get("/api/v1/timelines/home").json() == []

    def test_a_bad_id_is_a_400(self, api_alice) -> None:
        response = api_alice.get("/api/v1/timelines/home", {"max_id": "abc"})

        assert response.status_code == 400
        assert set(response.json()) == {"error"}

    def test_needs_a_token(self, client) -> None:
        assert client.get("/api/v1/timelines/home").status_code == 401


class TestNotifications:
    @pytest.fixture
    def followed(self, alice, bob, charlie, run_commits) -> None:
        run_commits(lambda: follow_create(actor=bob, followee_id=alice.pk))
        run_commits(lambda: follow_create(actor=charlie, followee_id=alice.pk))

    def test_follows_are_follow_notifications(self, bob, charlie, api_alice, followed) -> None:
        body = api_alice.get("/api/v1/notifications").json()

        assert [(item["type"], item["account"]["id"]) for item in body] == [("follow", str(charlie.pk)), ("follow", str(bob.pk))]
        assert all(item["status"] is None for item in body)
        assert api_alice.get("/api/v1/notifications/unread_count").json() == {"count": 2}

    def test_types_and_exclude_types(self, api_alice, followed) -> None:
        assert len(api_alice.get("/api/v1/notifications", {"types[]": ["follow"]}).json()) == 2
        assert api_alice.get("/api/v1/notifications", {"types[]": ["follow_request"]}).json() == []
        assert api_alice.get("/api/v1/notifications", {"exclude_types[]": ["follow"]}).json() == []

    def test_one_dismiss_and_clear(self, alice, api_alice, followed) -> None:
        first, second = api_alice.get("/api/v1/notifications").json()

        assert api_alice.get(f"/api/v1/notifications/{first['id']}").json()["id"] == first["id"]
        api_alice.post(f"/api/v1/notifications/{first['id']}/dismiss")
        assert [item["id"] for item in api_alice.get("/api/v1/notifications").json()] == [second["id"]]
        api_alice.post("/api/v1/notifications/clear")
        assert api_alice.get("/api/v1/notifications").json() == []
        assert Notification.objects.filter(recipient=alice).count() == 2  # followfeed's own stay

    def test_someone_elses_notification_is_a_404(self, api_bob, api_alice, followed) -> None:
        theirs = api_alice.get("/api/v1/notifications").json()[0]["id"]

        assert api_bob.get(f"/api/v1/notifications/{theirs}").status_code == 404
        assert api_bob.post(f"/api/v1/notifications/{theirs}/dismiss").status_code == 404
        assert not NotificationDismissal.objects.exists()

    def test_grouped_v2(self, bob, charlie, api_alice, followed) -> None:
        body = api_alice.get("/api/v2/notifications").json()

        assert len(body["notification_groups"]) == 1
        group = body["notification_groups"][0]
        assert group["type"] == "follow" and group["notifications_count"] == 2
        assert set(group["sample_account_ids"]) == {str(bob.pk), str(charlie.pk)}
        accounts = api_alice.get(f"/api/v2/notifications/{group['group_key']}/accounts").json()
        assert {account["id"] for account in accounts} == {str(bob.pk), str(charlie.pk)}
        api_alice.post(f"/api/v2/notifications/{group['group_key']}/dismiss")
        assert api_alice.get("/api/v2/notifications").json()["notification_groups"] == []

    def test_an_unknown_group_is_a_404(self, api_alice) -> None:
        assert api_alice.get("/api/v2/notifications/follow-999999").status_code == 404
        assert api_alice.get("/api/v2/notifications/nonsense").status_code == 404


class TestVisibility:
    @pytest.mark.parametrize("visibility", ["public", "unlisted", "private", "direct"])
    def test_visibility_and_warning_round_trip(self, api_alice, run_commits, visibility: str) -> None:
        status = run_commits(
            lambda: api_alice.post("/api/v1/statuses", {"status": "hi", "visibility": visibility, "spoiler_text": "cw"})
        ).json()

        assert (status["visibility"], status["spoiler_text"], status["sensitive"]) == (visibility, "cw", True)
        assert api_alice.get(f"/api/v1/statuses/{status['id']}").json()["visibility"] == visibility

    def test_followers_only_and_direct_statuses_to_a_follower_and_a_stranger(
        self, alice, bob, api_alice, api_bob, api_charlie, run_commits
    ) -> None:
        run_commits(lambda: follow_create(actor=bob, followee_id=alice.pk))
        private = run_commits(lambda: api_alice.post("/api/v1/statuses", {"status": "friends", "visibility": "private"})).json()[
            "id"
        ]
        direct = run_commits(lambda: api_alice.post("/api/v1/statuses", {"status": "me", "visibility": "direct"})).json()["id"]

        assert api_bob.get(f"/api/v1/statuses/{private}").status_code == 200
        assert api_bob.get(f"/api/v1/statuses/{direct}").status_code == 404
        assert api_charlie.get(f"/api/v1/statuses/{private}").status_code == 404
        assert [s["id"] for s in api_charlie.get(f"/api/v1/accounts/{alice.pk}/statuses").json()] == []
        home = api_bob.get("/api/v1/timelines/home").json()
        assert [(s["id"], s["visibility"]) for s in home] == [(private, "private")]
        assert [s["id"] for s in api_alice.get(f"/api/v1/accounts/{alice.pk}/statuses", {"exclude_direct": "true"}).json()] == [
            private
        ]

    def test_the_home_timeline_shows_each_settings_and_counts_what_others_may_see(
        self, alice, bob, api_alice, api_bob, run_commits
    ) -> None:
        run_commits(lambda: follow_create(actor=bob, followee_id=alice.pk))
        posted = {
            visibility: run_commits(
                lambda visibility=visibility: api_alice.post(
                    "/api/v1/statuses", {"status": visibility, "visibility": visibility, "spoiler_text": f"cw {visibility}"}
                )
            ).json()["id"]
            for visibility in ("public", "unlisted", "private", "direct")
        }
        gone = run_commits(lambda: api_alice.post("/api/v1/statuses", {"status": "soon gone"})).json()["id"]
        run_commits(lambda: api_alice.delete(f"/api/v1/statuses/{gone}"))
        api_bob.get("/api/v1/timelines/home")  # the second read is served by the note cache

        home = api_bob.get("/api/v1/timelines/home").json()

        assert [(s["id"], s["visibility"], s["spoiler_text"]) for s in home] == [
            (posted[visibility], visibility, f"cw {visibility}") for visibility in ("private", "unlisted", "public")
        ]
        # Three notes others may see: the direct one and the deleted one are not counted.
        assert {s["account"]["statuses_count"] for s in home} == {3}

    def test_an_author_in_the_home_timeline_is_the_same_account_as_its_own_page_shows(
        self, alice, bob, api_alice, api_bob, run_commits
    ) -> None:
        run_commits(lambda: follow_create(actor=bob, followee_id=alice.pk))
        run_commits(lambda: api_alice.post("/api/v1/statuses", {"status": "hello"}))
        type(alice).objects.filter(pk=alice.pk).update(bio="Writes <short> notes", approve_followers=True)
        api_bob.get("/api/v1/timelines/home")  # the second read is served by the note cache

        account = api_bob.get("/api/v1/timelines/home").json()[0]["account"]

        assert account == api_bob.get(f"/api/v1/accounts/{alice.pk}").json()
        assert (account["locked"], account["note"], account["statuses_count"]) == (True, "<p>Writes &lt;short&gt; notes</p>", 1)
        assert account["created_at"].endswith("T00:00:00.000Z")

    def test_an_authors_changes_show_on_the_next_read_of_the_home_timeline(
        self, alice, bob, api_alice, api_bob, run_commits
    ) -> None:
        run_commits(lambda: follow_create(actor=bob, followee_id=alice.pk))
        run_commits(lambda: api_alice.post("/api/v1/statuses", {"status": "hello <b>"}))
        named = alice.display_name
        before = [api_bob.get("/api/v1/timelines/home").json()[0] for _ in range(2)][-1]  # the second: kept shapes
        before["account"]["fields"].append("a client's own change")

        def change() -> None:
            alice.display_name, alice.bio, alice.approve_followers = "Alice A.", "New <bio>", True
            alice.save()

        run_commits(change)
        after = api_bob.get("/api/v1/timelines/home").json()[0]

        assert (before["content"], before["account"]["display_name"], before["account"]["note"]) == (
            "<p>hello &lt;b&gt;</p>",
            named,
            "",
        )
        assert (after["content"], after["account"]["display_name"], after["account"]["note"], after["account"]["locked"]) == (
            "<p>hello &lt;b&gt;</p>",
            "Alice A.",
            "<p>New &lt;bio&gt;</p>",
            True,
        )
        assert after["account"]["fields"] == []

    def test_the_callers_own_statuses_of_every_visibility_are_in_its_home(self, api_alice, run_commits) -> None:
        posted = [
            run_commits(
                lambda visibility=visibility: api_alice.post("/api/v1/statuses", {"status": visibility, "visibility": visibility})
            ).json()["id"]
            for visibility in ("public", "unlisted", "private", "direct")
        ]

        home = api_alice.get("/api/v1/timelines/home").json()

        assert [(s["id"], s["visibility"]) for s in home] == list(
            zip(reversed(posted), ["direct", "private", "unlisted", "public"], strict=True)
        )

    def test_own_notes_between_a_followees_page_through_once_with_their_settings(
        self, alice, bob, api_alice, api_bob, run_commits
    ) -> None:
        run_commits(lambda: follow_create(actor=alice, followee_id=bob.pk))
        expected: list[tuple[str, str, str, str]] = []
        for index, visibility in enumerate(("direct", "private", "public", "unlisted")):
            mine = run_commits(
                lambda index=index, visibility=visibility: api_alice.post(
                    "/api/v1/statuses", {"status": f"alice {index}", "visibility": visibility, "spoiler_text": f"cw {index}"}
                )
            ).json()
            expected.append((mine["id"], visibility, f"cw {index}", "alice"))
            # More of bob's than a page holds after each: the inbox's page is full, and one of
            # alice's notes lies between its first and its last.
            for turn in range(2):
                theirs = post(run_commits, api_bob, f"bob {index}.{turn}")
                expected.append((theirs["id"], "public", "", "bob"))
        api_alice.get("/api/v1/timelines/home")  # the second read takes bob's notes from the note cache

        seen: list[tuple[str, str, str, str]] = []
        url = "/api/v1/timelines/home?limit=3"
        while url:
            response = api_alice.get(url)
            seen += [(s["id"], s["visibility"], s["spoiler_text"], s["account"]["username"]) for s in response.json()]
            next_links = [
                part.split(";")[0].strip()[1:-1] for part in response.get("Link", "").split(",") if 'rel="next"' in part
            ]
            url = next_links[0].replace("http://testserver", "") if next_links else ""

        assert seen == list(reversed(expected))
        assert [s["account"]["statuses_count"] for s in api_alice.get("/api/v1/timelines/home").json()[:3]] == [8, 8, 3]

    def test_reading_the_home_timeline_is_a_visit_that_keeps_the_inbox(self, user_factory, oauth_app, run_commits) -> None:
        # An account that only uses the API: never seen, so fan-out skipped its inbox.
        reader = user_factory.create(last_seen_at=None)
        make_token(reader, oauth_app, token="reader-token")

        run_commits(lambda: Api("reader-token").get("/api/v1/timelines/home"))

        reader.refresh_from_db()
        assert reader.last_seen_at is not None
        assert get_redis().exists(feed_keys.inbox_synced_key(reader.pk)) == 1

    def test_a_bad_visibility_is_a_4xx_and_writes_nothing(self, api_alice) -> None:
        response = api_alice.post("/api/v1/statuses", {"status": "hi", "visibility": "everyone"})

        assert response.status_code == 400
        assert not Note.objects.exists()


class TestNotificationsAndBlocks:
    def test_a_blocked_accounts_notifications_are_not_shown(self, alice, bob, charlie, api_alice, run_commits) -> None:
        run_commits(lambda: follow_create(actor=bob, followee_id=alice.pk))
        run_commits(lambda: follow_create(actor=charlie, followee_id=alice.pk))
        run_commits(lambda: block_create(actor=alice, target_id=bob.pk))

        v1 = api_alice.get("/api/v1/notifications").json()
        v2 = api_alice.get("/api/v2/notifications").json()

        assert [item["account"]["id"] for item in v1] == [str(charlie.pk)]
        assert [account["id"] for account in v2["accounts"]] == [str(charlie.pk)]


class TestQueryCounts:
    def test_the_home_timeline_costs_the_same_queries_whatever_the_authors(
        self, alice, user_factory, api_alice, run_commits, django_assert_num_queries
    ) -> None:
        authors = user_factory.create_batch(6)
        for author in authors:
            run_commits(lambda author=author: follow_create(actor=alice, followee_id=author.pk))
        for author in authors[:3]:
            run_commits(lambda author=author: note_create(author=author, body="first"))
        api_alice.get("/api/v1/timelines/home")  # fills the note cache
        # the token, the mutes, the inbox read (database: inbox not synced), the page's authors followed
        # now (social.visibility.hidden_authors), and own notes with the notes' settings and their
        # authors' counts in one (client_api.selectors.own_page_and_facts)
        with django_assert_num_queries(5):
            assert len(api_alice.get("/api/v1/timelines/home").json()) == 3

        for author in authors[3:]:
            run_commits(lambda author=author: note_create(author=author, body="second"))
        api_alice.get("/api/v1/timelines/home")
        with django_assert_num_queries(5):
            assert len(api_alice.get("/api/v1/timelines/home").json()) == 6


class TestTimes:
    def test_times_are_written_as_mastodon_writes_them(self) -> None:
        from datetime import UTC, datetime

        from client_api.formatting import iso, iso_day

        moment = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)

        assert (iso(moment), iso_day(moment), iso(None), iso_day(None)) == (
            "2026-01-02T03:04:05.678Z",
            "2026-01-02T00:00:00.000Z",
            None,
            None,
        )

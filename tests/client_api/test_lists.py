"""Lists through the Mastodon API: /api/v1/lists, its accounts, an account's lists and a list's
timeline; bad input is a 4xx that writes nothing, another reader's list is not found."""

from __future__ import annotations

import json

import pytest
from django.test.client import BOUNDARY, MULTIPART_CONTENT, encode_multipart

from feed.models import List, ListMember
from feed.selectors import list_timeline
from feed.services import note_create
from social.controls import block_create
from social.services import follow_create
from tests.client_api.conftest import Api, make_token

pytestmark = pytest.mark.django_db


@pytest.fixture
def crew(alice, bob, charlie, api_alice, run_commits) -> dict:
    """alice follows bob and charlie and has the list "crew" holding bob."""
    run_commits(lambda: follow_create(actor=alice, followee_id=bob.pk))
    run_commits(lambda: follow_create(actor=alice, followee_id=charlie.pk))
    created = run_commits(lambda: api_alice.post("/api/v1/lists", {"title": "crew"})).json()
    response = run_commits(lambda: api_alice.post(f"/api/v1/lists/{created['id']}/accounts", {"account_ids[]": [bob.pk]}))
    assert response.status_code == 200, response.content
    return created


def add_followed(alice, api_alice, crew, accounts, run_commits) -> str:
    """alice follows ``accounts`` and adds them to ``crew`` through the API; the list's accounts path."""
    for account in accounts:
        run_commits(lambda account=account: follow_create(actor=alice, followee_id=account.pk))
    path = f"/api/v1/lists/{crew['id']}/accounts"
    run_commits(lambda: api_alice.post(path, {"account_ids[]": [account.pk for account in accounts]}))
    return path


def state() -> tuple[list, list]:
    """Every list and membership row (what bad input must leave as it was)."""
    return (
        list(List.objects.order_by("pk").values_list("pk", "title", "replies_policy", "exclusive")),
        list(ListMember.objects.order_by("pk").values_list("list_id", "account_id")),
    )


class TestLists:
    def test_create_read_rename_and_delete(self, api_alice, run_commits) -> None:
        created = run_commits(
            lambda: api_alice.post("/api/v1/lists", {"title": "ham burglars", "replies_policy": "none", "exclusive": "true"})
        ).json()

        assert created == {"id": created["id"], "title": "ham burglars", "replies_policy": "none", "exclusive": True}
        assert api_alice.get("/api/v1/lists").json() == [created]

        renamed = run_commits(lambda: api_alice.put(f"/api/v1/lists/{created['id']}", {"title": "fry kids"})).json()

        assert renamed == {**created, "title": "fry kids"}
        assert api_alice.get(f"/api/v1/lists/{created['id']}").json() == renamed

        assert run_commits(lambda: api_alice.delete(f"/api/v1/lists/{created['id']}")).json() == {}
        assert api_alice.get("/api/v1/lists").json() == []
        assert api_alice.get(f"/api/v1/lists/{created['id']}").status_code == 404

    @pytest.mark.parametrize(
        "data",
        [{}, {"title": ""}, {"title": "   "}, {"title": "x" * 101}, {"title": "ok", "replies_policy": "everyone"}],
        ids=["no title", "empty", "blank", "too long", "unknown policy"],
    )
    def test_bad_input_to_create_is_a_422_and_writes_nothing(self, api_alice, data) -> None:
        response = api_alice.post("/api/v1/lists", data)

        assert response.status_code == 422
        assert set(response.json()) == {"error"}
        assert not List.objects.exists()

    def test_bad_input_to_update_is_a_422_and_changes_nothing(self, api_alice, crew) -> None:
        before = state()

        assert api_alice.put(f"/api/v1/lists/{crew['id']}", {"title": ""}).status_code == 422
        assert api_alice.put(f"/api/v1/lists/{crew['id']}", {"replies_policy": "x"}).status_code == 422
        assert state() == before

    @pytest.mark.parametrize("path", ["/api/v1/lists/{id}", "/api/v1/lists/{id}/accounts", "/api/v1/timelines/list/{id}"])
    def test_another_readers_list_or_a_malformed_id_is_not_found(self, api_bob, crew, path) -> None:
        before = state()

        for list_id in (crew["id"], "abc", "999999", "-1"):
            response = api_bob.get(path.format(id=list_id))
            assert response.status_code == 404, (list_id, response.content)
            assert response.json() == {"error": "Record not found"}
        assert api_bob.put(path.format(id=crew["id"]), {"title": "mine"}).status_code in (404, 405)
        assert api_bob.delete(path.format(id=crew["id"])).status_code in (404, 405)
        assert state() == before

    def test_scopes_read_lists_and_write_lists(self, alice, oauth_app, crew) -> None:
        make_token(alice, oauth_app, token="read-lists", scope="read:lists")
        make_token(alice, oauth_app, token="statuses-only", scope="read:statuses write:statuses")
        reader, other = Api("read-lists"), Api("statuses-only")
        before = state()

        assert reader.get("/api/v1/lists").status_code == 200
        assert reader.get(f"/api/v1/timelines/list/{crew['id']}").status_code == 200
        assert reader.post("/api/v1/lists", {"title": "no"}).status_code == 403
        assert reader.delete(f"/api/v1/lists/{crew['id']}").status_code == 403
        assert other.get("/api/v1/lists").status_code == 403
        assert other.get(f"/api/v1/lists/{crew['id']}/accounts").status_code == 403
        assert Api(None).get("/api/v1/lists").status_code == 401
        assert state() == before


class TestListAccounts:
    def test_add_list_and_remove(self, api_alice, bob, charlie, crew, run_commits) -> None:
        path = f"/api/v1/lists/{crew['id']}/accounts"
        run_commits(lambda: api_alice.post(path, {"account_ids[]": [charlie.pk]}))

        assert [account["id"] for account in api_alice.get(path).json()] == [str(charlie.pk), str(bob.pk)]
        assert api_alice.get(f"/api/v1/accounts/{bob.pk}/lists").json() == [api_alice.get(f"/api/v1/lists/{crew['id']}").json()]

        assert run_commits(lambda: api_alice.delete(path, {"account_ids[]": [bob.pk]})).json() == {}

        assert [account["id"] for account in api_alice.get(path).json()] == [str(charlie.pk)]
        assert api_alice.get(f"/api/v1/accounts/{bob.pk}/lists").json() == []

    def test_pages_with_link_headers_and_limit_0_is_everyone(
        self, alice, bob, api_alice, crew, run_commits, user_factory
    ) -> None:
        others = user_factory.create_batch(3)
        path = add_followed(alice, api_alice, crew, others, run_commits)
        everyone = sorted([o.pk for o in others] + [bob.pk], reverse=True)

        first = api_alice.get(path, {"limit": 2})
        second = api_alice.get(path, {"limit": 2, "max_id": first.json()[-1]["id"]})
        above = api_alice.get(path, {"limit": 2, "min_id": second.json()[0]["id"]})

        assert [int(a["id"]) for a in first.json()] == everyone[:2]
        assert f"max_id={everyone[1]}&limit=2" in first["Link"] and 'rel="next"' in first["Link"]
        assert [int(a["id"]) for a in second.json()] == everyone[2:]
        assert 'rel="prev"' in second["Link"]
        assert [int(a["id"]) for a in above.json()] == everyone[:2]
        assert [int(a["id"]) for a in api_alice.get(path, {"limit": 0}).json()] == everyone
        assert "Link" not in api_alice.get(path, {"limit": 0})

    def test_an_account_not_followed_is_a_422_and_nothing_is_added(self, api_alice, crew, user_factory) -> None:
        stranger = user_factory()
        before = state()

        response = api_alice.post(f"/api/v1/lists/{crew['id']}/accounts", {"account_ids[]": [stranger.pk]})

        assert response.status_code == 422
        assert set(response.json()) == {"error"}
        assert state() == before

    @pytest.mark.parametrize(
        ("data", "added", "removed"),
        [({}, 422, 422), ({"account_ids[]": ["abc"]}, 400, 400), ({"account_ids[]": ["999999"]}, 404, 200)],
        ids=["none", "malformed", "unknown"],
    )
    def test_bad_account_ids_are_a_4xx_and_change_nothing(self, api_alice, crew, data, added, removed) -> None:
        """An unknown account is not found when added; removing it removes nothing, as on Mastodon."""
        before = state()
        path = f"/api/v1/lists/{crew['id']}/accounts"

        assert api_alice.post(path, data).status_code == added
        assert api_alice.delete(path, data).status_code == removed
        assert state() == before

    def test_the_lists_of_an_unknown_account_are_not_found(self, api_alice) -> None:
        assert api_alice.get("/api/v1/accounts/999999/lists").status_code == 404


class TestListTimeline:
    def test_pages_as_the_home_timeline(self, alice, bob, charlie, api_alice, crew, run_commits) -> None:
        notes = [run_commits(lambda i=i: note_create(author=bob, body=f"b{i}")) for i in range(5)]
        run_commits(lambda: note_create(author=charlie, body="not in the list"))
        ids = [str(note.pk) for note in reversed(notes)]
        path = f"/api/v1/timelines/list/{crew['id']}"

        def read(params: dict) -> list[str]:
            return [status["id"] for status in api_alice.get(path, params).json()]

        assert read({}) == ids
        assert read({"limit": 2}) == ids[:2]
        assert read({"max_id": ids[1], "limit": 2}) == ids[2:4]
        assert read({"since_id": ids[3], "limit": 2}) == ids[:2]
        assert read({"min_id": ids[3], "limit": 2}) == ids[1:3]
        assert 'rel="next"' in api_alice.get(path, {"limit": 2})["Link"]
        assert api_alice.get(path, {"max_id": "abc"}).status_code == 400

    def test_a_read_asks_for_the_kept_timeline_and_the_next_read_uses_it(self, alice, bob, api_alice, crew, run_commits) -> None:
        note = run_commits(lambda: note_create(author=bob, body="kept"))
        path = f"/api/v1/timelines/list/{crew['id']}"

        def kept() -> bool | None:
            return list_timeline(reader_id=alice.pk, list_id=int(crew["id"]), cursor=None, limit=5).kept

        assert kept() is False
        assert [s["id"] for s in run_commits(lambda: api_alice.get(path)).json()] == [str(note.pk)]
        assert kept() is True
        later = run_commits(lambda: note_create(author=bob, body="delivered to it"))
        assert [s["id"] for s in api_alice.get(path).json()] == [str(later.pk), str(note.pk)]

    def test_a_member_who_blocks_the_reader_is_gone_from_it(self, alice, bob, api_alice, crew, run_commits) -> None:
        run_commits(lambda: note_create(author=bob, body="hello"))

        run_commits(lambda: block_create(actor=bob, target_id=alice.pk))

        assert api_alice.get(f"/api/v1/timelines/list/{crew['id']}").json() == []
        assert api_alice.get(f"/api/v1/lists/{crew['id']}/accounts").json() == []


class TestInputTheChecksMissed:
    """Found by trying to break the API: each a 4xx that writes nothing, never a 500."""

    @pytest.mark.parametrize("value", ["--5", "²", "٣", "1-2"])
    @pytest.mark.parametrize("path", ["/api/v1/timelines/home", "/api/v1/notifications", "/api/v1/timelines/list/{id}"])
    def test_a_paging_id_of_other_than_ascii_digits_is_a_400(self, api_alice, crew, path, value) -> None:
        response = api_alice.get(path.format(id=crew["id"]), {"max_id": value})

        assert response.status_code == 400, response.content
        assert response.json() == {"error": "max_id must be an id"}

    def test_a_head_request_reads_and_writes_nothing(self, api_alice, crew, run_commits) -> None:
        before = state()

        created = run_commits(lambda: api_alice.client.head("/api/v1/lists?title=by-head", headers=api_alice.headers))
        renamed = run_commits(
            lambda: api_alice.client.head(f"/api/v1/lists/{crew['id']}?title=renamed&exclusive=true", headers=api_alice.headers)
        )

        assert (created.status_code, renamed.status_code) == (200, 200)
        assert state() == before

    def test_a_head_request_needs_only_the_read_scope(self, alice, oauth_app, crew) -> None:
        make_token(alice, oauth_app, token="alice-reads-lists", scope="read:lists")
        reader = Api("alice-reads-lists")

        assert reader.client.head(f"/api/v1/lists/{crew['id']}/accounts", headers=reader.headers).status_code == 200

    def test_too_many_form_fields_is_a_400_and_adds_nobody(self, api_alice, crew, charlie, run_commits) -> None:
        before = state()

        response = run_commits(
            lambda: api_alice.post(f"/api/v1/lists/{crew['id']}/accounts", {"account_ids[]": [charlie.pk] * 1001})
        )

        assert response.status_code == 400, response.content
        assert response.json() == {"error": "The request could not be understood."}
        assert state() == before

    def test_a_body_over_the_limit_is_a_413_and_creates_nothing(self, api_alice, settings) -> None:
        before = state()

        response = api_alice.post("/api/v1/lists", {"title": "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)})

        assert response.status_code == 413, response.content
        assert response.json() == {
            "error": f"The request body is larger than the {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes this site takes."
        }
        assert state() == before

    @pytest.mark.parametrize(
        "title", [{"a": 1}, True, ["a", {"b": 2}], ["a", "b"], 1.5, "crew\u202eevil", "two\nlines", "two\u2028lines"]
    )
    def test_a_title_that_is_not_one_line_of_plain_text_is_a_422_and_creates_nothing(self, api_alice, title) -> None:
        before = state()

        response = api_alice.post("/api/v1/lists", {"title": title}, content_type="application/json")

        assert response.status_code == 422, response.content
        assert set(response.json()) == {"error"}
        assert state() == before

    @pytest.mark.parametrize("value", ["maybe", "2", {"x": 1}])
    def test_exclusive_other_than_true_or_false_is_a_422_and_changes_nothing(self, api_alice, crew, value) -> None:
        path = f"/api/v1/lists/{crew['id']}"
        api_alice.put(path, {"exclusive": "true"})
        before = state()

        response = api_alice.client.put(
            path, json.dumps({"exclusive": value}), content_type="application/json", headers=api_alice.headers
        )

        assert response.status_code == 422, response.content
        assert response.json() == {"error": "Validation failed: exclusive must be true or false"}
        assert state() == before and api_alice.get(path).json()["exclusive"] is True

    def test_a_put_with_a_multipart_body_is_read(self, api_alice, crew) -> None:
        path = f"/api/v1/lists/{crew['id']}"
        body = encode_multipart(BOUNDARY, {"title": "renamed", "exclusive": "1"})

        response = api_alice.client.put(path, body, content_type=MULTIPART_CONTENT, headers=api_alice.headers)

        assert response.status_code == 200, response.content
        assert (response.json()["title"], response.json()["exclusive"]) == ("renamed", True)

    def test_a_page_above_the_oldest_member_offers_no_older_page(self, alice, api_alice, crew, run_commits, user_factory) -> None:
        path = add_followed(alice, api_alice, crew, user_factory.create_batch(2), run_commits)
        oldest_two = sorted(int(member["id"]) for member in api_alice.get(path, {"limit": 0}).json())[:2]

        bottom = api_alice.get(path, {"limit": 2, "min_id": 0})

        assert [int(a["id"]) for a in bottom.json()] == sorted(oldest_two, reverse=True)
        assert 'rel="next"' not in bottom.get("Link", "")
        assert 'rel="prev"' in bottom["Link"]

    def test_a_repeated_title_in_a_form_is_a_422(self, api_alice) -> None:
        before = state()

        response = api_alice.post("/api/v1/lists", {"title[]": ["a", "b"]})

        assert response.status_code == 422, response.content
        assert state() == before

    def test_since_id_gives_the_newest_members_above_it(self, alice, api_alice, crew, run_commits, user_factory) -> None:
        path = add_followed(alice, api_alice, crew, user_factory.create_batch(4), run_commits)
        everyone = sorted((int(member["id"]) for member in api_alice.get(path, {"limit": 0}).json()), reverse=True)

        newest = api_alice.get(path, {"limit": 2, "since_id": everyone[-1]}).json()
        above = api_alice.get(path, {"limit": 2, "min_id": everyone[-1]}).json()

        assert [int(member["id"]) for member in newest] == everyone[:2]
        assert [int(member["id"]) for member in above] == everyone[-3:-1]

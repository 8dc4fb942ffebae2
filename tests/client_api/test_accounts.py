"""Accounts, relationships, follows, blocks, mutes, follow requests and suggestions through the
Mastodon API: the same services as the pages, the same privacy rules, bad input a 4xx."""

from __future__ import annotations

import pytest

from social.models import Block, Follow, FollowRequest, Mute
from social.services import follow_create
from tests.client_api.conftest import Api

pytestmark = pytest.mark.django_db

RELATIONSHIP_FIELDS = {
    "id",
    "following",
    "showing_reblogs",
    "notifying",
    "languages",
    "followed_by",
    "blocking",
    "blocked_by",
    "muting",
    "muting_notifications",
    "requested",
    "requested_by",
    "domain_blocking",
    "endorsed",
    "note",
}


def follow_via_api(run_commits, api: Api, user) -> dict:
    response = run_commits(lambda: api.post(f"/api/v1/accounts/{user.pk}/follow"))
    assert response.status_code == 200, response.content
    return response.json()


class TestAccounts:
    def test_verify_credentials_is_the_tokens_account_with_source(self, alice, api_alice) -> None:
        body = api_alice.get("/api/v1/accounts/verify_credentials").json()

        assert body["id"] == str(alice.pk)
        assert body["username"] == body["acct"] == "alice"
        assert body["source"]["privacy"] == "public"
        assert body["source"]["follow_requests_count"] == 0

    def test_an_account_by_id_and_by_lookup(self, bob, api_alice) -> None:
        by_id = api_alice.get(f"/api/v1/accounts/{bob.pk}").json()
        by_name = api_alice.get("/api/v1/accounts/lookup", {"acct": "bob@testserver"}).json()

        assert by_id["id"] == by_name["id"] == str(bob.pk)

    @pytest.mark.parametrize(
        "path",
        [
            "/api/v1/accounts/999999",
            "/api/v1/accounts/abc",
            "/api/v1/accounts/lookup?acct=nobody",
            "/api/v1/accounts/lookup?acct=bob@elsewhere.example",
        ],
    )
    def test_unknown_accounts_are_404(self, bob, api_alice, path: str) -> None:
        response = api_alice.get(path)

        assert response.status_code == 404
        assert response.json() == {"error": "Record not found"}

    def test_an_account_that_blocks_you_is_404_everywhere(self, alice, bob, api_alice, run_commits) -> None:
        Block.objects.create(blocker=bob, blocked=alice)

        assert api_alice.get(f"/api/v1/accounts/{bob.pk}").status_code == 404
        assert api_alice.get("/api/v1/accounts/lookup", {"acct": "bob"}).status_code == 404
        assert api_alice.get(f"/api/v1/accounts/{bob.pk}/statuses").status_code == 404
        assert api_alice.get(f"/api/v1/accounts/{bob.pk}/followers").status_code == 404
        assert api_alice.get("/api/v1/accounts", {"id[]": [bob.pk]}).json() == []
        assert api_alice.post(f"/api/v1/accounts/{bob.pk}/follow").status_code == 404
        assert not Follow.objects.filter(follower=alice, followee=bob).exists()

    def test_many_accounts_by_id(self, alice, bob, charlie, api_alice) -> None:
        body = api_alice.get("/api/v1/accounts", {"id[]": [bob.pk, charlie.pk, 999999]}).json()

        assert [account["id"] for account in body] == [str(bob.pk), str(charlie.pk)]

    def test_a_malformed_id_list_is_a_400(self, api_alice) -> None:
        response = api_alice.get("/api/v1/accounts/relationships", {"id[]": ["x"]})

        assert response.status_code == 400
        assert "error" in response.json()


class TestRelationships:
    def test_every_field_and_both_directions(self, alice, bob, api_alice, api_bob, run_commits) -> None:
        follow_via_api(run_commits, api_bob, alice)

        body = api_alice.get("/api/v1/accounts/relationships", {"id[]": [bob.pk]}).json()

        assert len(body) == 1
        assert set(body[0]) == RELATIONSHIP_FIELDS
        assert body[0]["followed_by"] is True
        assert body[0]["following"] is False

    def test_familiar_followers_from_a_json_body_on_get(
        self, alice, bob, charlie, api_alice, api_bob, api_charlie, run_commits
    ) -> None:
        follow_via_api(run_commits, api_alice, bob)
        follow_via_api(run_commits, api_bob, charlie)

        body = api_alice.get(
            "/api/v1/accounts/familiar_followers", {"id": [str(charlie.pk)]}, content_type="application/json"
        ).json()

        assert [item["id"] for item in body] == [str(charlie.pk)]
        assert [account["id"] for account in body[0]["accounts"]] == [str(bob.pk)]


class TestFamiliarFollowersAndBlocks:
    def test_an_account_in_a_block_shows_no_familiar_followers(
        self, alice, bob, charlie, api_alice, api_bob, api_charlie, run_commits
    ) -> None:
        follow_via_api(run_commits, api_alice, bob)
        follow_via_api(run_commits, api_bob, charlie)
        run_commits(lambda: api_charlie.post(f"/api/v1/accounts/{alice.pk}/block"))

        body = api_alice.get("/api/v1/accounts/familiar_followers", {"id[]": [charlie.pk]}).json()

        assert body == [{"id": str(charlie.pk), "accounts": []}]


class TestFollows:
    def test_follow_and_unfollow(self, alice, bob, api_alice, run_commits) -> None:
        assert follow_via_api(run_commits, api_alice, bob)["following"] is True

        after = run_commits(lambda: api_alice.post(f"/api/v1/accounts/{bob.pk}/unfollow")).json()

        assert after["following"] is False
        assert not Follow.objects.filter(follower=alice, followee=bob).exists()

    def test_following_a_private_account_is_a_request(self, alice, bob, api_alice, api_bob, run_commits) -> None:
        bob.approve_followers = True
        bob.save()

        relation = follow_via_api(run_commits, api_alice, bob)

        assert relation["requested"] is True and relation["following"] is False
        assert [account["id"] for account in api_bob.get("/api/v1/follow_requests").json()] == [str(alice.pk)]
        authorized = run_commits(lambda: api_bob.post(f"/api/v1/follow_requests/{alice.pk}/authorize")).json()
        assert authorized["followed_by"] is True
        assert Follow.objects.filter(follower=alice, followee=bob).exists()

    def test_rejecting_a_request(self, alice, bob, api_alice, api_bob, run_commits) -> None:
        bob.approve_followers = True
        bob.save()
        follow_via_api(run_commits, api_alice, bob)

        rejected = run_commits(lambda: api_bob.post(f"/api/v1/follow_requests/{alice.pk}/reject"))

        assert rejected.status_code == 200
        assert rejected.json()["requested_by"] is False
        assert not FollowRequest.objects.exists()

    def test_rejecting_no_request_is_a_404(self, alice, api_bob) -> None:
        assert api_bob.post(f"/api/v1/follow_requests/{alice.pk}/reject").status_code == 404

    def test_following_yourself_is_a_4xx_and_writes_nothing(self, alice, api_alice) -> None:
        response = api_alice.post(f"/api/v1/accounts/{alice.pk}/follow")

        assert response.status_code == 400
        assert "error" in response.json()
        assert not Follow.objects.exists()

    def test_remove_from_followers(self, alice, bob, api_alice, api_bob, run_commits) -> None:
        follow_via_api(run_commits, api_alice, bob)

        body = run_commits(lambda: api_bob.post(f"/api/v1/accounts/{alice.pk}/remove_from_followers")).json()

        assert body["followed_by"] is False
        assert not Follow.objects.filter(follower=alice, followee=bob).exists()

    def test_a_private_accounts_lists_and_notes_are_empty_to_a_non_follower(
        self, alice, bob, charlie, api_alice, api_charlie, run_commits
    ) -> None:
        follow_via_api(run_commits, api_charlie, bob)
        bob.approve_followers = True
        bob.save()

        assert api_alice.get(f"/api/v1/accounts/{bob.pk}/followers").json() == []
        assert api_alice.get(f"/api/v1/accounts/{bob.pk}/statuses").json() == []
        assert [account["id"] for account in api_charlie.get(f"/api/v1/accounts/{bob.pk}/followers").json()] == [str(charlie.pk)]

    def test_follower_lists_page_with_link_headers(self, alice, user_factory, api_alice, run_commits) -> None:
        followers = user_factory.create_batch(3)
        for user in followers:
            run_commits(lambda user=user: follow_create(actor=user, followee_id=alice.pk))

        first = api_alice.get(f"/api/v1/accounts/{alice.pk}/followers", {"limit": 2})
        assert len(first.json()) == 2
        next_url = first["Link"].split(">")[0].lstrip("<")
        second = api_alice.get(next_url.replace("http://testserver", ""))

        ids = [a["id"] for a in first.json()] + [a["id"] for a in second.json()]
        assert sorted(ids) == sorted(str(user.pk) for user in followers)


def links(response) -> dict[str, str]:
    """``{rel: path and query}`` of a response's ``Link`` header."""
    found = {}
    for part in response.get("Link", "").split(", "):
        if part:
            url, rel = part.split(">; rel=")
            found[rel.strip('"')] = url.lstrip("<").replace("http://testserver", "")
    return found


class TestListLinks:
    """Every account list answers ``Link`` with ``next`` (``max_id``) first and ``prev`` (``min_id``),
    and ``min_id`` gives the page just above: a client pages down and back up to the same pages."""

    @staticmethod
    def down_and_back(api, path: str) -> tuple[list[list[str]], list[list[str]]]:
        down, response = [], api.get(path, {"limit": 2})
        while True:
            down.append([account["id"] for account in response.json()])
            if "next" not in links(response):
                break
            response = api.get(links(response)["next"])
        up = []
        while "prev" in links(response):
            response = api.get(links(response)["prev"])
            if not response.json():
                break
            up.append([account["id"] for account in response.json()])
        return down, up[::-1]

    def test_followers_following_blocks_mutes_and_requests(self, alice, user_factory, api_alice, run_commits) -> None:
        others = user_factory.create_batch(5)
        for user in others:
            run_commits(lambda user=user: follow_create(actor=user, followee_id=alice.pk))
            run_commits(lambda user=user: follow_create(actor=alice, followee_id=user.pk))
        requesters = user_factory.create_batch(5)
        type(alice).objects.filter(pk=alice.pk).update(approve_followers=True)
        for user in requesters:
            run_commits(lambda user=user: follow_create(actor=user, followee_id=alice.pk))
        extra = user_factory.create_batch(5)
        for user in extra:
            run_commits(lambda user=user: api_alice.post(f"/api/v1/accounts/{user.pk}/mute"))
            run_commits(lambda user=user: api_alice.post(f"/api/v1/accounts/{user.pk}/block"))

        for path, accounts in [
            (f"/api/v1/accounts/{alice.pk}/followers", others),
            (f"/api/v1/accounts/{alice.pk}/following", others),
            ("/api/v1/blocks", extra),
            ("/api/v1/mutes", extra),
            ("/api/v1/follow_requests", requesters),
        ]:
            down, up = self.down_and_back(api_alice, path)

            assert sorted(pk for page in down for pk in page) == sorted(str(user.pk) for user in accounts), path
            assert [len(page) for page in down] == [2, 2, 1], path
            assert up == down[:-1], path

    def test_a_page_link_lists_next_before_prev(self, alice, user_factory, api_alice, run_commits) -> None:
        for user in user_factory.create_batch(3):
            run_commits(lambda user=user: follow_create(actor=user, followee_id=alice.pk))

        response = api_alice.get(f"/api/v1/accounts/{alice.pk}/followers", {"limit": 2})

        assert list(links(response)) == ["next", "prev"]
        assert "max_id=" in links(response)["next"] and "min_id=" in links(response)["prev"]

    def test_a_min_id_that_is_not_a_position_is_a_400(self, alice, api_alice) -> None:
        response = api_alice.get(f"/api/v1/accounts/{alice.pk}/followers", {"min_id": "12345"})

        assert response.status_code == 400
        assert "error" in response.json()


class TestBlocksAndMutes:
    def test_block_lists_and_unblock(self, alice, bob, api_alice, run_commits) -> None:
        assert run_commits(lambda: api_alice.post(f"/api/v1/accounts/{bob.pk}/block")).json()["blocking"] is True
        assert [account["id"] for account in api_alice.get("/api/v1/blocks").json()] == [str(bob.pk)]

        assert run_commits(lambda: api_alice.post(f"/api/v1/accounts/{bob.pk}/unblock")).json()["blocking"] is False
        assert not Block.objects.exists()

    def test_mute_with_a_duration(self, alice, bob, api_alice, run_commits) -> None:
        body = run_commits(lambda: api_alice.post(f"/api/v1/accounts/{bob.pk}/mute", {"duration": "3600"})).json()

        assert body["muting"] is True
        mutes = api_alice.get("/api/v1/mutes").json()
        assert [account["id"] for account in mutes] == [str(bob.pk)]
        assert mutes[0]["mute_expires_at"] is not None
        assert run_commits(lambda: api_alice.post(f"/api/v1/accounts/{bob.pk}/unmute")).json()["muting"] is False

    @pytest.mark.parametrize("duration", ["soon", "-5"])
    def test_a_bad_duration_is_a_422_and_writes_nothing(self, bob, api_alice, duration: str) -> None:
        response = api_alice.post(f"/api/v1/accounts/{bob.pk}/mute", {"duration": duration})

        assert response.status_code == 422
        assert not Mute.objects.exists()


class TestSuggestions:
    def test_v2_and_v1_are_lists(self, alice, bob, api_alice) -> None:
        v2 = api_alice.get("/api/v2/suggestions")
        v1 = api_alice.get("/api/v1/suggestions")

        assert v2.status_code == v1.status_code == 200
        assert all({"source", "account"} <= set(item) for item in v2.json())
        assert isinstance(v1.json(), list)


class TestErrors:
    def test_an_unknown_api_address_is_mastodons_404(self, api_alice) -> None:
        response = api_alice.get("/api/v1/bookmarks")

        assert response.status_code == 404
        assert response.json() == {"error": "Record not found"}

    def test_a_wrong_method_is_a_405(self, api_alice) -> None:
        response = api_alice.get("/api/v1/statuses")

        assert response.status_code == 405
        assert "error" in response.json()

    def test_cors_exposes_link(self, client) -> None:
        response = client.options(
            "/api/v1/timelines/home", headers={"Origin": "https://app.example", "Access-Control-Request-Method": "GET"}
        )

        assert response["Access-Control-Allow-Origin"] in ("*", "https://app.example")
        plain = client.get("/api/v1/instance", headers={"Origin": "https://app.example"})
        assert "Link" in plain["Access-Control-Expose-Headers"]

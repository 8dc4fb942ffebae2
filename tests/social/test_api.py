"""The JSON API: the seed's contract, bad input (C18, C19), sign-in rules (C20), CSRF."""

import pytest
from django.test import Client

from core.models import OutboxEntry
from social import redis_keys, services
from social.models import Follow
from tests.support.accounts import signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice_client(alice):
    client = signed_in(alice)
    return client


def nothing_written(alice, redis_client):
    return (
        not Follow.objects.filter(follower=alice).exists()
        and not OutboxEntry.objects.exists()
        and redis_client.scard(redis_keys.following_set_key(alice.pk)) == 0
    )


class TestFollowToggle:
    def test_follow_then_unfollow(self, alice_client, alice, bob, redis_client, django_capture_on_commit_callbacks):
        # Each request commits before the next, as in production.
        with django_capture_on_commit_callbacks(execute=True):
            followed = alice_client.put(f"/api/follow/{bob.pk}/true")
        checked = alice_client.get(f"/api/follow/or/not/{bob.pk}")
        detail = Client().get(f"/api/users/{bob.pk}")
        with django_capture_on_commit_callbacks(execute=True):
            unfollowed = alice_client.put(f"/api/follow/{bob.pk}/false")
        checked_after = alice_client.get(f"/api/follow/or/not/{bob.pk}")
        detail_after = Client().get(f"/api/users/{bob.pk}")

        assert followed.status_code == 200
        assert followed.json()["success"] is True
        assert followed.json()["errorMsg"] is None
        assert followed.json()["data"]["changed"] is True
        assert followed.json()["data"]["following"] is True
        assert checked.json()["data"] is True
        assert detail.json()["data"]["followers"] == 1
        assert unfollowed.json()["data"]["changed"] is True
        assert unfollowed.json()["data"]["following"] is False
        assert checked_after.json()["data"] is False
        assert detail_after.json()["data"]["followers"] == 0
        assert not Follow.objects.exists()

    def test_self_follow_is_400_and_writes_nothing(self, alice_client, alice, redis_client):
        response = alice_client.put(f"/api/follow/{alice.pk}/true")

        assert response.status_code == 400
        assert response.json()["success"] is False
        assert response.json()["errorMsg"] == "You cannot follow yourself."
        assert nothing_written(alice, redis_client)

    @pytest.mark.parametrize(("raw", "status"), [("abc", 400), ("-1", 400), ("0", 400), ("1.5", 400), ("999999999", 404)])
    def test_malformed_or_unknown_id_is_4xx_and_writes_nothing(self, alice_client, alice, redis_client, raw, status):
        response = alice_client.put(f"/api/follow/{raw}/true")

        assert response.status_code == status
        assert response.json()["success"] is False
        assert nothing_written(alice, redis_client)

    def test_deactivated_target_is_404(self, alice_client, alice, user_factory, redis_client):
        gone = user_factory(is_active=False)

        response = alice_client.put(f"/api/follow/{gone.pk}/true")

        assert response.status_code == 404
        assert nothing_written(alice, redis_client)

    def test_bad_flag_is_400(self, alice_client, alice, bob, redis_client):
        response = alice_client.put(f"/api/follow/{bob.pk}/maybe")

        assert response.status_code == 400
        assert nothing_written(alice, redis_client)

    def test_signed_out_is_401(self, bob):
        response = Client().put(f"/api/follow/{bob.pk}/true")

        assert response.status_code == 401
        assert response.json()["errorMsg"] == "Sign in first."
        assert not Follow.objects.exists()

    def test_missing_csrf_token_is_403(self, alice, bob):
        client = signed_in(alice, enforce_csrf_checks=True)

        response = client.put(f"/api/follow/{bob.pk}/true")

        assert response.status_code == 403
        assert response.json()["success"] is False
        assert not Follow.objects.exists()

    def test_get_is_405(self, alice_client, bob):
        assert alice_client.get(f"/api/follow/{bob.pk}/true").status_code == 405


class TestLists:
    def test_followers_and_following_are_newest_first_with_cursor(self, alice, bob, charlie, django_capture_on_commit_callbacks):
        from datetime import timedelta

        with django_capture_on_commit_callbacks(execute=True):
            services.follow_create(actor=alice, followee_id=bob.pk)
            services.follow_create(actor=charlie, followee_id=bob.pk)
        Follow.objects.filter(follower=alice).update(
            created_at=Follow.objects.get(follower=alice).created_at - timedelta(seconds=5)
        )
        from social.mirror import mirror_apply_pairs

        mirror_apply_pairs([(alice.pk, bob.pk)])

        first = Client().get(f"/api/users/{bob.pk}/followers?limit=1").json()["data"]
        second = Client().get(f"/api/users/{bob.pk}/followers?limit=1&cursor={first['next_cursor']}").json()["data"]
        following = Client().get(f"/api/users/{alice.pk}/following").json()["data"]

        assert [u["id"] for u in first["list"]] == [charlie.pk]
        assert [u["id"] for u in second["list"]] == [alice.pk]
        assert second["next_cursor"] is None
        assert [u["username"] for u in following["list"]] == ["bob"]

    @pytest.mark.parametrize("query", ["cursor=nonsense", "limit=0", "limit=101", "limit=x"])
    def test_bad_paging_input_is_400(self, bob, query):
        response = Client().get(f"/api/users/{bob.pk}/followers?{query}")

        assert response.status_code == 400
        assert response.json()["success"] is False

    @pytest.mark.parametrize(("raw", "status"), [("abc", 400), ("-5", 400), ("999999999", 404)])
    def test_bad_user_id_is_4xx(self, raw, status):
        assert Client().get(f"/api/users/{raw}/followers").status_code == status


class TestSignInRules:
    """C20: lists are public on pages and API alike; actor-based reads need sign-in; the actor is never a parameter."""

    def test_lists_are_public_in_the_api_as_on_the_pages(self, bob):
        assert Client().get(f"/api/users/{bob.pk}/followers").status_code == 200
        assert Client().get(f"/u/{bob.username}/followers/").status_code == 200
        assert Client().get(f"/api/users/{bob.pk}/following").status_code == 200
        assert Client().get(f"/u/{bob.username}/following/").status_code == 200

    def test_common_follows_need_sign_in_in_the_api_as_on_the_pages(self, bob):
        response = Client().get(f"/api/follow/common/{bob.pk}")
        page = Client().get(f"/u/{bob.username}/")

        assert response.status_code == 401
        assert "You both follow" not in page.content.decode()

    def test_naming_another_actor_has_no_effect(self, alice_client, alice, bob, charlie, django_capture_on_commit_callbacks):
        with django_capture_on_commit_callbacks(execute=True):
            response = alice_client.put(f"/api/follow/{bob.pk}/true?userId={charlie.pk}", data={"userId": charlie.pk})

        assert response.status_code == 200
        assert set(Follow.objects.values_list("follower_id", "followee_id")) == {(alice.pk, bob.pk)}

    def test_common_follows_of_two_users(
        self, alice_client, alice, bob, charlie, user_factory, django_capture_on_commit_callbacks
    ):
        x, y, z, w = (user_factory() for _ in range(4))
        with django_capture_on_commit_callbacks(execute=True):
            for target in (x, y, z):
                services.follow_create(actor=alice, followee_id=target.pk)
            for target in (y, z, w):
                services.follow_create(actor=bob, followee_id=target.pk)

        data = alice_client.get(f"/api/follow/common/{bob.pk}").json()["data"]

        assert {u["id"] for u in data} == {y.pk, z.pk}

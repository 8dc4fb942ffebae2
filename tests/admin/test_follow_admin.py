"""The follow admin: deletes take the unfollow path (C04), lists stay bounded, search and filters.

C04: B has followers U1..U10; U1..U5 are removed in one admin bulk delete
(Django's bulk delete skips per-object hooks, so the admin replaces it).
B then shows 5 followers in the database, the Redis sets and sorted sets
and the counts; each Ui has lost B from its following. A bulk path that
cannot mirror (``QuerySet.delete``) is repaired entirely by reconcile.
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

import pytest
from django.contrib.admin.models import DELETION, LogEntry

from social import redis_keys, selectors
from social.models import Follow
from social.reconcile import reconcile_all
from tests.support.accounts import UserFactory
from tests.support.graph import assert_mirror_equals_database

pytestmark = pytest.mark.django_db


@pytest.fixture
def star(follow: Any) -> tuple[Any, list[Any]]:
    """B and its ten followers U1..U10 (through the service, mirrored)."""
    b = UserFactory.create(username="b")
    fans = [UserFactory.create(username=f"fan{i}") for i in range(1, 11)]
    for fan in fans:
        follow(fan, b)
    return b, fans


def members(client: Any, key: str) -> set[int]:
    return {int(m) for m in client.smembers(key)}


def zmembers(client: Any, key: str) -> set[int]:
    return {int(m) for m in client.zrange(key, 0, -1)}


def assert_star_lost(client: Any, b: Any, removed: list[Any], kept: list[Any]) -> None:
    """B keeps only ``kept`` everywhere; each removed fan lost B everywhere."""
    kept_ids = {u.pk for u in kept}
    assert set(Follow.objects.filter(followee=b).values_list("follower_id", flat=True)) == kept_ids
    assert members(client, redis_keys.followers_set_key(b.pk)) == kept_ids
    assert zmembers(client, redis_keys.followers_zset_key(b.pk)) == kept_ids
    assert selectors.follow_counts(user_id=b.pk).followers == len(kept)
    for fan in removed:
        assert not client.sismember(redis_keys.following_set_key(fan.pk), b.pk)
        assert client.zscore(redis_keys.following_zset_key(fan.pk), b.pk) is None
        assert selectors.follow_counts(user_id=fan.pk).following == 0
    assert_mirror_equals_database(client, [b.pk, *(u.pk for u in removed + kept)])


class TestAdminBulkDelete:
    def test_removes_five_followers_from_database_redis_and_counts(
        self, star: Any, superuser_client: Any, redis_client: Any, django_capture_on_commit_callbacks: Any
    ) -> None:
        b, fans = star
        chosen = list(Follow.objects.filter(followee=b, follower__in=fans[:5]).values_list("pk", flat=True))

        confirm = superuser_client.post("/admin/social/follow/", {"action": "delete_selected", "_selected_action": chosen})
        with django_capture_on_commit_callbacks(execute=True):
            done = superuser_client.post(
                "/admin/social/follow/", {"action": "delete_selected", "_selected_action": chosen, "post": "yes"}
            )

        assert confirm.status_code == 200
        assert len(confirm.context["queryset"]) == 5
        assert done.status_code == 302
        assert_star_lost(redis_client, b, removed=fans[:5], kept=fans[5:])
        assert LogEntry.objects.filter(action_flag=DELETION, object_id__in=[str(pk) for pk in chosen]).count() == 5

    def test_common_follows_forget_the_removed_edges(
        self, star: Any, follow: Any, superuser_client: Any, django_capture_on_commit_callbacks: Any
    ) -> None:
        b, fans = star
        other = UserFactory.create(username="other")
        follow(fans[0], other)
        follow(fans[5], other)
        chosen = list(Follow.objects.filter(followee=b, follower=fans[0]).values_list("pk", flat=True))

        with django_capture_on_commit_callbacks(execute=True):
            superuser_client.post(
                "/admin/social/follow/", {"action": "delete_selected", "_selected_action": chosen, "post": "yes"}
            )

        common = selectors.common_following(user_id=fans[0].pk, other_id=fans[5].pk)
        assert [u.pk for u in common.users] == [other.pk]
        assert common.count == 1

    def test_refuses_more_than_the_cap_and_deletes_nothing(self, star: Any, superuser_client: Any, monkeypatch: Any) -> None:
        monkeypatch.setattr("social.admin.BULK_DELETE_MAX", 3)
        b, _fans = star
        chosen = list(Follow.objects.filter(followee=b).values_list("pk", flat=True)[:4])

        response = superuser_client.post(
            "/admin/social/follow/", {"action": "delete_selected", "_selected_action": chosen, "post": "yes"}, follow=True
        )

        assert Follow.objects.filter(followee=b).count() == 10
        assert "at most 3 follows" in response.content.decode()

    def test_a_bulk_path_that_cannot_mirror_is_repaired_by_reconcile(self, star: Any, redis_client: Any) -> None:
        b, fans = star
        Follow.objects.filter(followee=b, follower__in=fans[:5]).delete()  # no service, no outbox
        assert selectors.follow_counts(user_id=b.pk).followers == 10  # the mirror drifted

        first = reconcile_all(repair_drift=True)
        second = reconcile_all(repair_drift=False)

        assert first.edges_extra == 10  # five pairs, each extra on both of its sides
        assert first.pairs_repaired == 5
        assert second.drift == 0
        assert_star_lost(redis_client, b, removed=fans[:5], kept=fans[5:])


class TestSingleDelete:
    def test_delete_view_unfollows_through_the_service(
        self, star: Any, superuser_client: Any, redis_client: Any, django_capture_on_commit_callbacks: Any
    ) -> None:
        b, fans = star
        follow_row = Follow.objects.get(followee=b, follower=fans[0])

        with django_capture_on_commit_callbacks(execute=True):
            response = superuser_client.post(f"/admin/social/follow/{follow_row.pk}/delete/", {"post": "yes"})

        assert response.status_code == 302
        assert_star_lost(redis_client, b, removed=fans[:1], kept=fans[1:])


class TestAdd:
    def test_adds_through_the_follow_service(
        self, alice: Any, bob: Any, superuser_client: Any, redis_client: Any, django_capture_on_commit_callbacks: Any
    ) -> None:
        with django_capture_on_commit_callbacks(execute=True):
            response = superuser_client.post("/admin/social/follow/add/", {"follower": alice.pk, "followee": bob.pk})

        assert response.status_code == 302
        assert Follow.objects.filter(follower=alice, followee=bob).count() == 1
        assert redis_client.sismember(redis_keys.followers_set_key(bob.pk), alice.pk)
        assert_mirror_equals_database(redis_client, [alice.pk, bob.pk])

    @pytest.mark.parametrize("case", ["self", "inactive followee", "duplicate"])
    def test_rejects_what_the_service_rejects(self, case: str, alice: Any, bob: Any, follow: Any, superuser_client: Any) -> None:
        target = alice if case == "self" else bob
        if case == "inactive followee":
            bob.is_active = False
            bob.save()
        if case == "duplicate":
            follow(alice, bob)

        response = superuser_client.post("/admin/social/follow/add/", {"follower": alice.pk, "followee": target.pk})

        assert response.status_code == 200
        assert response.context["adminform"].form.errors
        assert Follow.objects.filter(follower=alice).count() == (1 if case == "duplicate" else 0)


class TestListSearchAndFilters:
    def test_search_matches_a_username_prefix_on_either_side(self, star: Any, superuser_client: Any) -> None:
        _b, _fans = star

        by_follower = superuser_client.get("/admin/social/follow/", {"q": "fan1"})  # fan1 and fan10
        by_followee = superuser_client.get("/admin/social/follow/", {"q": "B"})

        assert {f.follower.username for f in by_follower.context["cl"].result_list} == {"fan1", "fan10"}
        assert len(by_followee.context["cl"].result_list) == 10

    def test_search_matches_an_id(self, star: Any, superuser_client: Any) -> None:
        _b, fans = star

        response = superuser_client.get("/admin/social/follow/", {"q": str(fans[2].pk)})

        assert [f.follower_id for f in response.context["cl"].result_list] == [fans[2].pk]

    def test_filters_by_account_state(self, star: Any, superuser_client: Any) -> None:
        _b, fans = star
        fans[0].is_active = False
        fans[0].save()

        deactivated = superuser_client.get("/admin/social/follow/", {"accounts": "deactivated"})
        active = superuser_client.get("/admin/social/follow/", {"accounts": "active"})

        assert [f.follower_id for f in deactivated.context["cl"].result_list] == [fans[0].pk]
        assert len(active.context["cl"].result_list) == 9

    def test_filters_by_date(self, star: Any, superuser_client: Any) -> None:
        b, fans = star
        from datetime import datetime

        Follow.objects.filter(followee=b, follower=fans[3]).update(created_at=datetime(2009, 2, 14, 12, tzinfo=UTC))

        response = superuser_client.get(
            "/admin/social/follow/",
            {"created_at__gte": "2009-02-14 00:00:00+00:00", "created_at__lt": "2009-02-15 00:00:00+00:00"},
        )

        assert [f.follower_id for f in response.context["cl"].result_list] == [fans[3].pk]

    def test_links_from_the_user_page_filter_one_side(self, star: Any, superuser_client: Any) -> None:
        b, _fans = star

        response = superuser_client.get("/admin/social/follow/", {"followee__id__exact": b.pk})

        assert response.status_code == 200
        assert len(response.context["cl"].result_list) == 10


class TestQueryCounts:
    @pytest.mark.parametrize("followers", [5, 60])
    def test_changelist_queries_do_not_grow_with_rows(
        self, followers: int, superuser_client: Any, django_assert_max_num_queries: Any
    ) -> None:
        b = UserFactory.create(username="b")
        Follow.objects.bulk_create([Follow(follower=UserFactory.create(), followee=b) for _ in range(followers)])
        superuser_client.get("/admin/social/follow/")  # session and content types warm

        with django_assert_max_num_queries(8):
            response = superuser_client.get("/admin/social/follow/")

        assert len(response.context["cl"].result_list) == followers

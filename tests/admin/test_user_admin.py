"""The account admin: follow panel, repair buttons, deactivation and deletion (C05).

C05: A follows B, C and D; D is deactivated (admin action, button or the
is_active checkbox) or deleted. Whatever the path, A's following count
equals the length of A's following list and the Redis set size, D is in no
list, set, count or common follows, and reconcile finds nothing afterwards.
Pinned: deactivation keeps the follow rows, so reactivation restores every
edge with its original follow time; deletion removes them for good.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, LogEntry

from core.models import OutboxEntry
from social import redis_keys, selectors
from social.models import OUTBOX_USER, Follow
from social.reconcile import reconcile_all
from tests.support.accounts import UserFactory
from tests.support.graph import assert_mirror_equals_database
from users.models import User

pytestmark = pytest.mark.django_db


@pytest.fixture
def quartet(follow: Any) -> dict[str, Any]:
    """A follows B, C, D; X follows C and D (so A and X have C, D in common); D follows A."""
    users = {name: UserFactory.create(username=name.lower()) for name in "ABCDX"}
    for followee in "BCD":
        follow(users["A"], users[followee])
    for followee in "CD":
        follow(users["X"], users[followee])
    follow(users["D"], users["A"])
    return users


def following_ids(user: Any) -> list[int]:
    page = selectors.following_page(user_id=user.pk, cursor=None, limit=50)
    return [entry.user.pk for entry in page.entries]


def assert_d_is_gone(users: dict[str, Any], client: Any) -> None:
    a, d, x = users["A"], users["D"], users["X"]
    listed = following_ids(a)
    counts = selectors.follow_counts(user_id=a.pk)
    assert counts.following == len(listed) == client.scard(redis_keys.following_set_key(a.pk)) == 2
    assert d.pk not in listed
    assert counts.followers == 0  # D followed A; that edge stops counting too
    assert selectors.follow_counts(user_id=x.pk).following == 1
    common = selectors.common_following(user_id=a.pk, other_id=x.pk)
    assert (common.count, [u.pk for u in common.users]) == (1, [users["C"].pk])
    assert not client.exists(redis_keys.following_set_key(d.pk))
    assert not client.exists(redis_keys.followers_set_key(d.pk))
    assert_mirror_equals_database(client, [u.pk for u in users.values()])
    assert reconcile_all(repair_drift=False).drift == 0


def assert_d_is_back(users: dict[str, Any], client: Any) -> None:
    a = users["A"]
    assert selectors.follow_counts(user_id=a.pk) == selectors.Counts(followers=1, following=3)
    assert set(following_ids(a)) == {users[n].pk for n in "BCD"}
    assert selectors.common_following(user_id=a.pk, other_id=users["X"].pk).count == 2
    assert_mirror_equals_database(client, [u.pk for u in users.values()])
    assert reconcile_all(repair_drift=False).drift == 0


class TestDeactivation:
    def test_by_list_action_removes_both_directions_and_reactivation_restores(
        self, quartet: Any, superuser_client: Any, redis_client: Any, django_capture_on_commit_callbacks: Any
    ) -> None:
        d = quartet["D"]
        score = redis_client.zscore(redis_keys.following_zset_key(quartet["A"].pk), d.pk)

        with django_capture_on_commit_callbacks(execute=True):
            off = superuser_client.post("/admin/users/user/", {"action": "deactivate_accounts", "_selected_action": [d.pk]})
        assert off.status_code == 302
        assert_d_is_gone(quartet, redis_client)

        with django_capture_on_commit_callbacks(execute=True):
            on = superuser_client.post("/admin/users/user/", {"action": "reactivate_accounts", "_selected_action": [d.pk]})
        assert on.status_code == 302
        assert_d_is_back(quartet, redis_client)
        assert redis_client.zscore(redis_keys.following_zset_key(quartet["A"].pk), d.pk) == score
        assert list(LogEntry.objects.filter(object_id=str(d.pk)).values_list("change_message", flat=True).order_by("id")) == [
            "Deactivated d.",
            "Reactivated d.",
        ]

    def test_by_the_is_active_checkbox_goes_through_the_service(
        self, quartet: Any, superuser_client: Any, redis_client: Any, django_capture_on_commit_callbacks: Any
    ) -> None:
        d = quartet["D"]
        form = {
            "username": "d",
            "display_name": "Dee",
            "bio": "",
            "first_name": "",
            "last_name": "",
            "email": "",
            "is_staff": "",
            "is_superuser": "",
        }  # is_active left out: the checkbox is unticked

        with django_capture_on_commit_callbacks(execute=True):
            response = superuser_client.post(f"/admin/users/user/{d.pk}/change/", form)

        assert response.status_code == 302
        d.refresh_from_db()
        assert (d.is_active, d.display_name) == (False, "Dee")
        assert_d_is_gone(quartet, redis_client)

        with django_capture_on_commit_callbacks(execute=True):
            superuser_client.post(f"/admin/users/user/{d.pk}/change/", {**form, "is_active": "on"})
        assert_d_is_back(quartet, redis_client)

    def test_by_button(
        self, quartet: Any, superuser_client: Any, redis_client: Any, django_capture_on_commit_callbacks: Any
    ) -> None:
        with django_capture_on_commit_callbacks(execute=True):
            response = superuser_client.post(f"/admin/users/user/{quartet['D'].pk}/mirror/deactivate/")

        assert response.status_code == 302
        assert_d_is_gone(quartet, redis_client)

    def test_the_follow_rows_are_kept(self, quartet: Any, superuser_client: Any, django_capture_on_commit_callbacks: Any) -> None:
        with django_capture_on_commit_callbacks(execute=True):
            superuser_client.post(f"/admin/users/user/{quartet['D'].pk}/mirror/deactivate/")

        assert Follow.objects.filter(follower=quartet["A"]).count() == 3


class TestDeletion:
    def test_admin_delete_removes_every_edge_from_redis(
        self, quartet: Any, superuser_client: Any, redis_client: Any, django_capture_on_commit_callbacks: Any
    ) -> None:
        d = quartet["D"]

        with django_capture_on_commit_callbacks(execute=True):
            response = superuser_client.post(f"/admin/users/user/{d.pk}/delete/", {"post": "yes"})

        assert response.status_code == 302
        assert not User.objects.filter(pk=d.pk).exists()
        assert_d_is_gone(quartet, redis_client)

    def test_a_delete_outside_the_admin_is_mirrored_too(
        self, quartet: Any, redis_client: Any, django_capture_on_commit_callbacks: Any
    ) -> None:
        with django_capture_on_commit_callbacks(execute=True):
            User.objects.filter(pk=quartet["D"].pk).delete()

        assert_d_is_gone(quartet, redis_client)


class TestFollowPanel:
    def test_shows_mirror_counts_and_newest_follows(self, quartet: Any, superuser_client: Any) -> None:
        a = quartet["A"]

        response = superuser_client.get(f"/admin/users/user/{a.pk}/change/")

        panel = response.context["follow_panel"]
        assert (panel.mirror_followers, panel.mirror_following) == (1, 3)
        assert (panel.database_followers, panel.database_following) == (1, 3)
        assert [f.followee.username for f in panel.recent_following] == ["d", "c", "b"]
        assert [f.follower.username for f in panel.recent_followers] == ["d"]
        assert b"(differs)" not in response.content

    def test_shows_the_database_figure_when_redis_drifted_and_rebuild_repairs_it(
        self, quartet: Any, superuser_client: Any, redis_client: Any
    ) -> None:
        a, b = quartet["A"], quartet["B"]
        redis_client.srem(redis_keys.following_set_key(a.pk), b.pk)  # drift behind the app's back

        before = superuser_client.get(f"/admin/users/user/{a.pk}/change/")
        rebuilt = superuser_client.post(f"/admin/users/user/{a.pk}/mirror/rebuild-social/")
        after = superuser_client.get(f"/admin/users/user/{a.pk}/change/")

        assert before.context["follow_panel"].mirror_following == 2
        assert b"3 (differs)" in before.content
        assert rebuilt.status_code == 302
        assert after.context["follow_panel"].mirror_following == 3
        assert b"(differs)" not in after.content
        assert LogEntry.objects.get(object_id=str(a.pk), action_flag=CHANGE).change_message.startswith(
            "Rebuilt the social cache of a"
        )

    def test_reconcile_button_repairs_and_reports(self, quartet: Any, superuser_client: Any, redis_client: Any) -> None:
        a, b = quartet["A"], quartet["B"]
        redis_client.srem(redis_keys.following_set_key(a.pk), b.pk)

        response = superuser_client.post(f"/admin/users/user/{a.pk}/mirror/reconcile/", follow=True)

        assert redis_client.sismember(redis_keys.following_set_key(a.pk), b.pk)
        assert "pairs_repaired=1" in response.content.decode()

    def test_redis_failure_is_a_message_not_a_500(self, quartet: Any, superuser_client: Any, monkeypatch: Any) -> None:
        import redis

        def broken(user_id: int) -> int:
            raise redis.exceptions.ConnectionError("connection refused")

        monkeypatch.setattr("social.rebuild.rebuild_user", broken)

        response = superuser_client.post(f"/admin/users/user/{quartet['A'].pk}/mirror/rebuild-social/", follow=True)

        assert response.status_code == 200
        assert "failed (ConnectionError: connection refused)" in response.content.decode()
        assert not LogEntry.objects.exists()


class TestSearch:
    def test_matches_username_prefix_and_id(self, quartet: Any, superuser_client: Any) -> None:
        by_name = superuser_client.get("/admin/users/user/", {"q": "X"})
        by_id = superuser_client.get("/admin/users/user/", {"q": str(quartet["B"].pk)})

        assert [u.username for u in by_name.context["cl"].result_list] == ["x"]
        assert [u.username for u in by_id.context["cl"].result_list] == ["b"]


class TestQueryCounts:
    @pytest.mark.parametrize("followers", [3, 40])
    def test_change_page_queries_do_not_grow_with_followers(
        self, followers: int, superuser_client: Any, django_assert_max_num_queries: Any
    ) -> None:
        star = UserFactory.create(username="star")
        Follow.objects.bulk_create([Follow(follower=UserFactory.create(), followee=star) for _ in range(followers)])
        superuser_client.get(f"/admin/users/user/{star.pk}/change/")

        # 15: the controls panel's counts are one query of their own.
        with django_assert_max_num_queries(15):
            response = superuser_client.get(f"/admin/users/user/{star.pk}/change/")

        assert response.context["follow_panel"].database_followers == followers

    def test_user_list_queries_are_bounded(self, superuser_client: Any, django_assert_max_num_queries: Any) -> None:
        for _ in range(30):
            UserFactory.create()
        superuser_client.get("/admin/users/user/")

        with django_assert_max_num_queries(8):
            response = superuser_client.get("/admin/users/user/")

        assert len(response.context["cl"].result_list) == 31


def mirror_jobs(queued: list[Any]) -> list[int]:
    """The follow mirror's entries among the ``outbox_apply`` calls recorded in ``queued``."""
    ids = [entry_id for call in queued for entry_id in call["entry_ids"]]
    return list(OutboxEntry.objects.filter(pk__in=ids, kind=OUTBOX_USER).values_list("pk", flat=True))


class TestDeactivationAtOnce:
    """Before any Celery worker has run, counts, lists and common follows already agree."""

    @pytest.mark.parametrize("path", ["deactivate", "delete"])
    def test_a_small_account_is_re_mirrored_right_after_commit(
        self,
        path: str,
        quartet: Any,
        superuser_client: Any,
        redis_client: Any,
        monkeypatch: Any,
        django_capture_on_commit_callbacks: Any,
    ) -> None:
        queued: list[Any] = []
        monkeypatch.setattr("core.tasks.outbox_apply.apply_async", lambda kwargs, **options: queued.append(kwargs))
        d = quartet["D"]

        with django_capture_on_commit_callbacks(execute=True):
            if path == "deactivate":
                superuser_client.post(f"/admin/users/user/{d.pk}/mirror/deactivate/")
            else:
                superuser_client.post(f"/admin/users/user/{d.pk}/delete/", {"post": "yes"})

        assert mirror_jobs(queued) == []  # the mirror waited for no worker
        assert_d_is_gone(quartet, redis_client)

    def test_a_big_account_goes_to_celery_and_reads_stay_consistent_meanwhile(
        self, quartet: Any, superuser_client: Any, redis_client: Any, monkeypatch: Any, django_capture_on_commit_callbacks: Any
    ) -> None:
        queued: list[Any] = []
        monkeypatch.setattr("core.tasks.outbox_apply.apply_async", lambda kwargs, **options: queued.append(kwargs))
        monkeypatch.setattr("social.services.USER_REFRESH_INLINE_EDGES", 2)  # D has 3 edges
        d = quartet["D"]

        with django_capture_on_commit_callbacks(execute=True):
            superuser_client.post(f"/admin/users/user/{d.pk}/mirror/deactivate/")
        from core.tasks import outbox_apply

        assert len(mirror_jobs(queued)) == 1
        outbox_apply.apply(kwargs={"entry_ids": mirror_jobs(queued)})  # the worker runs
        assert_d_is_gone(quartet, redis_client)

    def test_the_database_fallback_hides_a_deactivated_account_too(
        self, quartet: Any, superuser_client: Any, redis_client: Any, monkeypatch: Any, django_capture_on_commit_callbacks: Any
    ) -> None:
        from core.redis import delete_sentinels

        with django_capture_on_commit_callbacks(execute=False):  # the mirror is never told
            superuser_client.post(f"/admin/users/user/{quartet['D'].pk}/mirror/deactivate/")
        delete_sentinels(redis_client)  # reads go to the database

        a, x = quartet["A"], quartet["X"]
        listed = following_ids(a)
        assert selectors.follow_counts(user_id=a.pk) == selectors.Counts(followers=0, following=2)
        assert len(listed) == 2 and quartet["D"].pk not in listed
        assert selectors.common_following(user_id=a.pk, other_id=x.pk).count == 1


class TestDeleteConfirmation:
    def test_a_big_account_gets_counts_not_a_line_per_follow(
        self, quartet: Any, superuser_client: Any, redis_client: Any, monkeypatch: Any, django_capture_on_commit_callbacks: Any
    ) -> None:
        monkeypatch.setattr("users.admin.DELETE_LIST_MAX", 2)
        d = quartet["D"]  # followed by A and X, follows A: 3 follows

        page = superuser_client.get(f"/admin/users/user/{d.pk}/delete/")
        with django_capture_on_commit_callbacks(execute=True):
            done = superuser_client.post(f"/admin/users/user/{d.pk}/delete/", {"post": "yes"})

        assert page.status_code == 200
        assert "3 follows (too many to list)" in page.content.decode()
        assert f"{quartet['A'].pk} -&gt; {d.pk}" not in page.content.decode()
        # The follows' notifications go with the account (to D from A and X, to A from D).
        assert dict(page.context["model_count"]) == {"users": 1, "follows": 3, "notifications": 3, "notification groups": 1}
        assert done.status_code == 302
        assert_d_is_gone(quartet, redis_client)

    def test_a_small_account_gets_django_s_full_list(self, quartet: Any, superuser_client: Any) -> None:
        d = quartet["D"]

        page = superuser_client.get(f"/admin/users/user/{d.pk}/delete/")

        assert f"{quartet['A'].pk} -&gt; {d.pk}" in page.content.decode()

"""Who sees and does what in the admin: moderator, plain staff, superuser, anonymous.

The moderators group may view accounts, view and delete follows, and view
and hide notes; plain staff see nothing; superusers see everything; the
mirror health page needs ``core.view_outboxentry`` (superusers/operators).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.auth.models import Group

from feed.models import Note
from social.models import Follow

pytestmark = pytest.mark.django_db


@pytest.fixture
def graph(alice: Any, bob: Any, charlie: Any, follow: Any) -> dict[str, Any]:
    follow(alice, bob)
    follow(charlie, bob)
    note = Note.objects.create(author=bob, body="hello")
    return {"alice": alice, "bob": bob, "follow": Follow.objects.get(follower=alice, followee=bob), "note": note}


def pages(graph: dict[str, Any]) -> dict[str, str]:
    user_id, follow_id = graph["bob"].pk, graph["follow"].pk
    return {
        "index": "/admin/",
        "user list": "/admin/users/user/",
        "user page": f"/admin/users/user/{user_id}/change/",
        "user add": "/admin/users/user/add/",
        "user delete": f"/admin/users/user/{user_id}/delete/",
        "follow list": "/admin/social/follow/",
        "follow page": f"/admin/social/follow/{follow_id}/change/",
        "follow add": "/admin/social/follow/add/",
        "follow delete": f"/admin/social/follow/{follow_id}/delete/",
        "outbox list": "/admin/core/outboxentry/",
        "health": "/admin/core/outboxentry/health/",
        "group list": "/admin/auth/group/",
        "note list": "/admin/feed/note/",
        "note page": f"/admin/feed/note/{graph['note'].pk}/change/",
        "note add": "/admin/feed/note/add/",
        "note delete": f"/admin/feed/note/{graph['note'].pk}/delete/",
    }


EXPECTED_GET = {
    #                 moderator, plain staff, superuser
    "index": (200, 200, 200),
    "user list": (200, 403, 200),
    "user page": (200, 403, 200),
    "user add": (403, 403, 200),
    "user delete": (403, 403, 200),
    "follow list": (200, 403, 200),
    "follow page": (200, 403, 200),
    "follow add": (403, 403, 200),
    "follow delete": (200, 403, 200),
    "outbox list": (403, 403, 200),
    "health": (403, 403, 200),
    "group list": (403, 403, 200),
    "note list": (200, 403, 200),
    "note page": (200, 403, 200),
    "note add": (403, 403, 403),  # notes are published by their authors only
    "note delete": (403, 403, 200),
}


class TestModeratorsGroup:
    def test_has_exactly_the_moderation_permissions(self, moderators_group: Group) -> None:
        group = moderators_group

        codenames = set(group.permissions.values_list("content_type__app_label", "codename"))

        assert codenames == {
            ("users", "view_user"),
            ("social", "view_follow"),
            ("social", "delete_follow"),
            ("social", "view_followrequest"),
            ("feed", "view_note"),
            ("feed", "hide_note"),
        }


class TestPageAccess:
    @pytest.mark.parametrize("page", list(EXPECTED_GET))
    def test_each_role_gets_the_expected_status(
        self, page: str, graph: Any, moderator_client: Any, staff_client: Any, superuser_client: Any
    ) -> None:
        url = pages(graph)[page]

        statuses = tuple(client.get(url).status_code for client in (moderator_client, staff_client, superuser_client))

        assert statuses == EXPECTED_GET[page]

    def test_anonymous_is_sent_to_the_admin_sign_in(self, client: Any, graph: Any) -> None:
        for url in pages(graph).values():
            response = client.get(url)

            assert response.status_code == 302, url
            assert response["Location"].startswith("/admin/login/"), url

    def test_plain_staff_index_lists_no_app(self, staff_client: Any) -> None:
        response = staff_client.get("/admin/")

        assert response.context["app_list"] == []
        assert b"Mirror health" not in response.content

    def test_moderator_index_lists_only_accounts_follows_requests_and_notes(self, moderator_client: Any) -> None:
        response = moderator_client.get("/admin/")

        models = {(app["app_label"], m["object_name"]) for app in response.context["app_list"] for m in app["models"]}
        # Not blocks or mutes: who blocks or mutes whom is private (superusers only).
        assert models == {("users", "User"), ("social", "Follow"), ("social", "FollowRequest"), ("feed", "Note")}
        assert b"Mirror health" not in response.content

    def test_superuser_index_links_the_health_page(self, superuser_client: Any) -> None:
        response = superuser_client.get("/admin/")

        assert b"/admin/core/outboxentry/health/" in response.content


def action_names(response: Any) -> set[str]:
    return {name for name, _ in response.context["action_form"].fields["action"].choices if name}


class TestModeratorCanView:
    def test_user_page_is_read_only(self, moderator_client: Any, graph: Any) -> None:
        bob = graph["bob"]

        page = moderator_client.get(f"/admin/users/user/{bob.pk}/change/")
        post = moderator_client.post(f"/admin/users/user/{bob.pk}/change/", {"username": "renamed"})

        assert page.status_code == 200
        assert page.context["has_change_permission"] is False
        assert post.status_code == 403
        bob.refresh_from_db()
        assert bob.username == "bob"

    def test_user_list_offers_repairs_but_not_deactivation(self, moderator_client: Any, superuser_client: Any) -> None:
        mine = action_names(moderator_client.get("/admin/users/user/"))
        root = action_names(superuser_client.get("/admin/users/user/"))

        repairs = {"rebuild_social_caches", "rebuild_inboxes", "reconcile_accounts"}
        assert mine == repairs
        assert root == repairs | {"delete_selected", "deactivate_accounts", "reactivate_accounts"}

    def test_follow_list_offers_the_bulk_delete(self, moderator_client: Any) -> None:
        assert action_names(moderator_client.get("/admin/social/follow/")) == {"delete_selected"}


class TestStateChanges:
    def test_moderator_cannot_deactivate_by_button_or_action(self, moderator_client: Any, graph: Any) -> None:
        bob = graph["bob"]

        button = moderator_client.post(f"/admin/users/user/{bob.pk}/mirror/deactivate/")
        action = moderator_client.post("/admin/users/user/", {"action": "deactivate_accounts", "_selected_action": [bob.pk]})

        assert button.status_code == 403
        assert action.status_code == 302  # Django answers "No action selected."
        bob.refresh_from_db()
        assert bob.is_active is True
        assert not LogEntry.objects.filter(object_id=str(bob.pk)).exists()

    def test_plain_staff_cannot_run_any_operation(self, staff_client: Any, graph: Any) -> None:
        bob = graph["bob"]

        statuses = [
            staff_client.post(f"/admin/users/user/{bob.pk}/mirror/{operation}/").status_code
            for operation in ("rebuild-social", "reconcile", "deactivate")
        ]

        assert statuses == [403, 403, 403]
        assert LogEntry.objects.count() == 0

    def test_moderator_repairs_are_logged(self, moderator_client: Any, moderator: Any, graph: Any) -> None:
        bob = graph["bob"]

        statuses = [
            moderator_client.post(f"/admin/users/user/{bob.pk}/mirror/{operation}/").status_code
            for operation in ("rebuild-social", "rebuild-inbox", "reconcile")
        ]

        assert statuses == [302, 302, 302]
        entries = list(LogEntry.objects.filter(user=moderator, object_id=str(bob.pk)).order_by("id"))
        assert [e.action_flag for e in entries] == [CHANGE, CHANGE, CHANGE]
        assert entries[0].change_message == "Rebuilt the social cache of bob: 2 follows."
        assert entries[1].change_message == "Rebuilt the inbox of bob: 0 notes."
        assert entries[2].change_message.startswith("Reconciled bob (run ")

    def test_superuser_deactivation_is_logged(
        self, superuser_client: Any, superuser: Any, graph: Any, django_capture_on_commit_callbacks: Any
    ) -> None:
        bob = graph["bob"]

        with django_capture_on_commit_callbacks(execute=True):
            response = superuser_client.post(f"/admin/users/user/{bob.pk}/mirror/deactivate/")

        assert response.status_code == 302
        bob.refresh_from_db()
        assert bob.is_active is False
        entry = LogEntry.objects.get(user=superuser, object_id=str(bob.pk))
        assert entry.change_message == "Deactivated bob."

    def test_moderator_follow_delete_is_logged(
        self, moderator_client: Any, moderator: Any, graph: Any, django_capture_on_commit_callbacks: Any
    ) -> None:
        follow = graph["follow"]

        with django_capture_on_commit_callbacks(execute=True):
            response = moderator_client.post(f"/admin/social/follow/{follow.pk}/delete/", {"post": "yes"})

        assert response.status_code == 302
        assert not Follow.objects.filter(pk=follow.pk).exists()
        entry = LogEntry.objects.get(user=moderator)
        assert (entry.action_flag, entry.object_id) == (DELETION, str(follow.pk))

    def test_plain_staff_cannot_delete_a_follow(self, staff_client: Any, graph: Any) -> None:
        follow = graph["follow"]

        response = staff_client.post(f"/admin/social/follow/{follow.pk}/delete/", {"post": "yes"})

        assert response.status_code == 403
        assert Follow.objects.filter(pk=follow.pk).exists()

    @pytest.mark.parametrize("method", ["get", "put"])
    def test_operations_answer_only_post(self, superuser_client: Any, graph: Any, method: str) -> None:
        response = getattr(superuser_client, method)(f"/admin/users/user/{graph['bob'].pk}/mirror/reconcile/")

        assert response.status_code == 405

    def test_unknown_operation_or_account_is_404(self, superuser_client: Any, graph: Any) -> None:
        unknown_operation = superuser_client.post(f"/admin/users/user/{graph['bob'].pk}/mirror/explode/")
        unknown_account = superuser_client.post("/admin/users/user/999999999/mirror/reconcile/")
        malformed_account = superuser_client.post("/admin/users/user/abc/mirror/reconcile/")

        assert [unknown_operation.status_code, unknown_account.status_code, malformed_account.status_code] == [404, 404, 404]

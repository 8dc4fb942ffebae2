"""The admin of blocks, mutes and follow requests (issue 16): moderators see the counts on an
account page and the follow requests, never who blocks or mutes whom; superusers list them."""

from __future__ import annotations

from typing import Any

import pytest

from social import controls, services
from tests.support.accounts import UserFactory, signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def controlled(django_capture_on_commit_callbacks: Any) -> dict[str, Any]:
    users = {name: UserFactory.create(username=name) for name in ("ann", "ben", "cat", "dan")}
    users["ann"].approve_followers = True
    users["ann"].save(update_fields=["approve_followers"])
    with django_capture_on_commit_callbacks(execute=True):
        controls.block_create(actor=users["ann"], target_id=users["ben"].pk)
        controls.block_create(actor=users["cat"], target_id=users["ann"].pk)
        controls.mute_create(actor=users["ann"], target_id=users["dan"].pk)
        services.follow_create(actor=users["dan"], followee_id=users["ann"].pk)  # a request: ann is private
    return users


class TestControlsAdmin:
    def test_a_moderator_sees_the_counts_but_not_the_lists(self, controlled: dict[str, Any], moderator: Any) -> None:
        client = signed_in(moderator)
        ann = controlled["ann"]

        page = client.get(f"/admin/users/user/{ann.pk}/change/")

        assert page.status_code == 200
        assert page.context["controls_panel"] == {
            "blocks_made": 1,
            "blocks_received": 1,
            "mutes_made": 1,
            "requests_pending": 1,
            "private": True,
        }
        assert b"social/block/?blocker__id__exact" not in page.content  # no link to the lists
        assert client.get("/admin/social/block/").status_code == 403
        assert client.get("/admin/social/mute/").status_code == 403
        assert client.get("/admin/social/followrequest/").status_code == 200

    def test_the_counts_leave_out_expired_mutes_and_requests_of_deactivated_accounts(
        self, controlled: dict[str, Any], moderator: Any
    ) -> None:
        from datetime import timedelta

        from django.utils import timezone

        from social.models import Mute

        ann = controlled["ann"]
        eve = UserFactory.create(username="eve")
        services.follow_create(actor=eve, followee_id=ann.pk)  # a second request...
        eve.is_active = False
        eve.save(update_fields=["is_active"])  # ...of an account deactivated since
        Mute.objects.filter(muter=ann).update(expires_at=timezone.now() - timedelta(seconds=1))  # ran out

        page = signed_in(moderator).get(f"/admin/users/user/{ann.pk}/change/")

        assert page.context["controls_panel"] == {
            "blocks_made": 1,
            "blocks_received": 1,
            "mutes_made": 0,
            "requests_pending": 1,
            "private": True,
        }

    def test_a_superuser_lists_them(self, controlled: dict[str, Any], superuser: Any) -> None:
        client = signed_in(superuser)
        ann = controlled["ann"]

        blocks = client.get(f"/admin/social/block/?blocker__id__exact={ann.pk}")
        mutes = client.get("/admin/social/mute/")
        change = client.post(f"/admin/social/block/{blocks.context['cl'].result_list[0].pk}/change/", {})

        assert [(b.blocker.username, b.blocked.username) for b in blocks.context["cl"].result_list] == [("ann", "ben")]
        assert [(m.muter.username, m.muted.username) for m in mutes.context["cl"].result_list] == [("ann", "dan")]
        assert change.status_code == 403  # read-only: blocks change through the services

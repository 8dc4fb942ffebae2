"""Journeys of the controls (issue 16): block from a profile, approve a follow request.

As in ``test_feed``, tasks go to the real worker, and each journey waits
for what the worker does, never for a fixed time.
"""

from __future__ import annotations

import re

import pytest
from django.db import connections

from feed import services as feed_services
from feed.models import Note
from social import models as social_models
from social import services as social_services
from social.models import Follow, FollowRequest
from tests.support.accounts import make_user
from tests.support.browser import WORKER_TIMEOUT, inbox_id_set, note_ids, wait_for_fan_out, wait_for_synced_inbox, wait_until
from users.models import User

pytestmark = pytest.mark.django_db(transaction=True)


class TestBlockFromAProfile:
    def test_the_follow_button_and_the_notes_go(self, stack, open_session, shot):
        reader = make_user("alice")
        author = make_user("bob")
        social_services.follow_create(actor=reader, followee_id=author.pk)
        note = feed_services.note_create(author=author, body="A note alice will block away.")
        wait_for_fan_out([note.pk])
        wait_until(lambda: note.pk in inbox_id_set(reader), timeout=WORKER_TIMEOUT, what="the note in alice's inbox")
        session = open_session(reader, label="alice")
        page = session.page
        page.goto("/u/bob/")
        assert page.locator("button.follow-button").inner_text() == "Following"
        assert "A note alice will block away." in page.locator("section[aria-label=Notes]").inner_text()

        page.locator("details.more-actions summary").click()
        page.locator("#block-button").click()
        page.wait_for_url(re.compile(r"/u/bob/$"))
        shot(session, "blocked-profile")

        assert page.locator("button.follow-button").count() == 0
        assert page.locator("#unblock-button").is_visible()
        assert page.locator("#blocked-notice").is_visible()
        assert "A note alice will block away." not in page.content()
        assert not Follow.objects.filter(follower=reader, followee=author).exists()
        wait_until(lambda: note.pk not in inbox_id_set(reader), timeout=WORKER_TIMEOUT, what="the note out of alice's inbox")
        page.goto("/home")
        assert note.pk not in note_ids(page)


class TestApproveAFollowRequest:
    def test_the_new_follower_receives_the_accounts_notes(self, stack, open_session, shot):
        owner = make_user("alice", approve_followers=True)
        earlier = feed_services.note_create(author=owner, body="Written before bob asked.")
        asker = make_user("bob")
        wait_for_fan_out([earlier.pk])
        bob = open_session(asker, label="bob")
        bob.page.goto("/u/alice/")
        assert bob.page.locator("#private-notice").is_visible()
        bob.page.get_by_role("button", name="Request to follow").click()
        bob.page.wait_for_url(re.compile(r"/u/alice/$"))
        assert bob.page.locator("button.follow-button").inner_text() == "Requested"
        assert FollowRequest.objects.filter(requester=asker, target=owner).exists()

        alice = open_session(owner, label="alice")
        alice.page.goto("/requests/")
        row = alice.page.locator('li[data-requester="bob"]')
        shot(alice, "follow-requests")
        row.get_by_role("button", name="Approve").click()
        alice.page.wait_for_url(re.compile(r"/requests/$"))
        assert alice.page.locator('li[data-requester="bob"]').count() == 0
        assert Follow.objects.filter(follower=asker, followee=owner).exists()

        later = feed_services.note_create(author=owner, body="Written after approving bob.")
        wait_for_fan_out([later.pk])
        wait_for_synced_inbox(asker)
        wait_until(
            lambda: {earlier.pk, later.pk} <= inbox_id_set(asker), timeout=WORKER_TIMEOUT, what="both notes in bob's inbox"
        )
        bob.page.goto("/home")
        shot(bob, "home-after-approval")

        assert note_ids(bob.page)[:2] == [later.pk, earlier.pk]
        assert Note.objects.filter(author=owner).count() == 2


class TestNotificationsJourney:
    def test_the_unread_count_rises_on_a_follow_and_clears_on_the_page(self, stack, open_session, shot):
        from notifications.models import Notification

        owner = make_user("alice")
        fan = make_user("bob")
        session = open_session(owner, label="alice")
        page = session.page
        page.goto("/home")
        assert page.locator("#unread-count").count() == 0

        social_services.follow_create(actor=fan, followee_id=owner.pk)
        wait_until(
            lambda: Notification.objects.filter(recipient=owner).exists(),
            timeout=WORKER_TIMEOUT,
            what="the notification written by the worker",
        )
        page.reload()
        assert page.locator("#unread-count").inner_text() == "1"
        shot(session, "unread-badge")

        page.locator("a.nav-notifications").click()
        page.wait_for_url(re.compile(r"/notifications/$"))
        assert "@bob followed you" in page.locator("ol.notifications").inner_text()
        assert page.locator("#unread-count").count() == 0
        page.goto("/home")
        assert page.locator("#unread-count").count() == 0


class TestExportThenImport:
    def test_another_account_follows_the_same_accounts(self, stack, open_session, shot, tmp_path):
        alice, dave = make_user("alice"), make_user("dave")
        followed = [make_user(name) for name in ("bob", "carol", "erin")]
        for target in followed:
            social_services.follow_create(actor=alice, followee_id=target.pk)
        exporter = open_session(alice, label="alice")
        exporter.page.goto("/settings/follows/")
        with exporter.page.expect_download() as download:
            exporter.page.locator("#export-link").click()
        saved = tmp_path / "following_accounts.csv"
        download.value.save_as(saved)
        assert saved.read_text().splitlines() == [
            "Account address,Show boosts,Notify on new posts,Languages",
            "bob,true,false,",
            "carol,true,false,",
            "erin,true,false,",
        ]

        importer = open_session(dave, label="dave")
        importer.page.goto("/settings/follows/")
        # Hold bob's row: the import's first follow waits on it, so the page comes back with the
        # import under way whatever the machine's load, and then has to move its bar by itself.
        held = connections.create_connection("default")
        with held.cursor() as cursor:
            cursor.execute("START TRANSACTION")
            cursor.execute(f"SELECT id FROM {User._meta.db_table} WHERE id = %s FOR UPDATE", [followed[0].pk])
        try:
            importer.page.locator("#import-file").set_input_files(str(saved))
            importer.page.get_by_role("button", name="Import").click()
            importer.page.wait_for_selector("#import-status")
            under_way = importer.page.locator("#import-status").get_attribute("data-finished")
        finally:
            with held.cursor() as cursor:
                cursor.execute("ROLLBACK")
            held.close()
        wait_until(
            lambda: Follow.objects.filter(follower=dave).count() == 3, timeout=WORKER_TIMEOUT, what="the import run by the worker"
        )
        # No reload: the page polls the import and moves its bar to the end by itself.
        importer.page.wait_for_selector("#import-status[data-finished='true']", timeout=WORKER_TIMEOUT * 1000)
        shot(importer, "import-finished")

        assert under_way == "false"  # the page came back before the worker was done
        assert importer.page.locator("#import-progress").get_attribute("value") == "3"
        assert "3 of 3 accounts handled, 3 followed, finished." in importer.page.locator(".import-summary").inner_text()
        assert importer.page.locator(".reload-hint").count() == 0
        assert set(Follow.objects.filter(follower=dave).values_list("followee__username", flat=True)) == {"bob", "carol", "erin"}


class TestWhoToFollow:
    def test_follow_someone_from_the_page_and_the_suggestion_leaves(self, stack, open_session, shot):
        from social import suggestions

        reader, friend = make_user("alice"), make_user("bob")
        picks = [make_user(name) for name in ("carol", "dave")]
        social_services.follow_create(actor=reader, followee_id=friend.pk)
        for pick in picks:
            social_services.follow_create(actor=friend, followee_id=pick.pk)
        suggestions.suggestions_refresh(user_id=reader.pk)
        session = open_session(reader, label="alice")
        page = session.page
        page.goto("/suggestions/")
        rows = page.locator("ol.suggestions li")
        assert [rows.nth(i).get_attribute("data-user") for i in range(rows.count())] == ["carol", "dave"]
        assert "followed by @bob you follow" in rows.first.inner_text()
        shot(session, "who-to-follow")

        page.locator('li[data-user="carol"]').get_by_role("button", name="Follow").click()
        page.wait_for_url(re.compile(r"/suggestions/$"))

        assert page.locator('li[data-user="carol"]').count() == 0
        assert page.locator('li[data-user="dave"]').count() == 1
        assert Follow.objects.filter(follower=reader, followee=picks[0]).exists()
        page.goto("/home")
        wait_until(lambda: page.locator(".suggestions-box li").count() == 1, timeout=10, what="the home page's box filled")
        assert "Dave\nfollowed by @bob you follow" in page.locator(".suggestions-box").inner_text()


class TestRowActions:
    def test_mute_and_remove_from_a_followers_list(self, stack, open_session, shot):
        """A row's buttons post the page's one form (``row-action``) to their own action: in a
        browser, Mute mutes that row's account and Remove removes that follower."""
        owner = make_user("alice")
        fans = [make_user("bob"), make_user("charlie")]
        for fan in fans:
            social_services.follow_create(actor=fan, followee_id=owner.pk)
        session = open_session(owner, label="alice")
        page = session.page
        page.goto("/u/alice/followers/")

        charlie_row = page.locator("ol.follow-list li", has_text="@charlie")
        charlie_row.locator("details.row-actions summary").click()
        charlie_row.get_by_role("button", name="Mute").click()
        page.wait_for_url(re.compile(r"/u/charlie/$"))
        shot(session, "muted-from-a-row")

        assert social_models.Mute.objects.filter(muter=owner, muted=fans[1]).exists()
        assert not social_models.Mute.objects.filter(muter=owner, muted=fans[0]).exists()

        page.goto("/u/alice/followers/")
        page.locator("ol.follow-list li", has_text="@bob").get_by_role("button", name="Remove").click()
        page.wait_for_url(re.compile(r"/u/alice/followers/$"))

        assert not Follow.objects.filter(follower=fans[0], followee=owner).exists()
        assert Follow.objects.filter(follower=fans[1], followee=owner).exists()
        assert "@bob" not in page.locator("ol.follow-list").inner_text()

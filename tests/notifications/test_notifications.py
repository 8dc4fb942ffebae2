"""Notifications (issue 17): one row per event, idempotent, written after commit by the outbox job,
grouped per kind and day, an O(1) unread counter with the database as fallback and reconcile as
repair; blocked and muted accounts make none; the page and the API."""

from __future__ import annotations

import contextvars
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from core.models import OutboxEntry
from core.redis import redis_or_database
from notifications import redis_keys, selectors, services
from notifications.models import APPROVED, FOLLOW, REQUEST, Notification, NotificationGroup, UnreadCounter
from notifications.selectors import counter_publish
from social import controls
from social import services as social_services
from tests.client_api.conftest import Api, make_app, make_token
from tests.support.accounts import UserFactory, signed_in
from tests.support.graph import follow
from users import account_rows
from users.models import User

pytestmark = pytest.mark.django_db


class TestFollowNotification:
    def test_a_follow_notifies_the_followee_after_commit(self, alice, bob, django_capture_on_commit_callbacks):
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            social_services.follow_create(actor=alice, followee_id=bob.pk)
            before_commit = Notification.objects.count()
        for callback in callbacks:
            callback()

        row = Notification.objects.get()
        assert before_commit == 0
        assert (row.recipient_id, row.actor_id, row.kind, row.read_at) == (bob.pk, alice.pk, FOLLOW, None)
        assert selectors.unread_count(user_id=bob.pk) == 1
        assert selectors.unread_count(user_id=alice.pk) == 0

    def test_follow_unfollow_follow_within_a_minute_is_one_notification(self, alice, bob, run_commits):
        follow(alice, bob)
        run_commits(lambda: social_services.follow_delete(actor=alice, followee_id=bob.pk))
        follow(alice, bob)

        assert Notification.objects.count() == 1
        assert NotificationGroup.objects.get().count == 1
        assert selectors.unread_count(user_id=bob.pk) == 1

    def test_a_follow_again_after_the_minute_comes_back_unread_at_the_top(self, alice, bob, run_commits):
        follow(alice, bob)
        run_commits(lambda: services.notifications_mark_read(recipient_id=bob.pk))
        Notification.objects.update(created_at=timezone.now() - timedelta(minutes=5))
        run_commits(lambda: social_services.follow_delete(actor=alice, followee_id=bob.pk))

        follow(alice, bob)

        row = Notification.objects.get()
        assert row.read_at is None and row.created_at > timezone.now() - timedelta(seconds=5)
        assert selectors.unread_count(user_id=bob.pk) == 1
        assert NotificationGroup.objects.get().count == 1

    def test_an_unfollow_before_the_job_runs_leaves_no_notification(self, alice, bob, django_capture_on_commit_callbacks):
        with django_capture_on_commit_callbacks(execute=False):
            social_services.follow_create(actor=alice, followee_id=bob.pk)
        social_services.follow_delete_pair(follower_id=alice.pk, followee_id=bob.pk)
        entry = OutboxEntry.objects.get(kind="notifications.follow")
        assert entry.object_id is not None

        assert services.notification_add(FOLLOW, recipient_id=entry.subject_id, actor_id=entry.object_id) is False
        assert not Notification.objects.exists()

    def test_a_muted_or_blocked_actor_makes_none(self, alice, bob, charlie, run_commits):
        run_commits(lambda: controls.mute_create(actor=bob, target_id=alice.pk))
        follow(alice, bob)
        run_commits(lambda: controls.block_create(actor=charlie, target_id=bob.pk))

        assert not Notification.objects.exists()
        with pytest.raises(social_services.FollowBlockedError):
            social_services.follow_create(actor=bob, followee_id=charlie.pk)

    def test_a_block_between_the_follow_and_its_job_makes_none(self, alice, bob, run_commits, django_capture_on_commit_callbacks):
        with django_capture_on_commit_callbacks(execute=False):
            social_services.follow_create(actor=alice, followee_id=bob.pk)  # its job has not run yet
        entry = OutboxEntry.objects.get(kind="notifications.follow")
        assert entry.object_id is not None
        run_commits(lambda: controls.block_create(actor=bob, target_id=alice.pk))  # ends the follow before the job

        made = services.notification_add(FOLLOW, recipient_id=entry.subject_id, actor_id=entry.object_id)

        assert made is False
        assert not Notification.objects.exists()

    def test_a_block_standing_while_the_follow_still_exists_makes_none(self, alice, bob):
        # A follow row and a block between the same accounts, as a bulk import could leave them.
        from social.models import Block, Follow

        Follow.objects.create(follower=alice, followee=bob)
        Block.objects.create(blocker=bob, blocked=alice)

        assert services.notification_add(FOLLOW, recipient_id=bob.pk, actor_id=alice.pk) is False
        assert not Notification.objects.exists()


class TestGrouping:
    def test_many_follows_of_one_account_are_one_line(self, alice):
        fans = [UserFactory.create(username=f"fan{n:02d}") for n in range(44)]
        for fan in fans:
            follow(fan, alice)

        page = selectors.groups_page(user_id=alice.pk, cursor=None, limit=10)

        assert len(page.lines) == 1
        assert page.lines[0].count == 44
        assert page.lines[0].text == "@fan43, @fan42, @fan41 and 41 others followed you"
        assert selectors.unread_count(user_id=alice.pk) == 44

    def test_the_line_is_read_in_three_queries_whatever_its_size(self, alice, django_assert_num_queries):
        for fan in [UserFactory.create() for _ in range(30)]:
            follow(fan, alice)

        with django_assert_num_queries(3):  # the groups, the reader's blocks, the actors
            page = selectors.groups_page(user_id=alice.pk, cursor=None, limit=10)

        assert page.lines[0].count == 30

    def test_kinds_and_days_are_separate_lines_newest_first_with_a_cursor(self, alice, bob, charlie, run_commits):
        alice.approve_followers = True
        alice.save(update_fields=["approve_followers"])
        run_commits(lambda: social_services.follow_create(actor=bob, followee_id=alice.pk))  # a request
        run_commits(lambda: social_services.follow_create(actor=charlie, followee_id=alice.pk))  # another
        run_commits(lambda: controls.follow_request_approve(actor=alice, requester_id=bob.pk))  # bob follows alice now
        NotificationGroup.objects.filter(kind=REQUEST).update(updated_at=timezone.now() - timedelta(hours=1))

        first = selectors.groups_page(user_id=alice.pk, cursor=None, limit=1)
        second = selectors.groups_page(user_id=alice.pk, cursor=first.next_cursor, limit=1)
        bobs = selectors.groups_page(user_id=bob.pk, cursor=None, limit=5)

        assert [line.text for line in first.lines] == ["@bob followed you"]
        # bob's request was approved: only the pending one is still asking.
        assert [line.text for line in second.lines] == ["@charlie asked to follow you"]
        assert second.next_cursor is None
        assert [(line.kind, line.text) for line in bobs.lines] == [(APPROVED, "@alice approved your follow request")]


class TestUnreadCounter:
    def test_mark_all_read_clears_the_count(self, alice, bob, run_commits):
        follow(alice, bob)

        response = run_commits(lambda: signed_in(bob).post("/api/notifications/read"))

        assert response.json()["data"] == {"marked": 1}
        assert signed_in(bob).get("/api/notifications/unread").json()["data"] == {"unread": 0}
        assert not Notification.objects.filter(read_at__isnull=True).exists()

    def test_a_missing_counter_is_one_primary_key_read_and_is_set_again(
        self, alice, bob, charlie, redis_client, django_assert_num_queries
    ):
        follow(alice, bob)
        follow(charlie, bob)
        assert redis_client.get(redis_keys.unread_key(bob.pk)) == b"2:2"  # version 2, two unread
        redis_client.delete(redis_keys.unread_key(bob.pk))

        with django_assert_num_queries(1):
            missing = selectors.unread_count(user_id=bob.pk)
        with django_assert_num_queries(0):
            again = selectors.unread_count(user_id=bob.pk)

        assert missing == again == 2
        assert redis_client.get(redis_keys.unread_key(bob.pk)) == b"2:2"
        assert 0 < redis_client.ttl(redis_keys.unread_key(bob.pk)) <= redis_keys.UNREAD_TTL_SECONDS

    def test_ten_thousand_unread_cost_a_read_the_same(self, bob, redis_client, django_assert_num_queries):
        # A celebrity's minute: 10,000 new followers, each a notification.
        fans = User.objects.bulk_create([User(username=f"storm{n}", password="!") for n in range(10_000)], batch_size=2000)
        group = NotificationGroup.objects.create(recipient=bob, kind=FOLLOW, day=timezone.now().date(), count=10_000)
        Notification.objects.bulk_create(
            [Notification(recipient=bob, actor=fan, kind=FOLLOW, group=group) for fan in fans], batch_size=2000
        )
        UnreadCounter.objects.create(recipient=bob, unread=10_000, version=10_000)

        with django_assert_num_queries(1) as missing:
            first = selectors.unread_count(user_id=bob.pk)
        with django_assert_num_queries(0):
            second = selectors.unread_count(user_id=bob.pk)

        assert first == second == 10_000
        # The counter row by its primary key, not a count of the 10,000 rows.
        sql = missing.captured_queries[0]["sql"]
        assert sql.startswith("SELECT `notifications_unreadcounter`") and "COUNT(" not in sql.upper()

    def test_an_older_write_never_replaces_a_newer_count(self, alice, bob, charlie, redis_client):
        follow(alice, bob)
        follow(charlie, bob)

        written = counter_publish(redis_client, bob.pk, 1, 1)  # the first job's write, arriving late

        assert written is False
        assert selectors.unread_count(user_id=bob.pk) == 2

    def test_a_counter_write_that_failed_is_made_by_the_drain(self, alice, bob, run_commits, redis_client, settings):
        from core.outbox import drain
        from core.redis import redis_reset_breaker

        dead = {**settings.CACHES["default"], "LOCATION": "redis://127.0.0.1:1/0"}
        live = settings.CACHES
        follow(alice, bob)
        settings.CACHES = {**live, "default": dead}  # Redis goes away before the mark-read
        run_commits(lambda: services.notifications_mark_read(recipient_id=bob.pk))
        during = selectors.unread_count(user_id=bob.pk)  # the counter row answers meanwhile
        settings.CACHES = live
        redis_reset_breaker()
        stale = redis_client.get(redis_keys.unread_key(bob.pk))

        drain(task_grace_seconds=0)

        assert during == 0
        assert stale == b"1:1"
        assert redis_client.get(redis_keys.unread_key(bob.pk)) == b"2:0"

    def test_reconcile_repairs_a_wrong_counter_row_and_wrong_mirrors(self, alice, bob, charlie, run_commits, redis_client):
        follow(alice, bob)
        follow(bob, alice)
        follow(charlie, alice)
        redis_client.set(redis_keys.unread_key(bob.pk), "7")  # garbage
        redis_client.set(redis_keys.unread_key(alice.pk), "99:3")  # a version from nowhere
        UnreadCounter.objects.filter(pk=charlie.pk).delete()
        Notification.objects.filter(recipient=alice, actor=charlie).update(read_at=timezone.now())  # behind the counter's back

        found = run_commits(lambda: services.notifications_reconcile(dry_run=True))
        repaired = run_commits(services.notifications_reconcile)

        assert (found.counters_found, found.counters_fixed, found.mirrors_found, found.mirrors_fixed) == (1, 0, 2, 0)
        # alice's row (and with it her mirror, of a version from nowhere) and bob's mirror
        assert repaired == services.NotificationsDrift(counters_found=1, counters_fixed=1, mirrors_found=2, mirrors_fixed=2)
        assert UnreadCounter.objects.get(pk=alice.pk).unread == 1
        assert selectors.unread_count(user_id=bob.pk) == 1
        assert selectors.unread_count(user_id=alice.pk) == 1
        assert selectors.unread_count(user_id=charlie.pk) == 0
        assert services.notifications_reconcile() == services.NotificationsDrift()

    def test_read_within_the_repeat_window_stays_read(self, alice, bob, run_commits):
        follow(alice, bob)
        run_commits(lambda: services.notifications_mark_read(recipient_id=bob.pk))
        run_commits(lambda: social_services.follow_delete(actor=alice, followee_id=bob.pk))

        follow(alice, bob)  # within the minute: the same notification, still read

        assert selectors.unread_count(user_id=bob.pk) == 0
        assert Notification.objects.get().read_at is not None

    def test_one_that_came_after_the_page_was_read_stays_unread(self, alice, bob, charlie, run_commits):
        follow(alice, bob)
        page = selectors.groups_page(user_id=bob.pk, cursor=None, limit=10)
        follow(charlie, bob)  # commits between the page's read and its mark-read

        marked = run_commits(lambda: services.notifications_mark_read(recipient_id=bob.pk, up_to=page.lines[0].updated_at))

        assert marked == 1
        assert selectors.unread_count(user_id=bob.pk) == 1
        assert Notification.objects.get(read_at__isnull=True).actor_id == charlie.pk

    def test_the_header_shows_the_count_and_the_page_clears_it(self, alice, bob, run_commits):
        follow(alice, bob)
        client = signed_in(bob)

        home = client.get("/home")
        page = run_commits(lambda: client.get("/notifications/"))
        after = client.get("/home")

        assert b'id="unread-count">1<' in home.content
        assert b"@alice followed you" in page.content
        assert b'id="unread-count"' not in after.content


class TestTheCountReadWithTheSession:
    def test_a_page_s_header_count_comes_with_the_session_s_read(self, alice, bob, charlie, monkeypatch, redis_backend):
        follow(alice, bob)
        client = signed_in(bob)
        client.get("/home")  # this process learns the session's account
        own_reads: list[int] = []
        real = redis_or_database

        def spy(*args: Any, **kwargs: Any) -> Any:
            own_reads.append(1)
            return real(*args, **kwargs)

        monkeypatch.setattr("notifications.selectors.redis_or_database", spy)
        home = client.get("/home")
        follow(charlie, bob)  # a notification between two pages
        after = client.get("/home")

        assert b'id="unread-count">1<' in home.content
        assert b'id="unread-count">2<' in after.content
        # One server: no read of its own; a cluster reads it apart (another slot).
        assert own_reads == ([] if redis_backend is None else [1, 1])

    def test_a_bearer_request_after_a_page_in_the_same_thread_reads_the_count_afresh(self, alice, bob, charlie):
        follow(alice, bob)
        make_token(bob, make_app(), token="bob-token")
        browser = signed_in(bob)
        browser.get("/home")
        assert b'id="unread-count">1<' in browser.get("/home").content
        contextvars.Context().run(follow, charlie, bob)  # in another worker: 2 unread now

        answers = [Api("bob-token").get(f"/api/{version}/notifications/unread_count") for version in ("v1", "v2")]

        assert [answer.json()["count"] for answer in answers] == [2, 2]
        assert account_rows.value_read_with_session(redis_keys.unread_key(bob.pk)) == (False, None)

    def test_a_request_that_changes_the_count_reads_it_again(self, alice, bob, run_commits):
        follow(alice, bob)
        key = redis_keys.unread_key(bob.pk)
        account_rows.values_read({key: redis_keys.unread_value(1, 5).encode()})  # what a session read brought
        assert selectors.unread_count(user_id=bob.pk) == 5

        run_commits(lambda: services.notifications_mark_read(recipient_id=bob.pk))

        assert account_rows.value_read_with_session(key) == (False, None)
        assert selectors.unread_count(user_id=bob.pk) == 0


class TestApi:
    def test_lists_lines_with_a_cursor(self, alice, bob, charlie):
        follow(alice, bob)
        follow(charlie, bob)

        data = signed_in(bob).get("/api/notifications?limit=5").json()["data"]

        assert data["next_cursor"] is None
        assert [(line["kind"], line["count"], line["text"]) for line in data["list"]] == [
            (FOLLOW, 2, "@charlie and @alice followed you")
        ]

    @pytest.mark.parametrize("query", ["cursor=abc", "cursor=99999999999999999999999:1", "limit=0", "limit=x"])
    def test_bad_input_is_400(self, bob, query):
        response = signed_in(bob).get(f"/api/notifications?{query}")

        assert response.status_code == 400

    def test_signed_out_is_401(self):
        assert Client().get("/api/notifications/unread").status_code == 401

    def test_the_pages_mark_all_read_button(self, alice, bob, run_commits):
        follow(alice, bob)

        response = run_commits(lambda: signed_in(bob).post("/notifications/read/"))

        assert response.status_code == 302 and response["Location"] == "/notifications/"
        assert selectors.unread_count(user_id=bob.pk) == 0


class TestBlocksInNotifications:
    def test_a_line_does_not_name_an_account_a_block_separates_since(self, alice, bob, charlie, run_commits):
        follow(alice, bob)
        follow(charlie, bob)
        run_commits(lambda: controls.block_create(actor=bob, target_id=alice.pk))

        line = selectors.groups_page(user_id=bob.pk, cursor=None, limit=5).lines[0]

        assert [actor.username for actor in line.actors] == ["charlie"]

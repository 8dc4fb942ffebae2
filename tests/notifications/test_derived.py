"""Notification rows, grouped lines and unread counters follow every change that adds, moves,
removes or hides a row (issue 23: C25, C26, C29), and ``reconcile_notifications`` finds and
repairs what a path behind the application's back left."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest
from django.core.management import call_command
from django.utils import timezone

from notifications import receivers, redis_keys, selectors, services
from notifications.models import FOLLOW, Notification, NotificationGroup, NotificationsReconcileRun, UnreadCounter
from social import controls
from social import services as social_services
from social.models import Block, Follow, FollowRequest
from tests.support.accounts import signed_in
from tests.support.graph import redis_edges
from users.models import User
from users.services import user_set_active

pytestmark = pytest.mark.django_db

# The forms a line takes (docs/behaviours.md, "Notifications"): names, never an empty one, or a count alone.
LINE = re.compile(
    r"^(@\w+|@\w+ and @\w+|@\w+, @\w+ and @\w+|@\w+(, @\w+){0,2} and [\d,]+ others?|[\d,]+ accounts?) "
    r"(followed you|asked to follow you|approved your follow request)$"
)


def texts(user: User) -> list[str]:
    """The user's lines as the page shows them, every one checked against ``LINE``."""
    lines = [line.text for line in selectors.groups_page(user_id=user.pk, cursor=None, limit=50).lines]
    assert all(LINE.match(text) for text in lines), lines
    return lines


def unread_everywhere(user: User, redis_client: object) -> tuple[int, int, int | None, int]:
    """The unread count as the API, the counter row, its Redis mirror and the header show it."""
    client = signed_in(user)
    api = client.get("/api/notifications/unread").json()["data"]["unread"]
    row = UnreadCounter.objects.filter(pk=user.pk).values_list("unread", flat=True).first() or 0
    mirror = redis_keys.unread_count_of(redis_client.get(redis_keys.unread_key(user.pk)))  # type: ignore[attr-defined]
    header = re.search(rb'id="unread-count">(\d+)<', client.get("/home").content)
    return api, row, mirror, int(header.group(1)) if header else 0


def make_private(user: User) -> None:
    controls.account_privacy_set(actor=user, private=True)


@contextlib.contextmanager
def frozen(at: datetime) -> Iterator[None]:
    """Inside the block the clock reads ``at`` (notifications stamp rows and days from it)."""
    with mock.patch.object(timezone, "now", return_value=at):
        yield


class TestC25BlockVersusRequest:
    def test_a_block_leaves_no_request_no_follow_and_no_line_naming_the_blocker(
        self, alice, bob, charlie, run_commits, redis_client
    ):
        run_commits(lambda: make_private(alice))
        run_commits(lambda: social_services.follow_create(actor=alice, followee_id=bob.pk))  # A -> B (B is public)
        run_commits(lambda: social_services.follow_create(actor=charlie, followee_id=alice.pk))  # C asks A
        run_commits(lambda: social_services.follow_create(actor=bob, followee_id=alice.pk))  # B asks A
        before = texts(alice)
        bob_before = texts(bob)

        run_commits(lambda: controls.block_create(actor=bob, target_id=alice.pk))

        assert before == ["@bob and @charlie asked to follow you"]
        assert bob_before == ["@alice followed you"]
        assert not FollowRequest.objects.filter(requester=bob, target=alice).exists()
        requests_page = signed_in(alice).get("/requests/").content
        assert b'data-requester="bob"' not in requests_page and b'data-requester="charlie"' in requests_page
        api_requests = signed_in(alice).get("/api/follow-requests").json()["data"]["list"]
        assert [entry["username"] for entry in api_requests] == ["charlie"]
        assert not Follow.objects.filter(follower=alice, followee=bob).exists()
        assert all(edges == set() for edges in redis_edges(redis_client, [alice.pk, bob.pk]).values())
        assert texts(alice) == ["@charlie asked to follow you"]
        assert texts(bob) == []
        assert not Notification.objects.filter(recipient=alice, actor=bob).exists()
        assert not Notification.objects.filter(recipient=bob, actor=alice).exists()
        assert unread_everywhere(alice, redis_client) == (1, 1, 1, 1)
        assert unread_everywhere(bob, redis_client) == (0, 0, 0, 0)
        response = signed_in(alice).put(f"/api/follow/{bob.pk}/false")
        assert response.status_code == 200
        assert response.json()["data"]["changed"] is False

    def test_the_page_hides_a_blocked_actor_before_the_blocks_job_ran(
        self, alice, bob, charlie, run_commits, django_capture_on_commit_callbacks
    ):
        run_commits(lambda: social_services.follow_create(actor=charlie, followee_id=alice.pk))
        run_commits(lambda: social_services.follow_create(actor=bob, followee_id=alice.pk))
        with django_capture_on_commit_callbacks(execute=False):
            controls.block_create(actor=alice, target_id=bob.pk)  # committed; its after-commit work has not run

        assert Notification.objects.filter(recipient=alice, actor=bob).exists()
        assert texts(alice) == ["@charlie followed you"]

    def test_a_line_whose_every_named_actor_is_hidden_counts_without_an_empty_name(
        self, alice, user_factory, run_commits, django_capture_on_commit_callbacks
    ):
        fans = [user_factory(username=f"fan{n}") for n in range(5)]
        for fan in fans:
            run_commits(lambda fan=fan: social_services.follow_create(actor=fan, followee_id=alice.pk))
        with django_capture_on_commit_callbacks(execute=False):
            for fan in fans[2:]:  # the three named ones, their jobs pending
                controls.block_create(actor=alice, target_id=fan.pk)

        assert texts(alice) == ["2 accounts followed you"]


class TestC26Deletion:
    @pytest.mark.parametrize("inline_rows", [200, 0], ids=["refreshed-in-the-request", "refreshed-by-the-task"])
    def test_a_deleted_followers_notification_leaves_no_trace(
        self, alice, bob, run_commits, redis_client, monkeypatch, inline_rows
    ):
        monkeypatch.setattr(receivers, "INLINE_ACTOR_ROWS", inline_rows)
        run_commits(lambda: social_services.follow_create(actor=bob, followee_id=alice.pk))
        before = (texts(alice), unread_everywhere(alice, redis_client))

        run_commits(lambda: User.objects.get(pk=bob.pk).delete())

        assert before == (["@bob followed you"], (1, 1, 1, 1))
        assert texts(alice) == []
        assert unread_everywhere(alice, redis_client) == (0, 0, 0, 0)
        assert list(NotificationGroup.objects.filter(recipient=alice).values_list("count", "latest_actor_ids")) == [(0, [])]

    def test_a_deleted_requesters_request_and_its_line_go(self, alice, bob, charlie, run_commits, redis_client):
        run_commits(lambda: make_private(alice))
        run_commits(lambda: social_services.follow_create(actor=charlie, followee_id=alice.pk))
        run_commits(lambda: social_services.follow_create(actor=bob, followee_id=alice.pk))
        before = (texts(alice), unread_everywhere(alice, redis_client))

        run_commits(lambda: User.objects.get(pk=bob.pk).delete())

        assert before == (["@bob and @charlie asked to follow you"], (2, 2, 2, 2))
        assert texts(alice) == ["@charlie asked to follow you"]
        assert unread_everywhere(alice, redis_client) == (1, 1, 1, 1)
        assert list(FollowRequest.objects.filter(target=alice).values_list("requester_id", flat=True)) == [charlie.pk]

    def test_deactivation_hides_the_actor_and_reactivation_brings_back_what_still_holds(
        self, alice, bob, charlie, run_commits, redis_client
    ):
        run_commits(lambda: social_services.follow_create(actor=charlie, followee_id=alice.pk))
        run_commits(lambda: social_services.follow_create(actor=bob, followee_id=alice.pk))

        run_commits(lambda: user_set_active(user=User.objects.get(pk=bob.pk), is_active=False))
        hidden = (texts(alice), unread_everywhere(alice, redis_client))
        run_commits(lambda: user_set_active(user=User.objects.get(pk=bob.pk), is_active=True))

        assert hidden == (["@charlie followed you"], (1, 1, 1, 1))
        assert texts(alice) == ["@bob and @charlie followed you"]
        assert unread_everywhere(alice, redis_client) == (2, 2, 2, 2)


class TestC29ActorMovesToAnotherDay:
    def test_the_day_it_left_no_longer_names_or_counts_it(self, alice, bob, charlie, run_commits, redis_client):
        day1 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
        with frozen(day1):
            run_commits(lambda: social_services.follow_create(actor=bob, followee_id=alice.pk))
        with frozen(day1 + timedelta(minutes=1)):
            run_commits(lambda: social_services.follow_create(actor=charlie, followee_id=alice.pk))
        day1_lines = texts(alice)

        with frozen(day1 + timedelta(days=1)):
            run_commits(lambda: social_services.follow_delete(actor=bob, followee_id=alice.pk))
            run_commits(lambda: social_services.follow_create(actor=bob, followee_id=alice.pk))

        assert day1_lines == ["@charlie and @bob followed you"]
        lines = selectors.groups_page(user_id=alice.pk, cursor=None, limit=10).lines
        assert [(line.updated_at.date().isoformat(), line.text, line.count) for line in lines] == [
            ("2026-11-03", "@bob followed you", 1),
            ("2026-11-02", "@charlie followed you", 1),
        ]
        assert sum("@bob" in line.text for line in lines) == 1
        assert unread_everywhere(alice, redis_client) == (2, 2, 2, 2)


class TestAJobThatMakesNoRow:
    """A job makes its recipient's counter and day group before it takes the lock and checks
    the change again; when it then makes no row, what it made must already agree with its
    (absent) rows: the reconcile finds nothing and the page shows no line (the soak found one)."""

    def test_a_block_between_the_jobs_two_checks(self, alice, bob, run_commits, redis_client, monkeypatch):
        run_commits(lambda: social_services.follow_create(actor=bob, followee_id=alice.pk))
        Notification.objects.all().delete()
        NotificationGroup.objects.all().delete()
        ensure_rows = services._ensure_rows

        def ensure_then_blocked(*args, **kwargs):
            ensure_rows(*args, **kwargs)
            # Another request's block commits after the job's first check, before its lock.
            run_commits(lambda: controls.block_create(actor=alice, target_id=bob.pk))

        monkeypatch.setattr(services, "_ensure_rows", ensure_then_blocked)

        made = services.notification_add(FOLLOW, recipient_id=alice.pk, actor_id=bob.pk)

        assert made is False
        assert list(NotificationGroup.objects.values_list("count", "unread")) == [(0, False)]
        assert services.notifications_reconcile(dry_run=True).as_dict() == services.NotificationsDrift().as_dict()
        assert texts(alice) == []

    def test_a_follow_again_within_the_minute_across_midnight(self, alice, bob, run_commits, redis_client):
        late = datetime(2026, 11, 2, 23, 59, 40, tzinfo=UTC)
        with frozen(late):
            run_commits(lambda: social_services.follow_create(actor=bob, followee_id=alice.pk))
        with frozen(late + timedelta(seconds=30)):  # the next day, within REPEAT_SECONDS
            run_commits(lambda: social_services.follow_delete(actor=bob, followee_id=alice.pk))
            run_commits(lambda: social_services.follow_create(actor=bob, followee_id=alice.pk))

        days = NotificationGroup.objects.order_by("day").values_list("day", "count", "unread")
        assert [(day.isoformat(), count, unread) for day, count, unread in days] == [
            ("2026-11-02", 1, True),
            ("2026-11-03", 0, False),
        ]
        assert services.notifications_reconcile(dry_run=True).as_dict() == services.NotificationsDrift().as_dict()
        assert texts(alice) == ["@bob followed you"]
        assert unread_everywhere(alice, redis_client) == (1, 1, 1, 1)


class TestRequestsThatEnd:
    @pytest.mark.parametrize("ending", ["withdrawn", "rejected", "approved"])
    def test_the_asking_line_goes_with_the_request(self, alice, bob, charlie, run_commits, redis_client, ending):
        run_commits(lambda: make_private(alice))
        run_commits(lambda: social_services.follow_create(actor=charlie, followee_id=alice.pk))
        run_commits(lambda: social_services.follow_create(actor=bob, followee_id=alice.pk))
        end = {
            "withdrawn": lambda: social_services.follow_delete(actor=bob, followee_id=alice.pk),
            "rejected": lambda: controls.follow_request_reject(actor=alice, requester_id=bob.pk),
            "approved": lambda: controls.follow_request_approve(actor=alice, requester_id=bob.pk),
        }[ending]

        run_commits(end)

        expected = {"approved": ["@bob followed you", "@charlie asked to follow you"]}.get(
            ending, ["@charlie asked to follow you"]
        )
        assert texts(alice) == expected
        assert unread_everywhere(alice, redis_client)[:3] == (len(expected),) * 3


class TestPrivacyOff:
    def test_turning_approval_off_turns_the_asking_line_into_a_follow_line(self, alice, bob, run_commits, redis_client):
        run_commits(lambda: make_private(alice))
        run_commits(lambda: social_services.follow_create(actor=bob, followee_id=alice.pk))

        run_commits(lambda: controls.account_privacy_set(actor=alice, private=False))

        assert texts(alice) == ["@bob followed you"]
        assert texts(bob) == ["@alice approved your follow request"]
        assert unread_everywhere(alice, redis_client) == (1, 1, 1, 1)


class TestUnfollowKeepsHistory:
    def test_an_unfollow_or_a_removed_follower_keeps_the_line(self, alice, bob, charlie, run_commits, redis_client):
        run_commits(lambda: social_services.follow_create(actor=bob, followee_id=alice.pk))
        run_commits(lambda: social_services.follow_create(actor=charlie, followee_id=alice.pk))

        run_commits(lambda: social_services.follow_delete(actor=bob, followee_id=alice.pk))
        run_commits(lambda: controls.follower_remove(actor=alice, follower_id=charlie.pk))

        assert texts(alice) == ["@charlie and @bob followed you"]
        assert unread_everywhere(alice, redis_client) == (2, 2, 2, 2)


class TestReconcile:
    def test_finds_and_repairs_rows_groups_counters_and_mirrors_left_behind_the_apps_back(
        self, alice, bob, charlie, run_commits, redis_client
    ):
        run_commits(lambda: make_private(alice))
        run_commits(lambda: social_services.follow_create(actor=charlie, followee_id=alice.pk))
        run_commits(lambda: social_services.follow_create(actor=bob, followee_id=alice.pk))
        run_commits(lambda: social_services.follow_create(actor=alice, followee_id=bob.pk))
        # Behind the application's back: a block and a request deleted in SQL, a group
        # and a counter edited, a mirror set from nowhere.
        Block.objects.create(blocker=charlie, blocked=alice)
        FollowRequest.objects.filter(requester=bob, target=alice).delete()
        NotificationGroup.objects.filter(recipient=bob).update(count=5, latest_actor_ids=[alice.pk, charlie.pk])
        UnreadCounter.objects.filter(pk=bob.pk).update(unread=9)
        redis_client.set(redis_keys.unread_key(alice.pk), "999:4")

        found = run_commits(lambda: services.notifications_reconcile(dry_run=True))
        still = texts(bob)
        repaired = run_commits(services.notifications_reconcile)

        # rows: charlie's request to alice (a block between them), bob's (no request pending);
        # groups: alice's requests, bob's edited one; counters and mirrors: alice's and bob's.
        assert found == services.NotificationsDrift(rows_found=2, groups_found=2, counters_found=2, mirrors_found=2)
        assert still == ["@alice, @charlie and 3 others followed you"]  # the dry run changed nothing
        assert repaired == services.NotificationsDrift(
            rows_found=2,
            rows_fixed=2,
            groups_found=2,
            groups_fixed=2,
            counters_found=2,
            counters_fixed=2,
            mirrors_found=2,
            mirrors_fixed=2,
        )
        assert texts(alice) == []
        assert texts(bob) == ["@alice followed you"]
        assert unread_everywhere(alice, redis_client) == (0, 0, 0, 0)
        assert unread_everywhere(bob, redis_client) == (1, 1, 1, 1)
        assert services.notifications_reconcile(dry_run=True) == services.NotificationsDrift()

    def test_the_command_has_a_dry_run_and_the_health_page_shows_the_run(self, alice, bob, run_commits, redis_client, capsys):
        run_commits(lambda: social_services.follow_create(actor=bob, followee_id=alice.pk))
        UnreadCounter.objects.filter(pk=alice.pk).update(unread=3)
        admin = User.objects.create_superuser(username="root", password="pw")

        call_command("reconcile_notifications", "--dry-run")
        dry = capsys.readouterr().out
        left = UnreadCounter.objects.get(pk=alice.pk).unread
        run_commits(lambda: call_command("reconcile_notifications"))
        page = signed_in(admin).get("/admin/core/outboxentry/health/")

        assert "counters_found: 1" in dry and "counters_fixed: 0" in dry and left == 3
        assert UnreadCounter.objects.get(pk=alice.pk).unread == 1
        run = NotificationsReconcileRun.objects.order_by("-pk").first()
        assert run is not None and (run.dry_run, run.counters_found, run.counters_fixed) == (False, 1, 1)
        assert page.status_code == 200
        assert b"Notifications reconcile" in page.content

    def test_runs_in_the_nightly_schedule(self, settings):
        tasks = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}

        assert "notifications.tasks.notifications_unread_reconcile" in tasks

"""The transactional outbox: written with the follow, applied after commit, drained when that failed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from social import recovery, redis_keys, services
from social.mirror import MirrorNotConverged, outbox_apply
from social.models import Follow, MirrorOutbox
from social.recovery import outbox_drain_pending
from social.tasks import social_outbox_drain
from tests.social.helpers import assert_mirror_equals_database

pytestmark = pytest.mark.django_db

DEAD_REDIS = "redis://127.0.0.1:1/0"


def pending() -> list[tuple[int, int | None]]:
    return list(MirrorOutbox.objects.filter(applied_at__isnull=True).order_by("id").values_list("follower_id", "followee_id"))


class TestWrittenWithTheFollow:
    def test_a_rolled_back_follow_leaves_no_row_no_entry_and_no_redis_change(self, alice, bob, redis_client):
        with pytest.raises(RuntimeError):
            with transaction.atomic():
                services.follow_create(actor=alice, target_id=bob.pk)
                raise RuntimeError("the request failed after the follow")

        assert not Follow.objects.exists()
        assert not MirrorOutbox.objects.exists()
        assert redis_client.scard(redis_keys.following_set_key(alice.pk)) == 0

    def test_a_crash_between_commit_and_redis_write_is_caught_up_by_the_drain(self, alice, bob, redis_client, django_capture_on_commit_callbacks):
        with django_capture_on_commit_callbacks(execute=False):  # the process dies before its on_commit work
            services.follow_create(actor=alice, target_id=bob.pk)
        assert pending() == [(alice.pk, bob.pk)]
        assert not redis_client.sismember(redis_keys.following_set_key(alice.pk), bob.pk)

        result = social_outbox_drain()

        assert result == {"applied": 1, "stuck": 0, "rebuild_queued": False, "redis_down": False}
        assert pending() == []
        assert_mirror_equals_database(redis_client, [alice.pk, bob.pk])

    def test_every_change_writes_one_entry_and_a_repeat_writes_none(self, alice, bob, django_capture_on_commit_callbacks):
        with django_capture_on_commit_callbacks(execute=True):
            services.follow_create(actor=alice, target_id=bob.pk)
            services.follow_create(actor=alice, target_id=bob.pk)
            services.follow_delete(actor=alice, target_id=bob.pk)
            services.follow_delete(actor=alice, target_id=bob.pk)

        assert MirrorOutbox.objects.count() == 2
        assert pending() == []


class TestApplyIsIdempotent:
    def test_out_of_order_and_repeated_entries_leave_the_current_state(self, alice, bob, redis_client, django_capture_on_commit_callbacks):
        with django_capture_on_commit_callbacks(execute=False):
            services.follow_create(actor=alice, target_id=bob.pk)
            services.follow_delete(actor=alice, target_id=bob.pk)
        Follow.objects.create(follower=alice, followee=bob, created_at=timezone.now().replace(microsecond=0) + timedelta(seconds=5))
        third = MirrorOutbox.objects.create(follower_id=alice.pk, followee_id=bob.pk)
        entries = list(MirrorOutbox.objects.order_by("-id"))

        outbox_apply(entries)  # newest first
        outbox_apply(entries[::-1])  # then oldest first, again
        outbox_apply([third])

        score = redis_client.zscore(redis_keys.followers_zset_key(bob.pk), alice.pk)
        assert score == int(Follow.objects.get().created_at.timestamp())
        assert_mirror_equals_database(redis_client, [alice.pk, bob.pk])

    def test_a_late_entry_for_an_edge_deleted_since_does_not_bring_it_back(self, alice, bob, redis_client, django_capture_on_commit_callbacks):
        with django_capture_on_commit_callbacks(execute=False):
            services.follow_create(actor=alice, target_id=bob.pk)
        late = list(MirrorOutbox.objects.all())
        with django_capture_on_commit_callbacks(execute=True):
            services.follow_delete(actor=alice, target_id=bob.pk)

        outbox_apply(late)

        assert not redis_client.sismember(redis_keys.followers_set_key(bob.pk), alice.pk)
        assert redis_client.zcard(redis_keys.following_zset_key(alice.pk)) == 0


class TestDrain:
    def test_redis_down_leaves_entries_pending_and_says_so(self, alice, bob, settings, django_capture_on_commit_callbacks):
        settings.CACHES = {**settings.CACHES, "default": {**settings.CACHES["default"], "LOCATION": DEAD_REDIS}}
        with django_capture_on_commit_callbacks(execute=True):
            result = services.follow_create(actor=alice, target_id=bob.pk)

        drained = outbox_drain_pending()

        assert result.changed is True
        assert drained.redis_down is True and drained.applied == 0
        assert pending() == [(alice.pk, bob.pk)]
        assert MirrorOutbox.objects.get().attempts == 0  # the drain never got to it

    def test_a_pair_that_keeps_changing_stays_pending_without_blocking_the_others(
        self, alice, bob, charlie, redis_client, monkeypatch, django_capture_on_commit_callbacks
    ):
        with django_capture_on_commit_callbacks(execute=False):
            services.follow_create(actor=alice, target_id=bob.pk)
            services.follow_create(actor=charlie, target_id=bob.pk)
            services.follow_create(actor=bob, target_id=alice.pk)

        def hot(entries):
            if any(e.follower_id == charlie.pk for e in entries):
                raise MirrorNotConverged("charlie -> bob kept changing")
            return outbox_apply(entries)

        monkeypatch.setattr(recovery, "outbox_apply", hot)
        first = outbox_drain_pending(batch=2)
        monkeypatch.setattr(recovery, "outbox_apply", outbox_apply)
        second = outbox_drain_pending(batch=2)

        assert (first.applied, first.stuck) == (2, 1)
        assert (second.applied, second.stuck) == (1, 0)
        assert pending() == []
        assert MirrorOutbox.objects.get(follower_id=charlie.pk).attempts == 2
        assert_mirror_equals_database(redis_client, [alice.pk, bob.pk, charlie.pk])

    def test_applied_entries_older_than_a_day_are_purged(self, alice, bob, django_capture_on_commit_callbacks):
        with django_capture_on_commit_callbacks(execute=True):
            services.follow_create(actor=alice, target_id=bob.pk)
            services.follow_delete(actor=alice, target_id=bob.pk)
        MirrorOutbox.objects.filter(follower_id=alice.pk).update(applied_at=timezone.now() - timedelta(days=2))
        with django_capture_on_commit_callbacks(execute=False):
            services.follow_create(actor=bob, target_id=alice.pk)

        outbox_drain_pending()

        assert list(MirrorOutbox.objects.values_list("follower_id", flat=True)) == [bob.pk]

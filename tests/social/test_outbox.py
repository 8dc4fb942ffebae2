"""The transactional outbox: written with the follow, applied after commit, drained when that failed."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from core.models import OutboxEntry
from core.outbox import apply_entries
from core.outbox import drain as outbox_drain_pending
from core.tasks import outbox_drain as social_outbox_drain
from social import mirror, redis_keys, services
from social.mirror import MirrorNotConverged
from social.models import OUTBOX_PAIR, Follow
from tests.support.graph import assert_mirror_equals_database

pytestmark = pytest.mark.django_db

DEAD_REDIS = "redis://127.0.0.1:1/0"


def pending() -> list[tuple[int, int | None]]:
    return list(
        OutboxEntry.objects.filter(applied_at__isnull=True, kind=OUTBOX_PAIR)
        .order_by("id")
        .values_list("subject_id", "object_id")
    )


def graph_entries() -> Any:
    return OutboxEntry.objects.filter(kind=OUTBOX_PAIR)


class TestWrittenWithTheFollow:
    def test_a_rolled_back_follow_leaves_no_row_no_entry_and_no_redis_change(self, alice, bob, redis_client):
        with pytest.raises(RuntimeError), transaction.atomic():
            services.follow_create(actor=alice, followee_id=bob.pk)
            raise RuntimeError("the request failed after the follow")

        assert not Follow.objects.exists()
        assert not OutboxEntry.objects.exists()
        assert redis_client.scard(redis_keys.following_set_key(alice.pk)) == 0

    def test_a_crash_between_commit_and_redis_write_is_caught_up_by_the_drain(
        self, alice, bob, redis_client, django_capture_on_commit_callbacks
    ):
        with django_capture_on_commit_callbacks(execute=False):  # the process dies before its on_commit work
            services.follow_create(actor=alice, followee_id=bob.pk)
        assert pending() == [(alice.pk, bob.pk)]
        assert not redis_client.sismember(redis_keys.following_set_key(alice.pk), bob.pk)

        result = social_outbox_drain()

        # The follow's feed job is left to its Celery task for OUTBOX_TASK_GRACE_SECONDS.
        assert result == {"applied": 1, "stuck": 0, "rebuilt": False, "redis_down": False, "reapplied": 0}
        assert pending() == []
        assert_mirror_equals_database(redis_client, [alice.pk, bob.pk])

    def test_every_change_writes_one_entry_and_a_repeat_writes_none(self, alice, bob, django_capture_on_commit_callbacks):
        with django_capture_on_commit_callbacks(execute=True):
            services.follow_create(actor=alice, followee_id=bob.pk)
            services.follow_create(actor=alice, followee_id=bob.pk)
            services.follow_delete(actor=alice, followee_id=bob.pk)
            services.follow_delete(actor=alice, followee_id=bob.pk)

        assert graph_entries().count() == 2
        assert pending() == []


class TestApplyIsIdempotent:
    def test_out_of_order_and_repeated_entries_leave_the_current_state(
        self, alice, bob, redis_client, django_capture_on_commit_callbacks
    ):
        with django_capture_on_commit_callbacks(execute=False):
            services.follow_create(actor=alice, followee_id=bob.pk)
            services.follow_delete(actor=alice, followee_id=bob.pk)
        Follow.objects.create(
            follower=alice, followee=bob, created_at=timezone.now().replace(microsecond=0) + timedelta(seconds=5)
        )
        third = OutboxEntry.objects.create(kind=OUTBOX_PAIR, subject_id=alice.pk, object_id=bob.pk)
        entries = list(graph_entries().order_by("-id"))

        apply_entries(entries)  # newest first
        apply_entries(entries[::-1])  # then oldest first, again
        apply_entries([third])

        score = redis_client.zscore(redis_keys.followers_zset_key(bob.pk), alice.pk)
        assert score == int(Follow.objects.get().created_at.timestamp())
        assert_mirror_equals_database(redis_client, [alice.pk, bob.pk])

    def test_a_late_entry_for_an_edge_deleted_since_does_not_bring_it_back(
        self, alice, bob, redis_client, django_capture_on_commit_callbacks
    ):
        with django_capture_on_commit_callbacks(execute=False):
            services.follow_create(actor=alice, followee_id=bob.pk)
        late = list(graph_entries())
        with django_capture_on_commit_callbacks(execute=True):
            services.follow_delete(actor=alice, followee_id=bob.pk)

        apply_entries(late)

        assert not redis_client.sismember(redis_keys.followers_set_key(bob.pk), alice.pk)
        assert redis_client.zcard(redis_keys.following_zset_key(alice.pk)) == 0


class TestDrain:
    def test_redis_down_leaves_entries_pending_and_says_so(self, alice, bob, settings, django_capture_on_commit_callbacks):
        settings.CACHES = {**settings.CACHES, "default": {**settings.CACHES["default"], "LOCATION": DEAD_REDIS}}
        with django_capture_on_commit_callbacks(execute=True):
            result = services.follow_create(actor=alice, followee_id=bob.pk)

        drained = outbox_drain_pending()

        assert result.changed is True
        assert drained.redis_down is True and drained.applied == 0
        assert pending() == [(alice.pk, bob.pk)]
        assert graph_entries().get().attempts == 0  # the drain never got to it

    def test_a_pair_that_keeps_changing_stays_pending_without_blocking_the_others(
        self, alice, bob, charlie, redis_client, monkeypatch, django_capture_on_commit_callbacks
    ):
        with django_capture_on_commit_callbacks(execute=False):
            services.follow_create(actor=alice, followee_id=bob.pk)
            services.follow_create(actor=charlie, followee_id=bob.pk)
            services.follow_create(actor=bob, followee_id=alice.pk)

        real = mirror.mirror_apply_pairs

        def hot(pairs, **options):
            pairs = list(pairs)
            if any(follower_id == charlie.pk for follower_id, _ in pairs):
                raise MirrorNotConverged("charlie -> bob kept changing")
            return real(pairs, **options)

        monkeypatch.setattr("social.outbox.mirror_apply_pairs", hot)
        first = outbox_drain_pending(batch=2)
        monkeypatch.setattr("social.outbox.mirror_apply_pairs", real)
        second = outbox_drain_pending(batch=2)

        assert (first.applied, first.stuck) == (2, 1)
        assert (second.applied, second.stuck) == (1, 0)
        assert pending() == []
        assert graph_entries().get(subject_id=charlie.pk).attempts == 2
        assert_mirror_equals_database(redis_client, [alice.pk, bob.pk, charlie.pk])

    def test_applied_entries_older_than_a_day_are_purged(self, alice, bob, django_capture_on_commit_callbacks):
        with django_capture_on_commit_callbacks(execute=True):
            services.follow_create(actor=alice, followee_id=bob.pk)
            services.follow_delete(actor=alice, followee_id=bob.pk)
        graph_entries().filter(subject_id=alice.pk).update(applied_at=timezone.now() - timedelta(days=2))
        with django_capture_on_commit_callbacks(execute=False):
            services.follow_create(actor=bob, followee_id=alice.pk)

        outbox_drain_pending()

        assert list(graph_entries().values_list("subject_id", flat=True)) == [bob.pk]


class TestAPoisonEntry:
    def test_an_entry_its_handler_fails_on_stays_pending_with_its_error_and_the_others_are_applied(
        self, alice, bob, redis_client, django_capture_on_commit_callbacks
    ):
        from core import outbox

        def handler(entries):
            raise ValueError(f"cannot take {[e.subject_id for e in entries]}")

        poison = outbox.register("test.poison", apply=handler)
        try:
            with django_capture_on_commit_callbacks(execute=False):
                with transaction.atomic():
                    outbox.record(poison, subject_id=7)
                services.follow_create(actor=alice, followee_id=bob.pk)

            result = outbox_drain_pending(task_grace_seconds=0)
        finally:
            outbox._kinds.pop("test.poison")

        stuck = OutboxEntry.objects.get(kind="test.poison")
        assert (result.applied, result.stuck, result.redis_down) == (
            OutboxEntry.objects.filter(applied_at__isnull=False).count(),
            1,
            False,
        )
        assert stuck.applied_at is None and stuck.last_error == "ValueError('cannot take [7]')"
        assert pending() == []
        assert_mirror_equals_database(redis_client, [alice.pk, bob.pk])

    def test_a_key_of_another_type_holds_up_its_entry_alone_and_the_breaker_stays_closed(
        self, alice, bob, charlie, redis_client, settings, django_capture_on_commit_callbacks
    ):
        from core.redis import breaker_node, redis_available

        settings.REDIS_CIRCUIT_OPEN_SECONDS = 30.0
        with django_capture_on_commit_callbacks(execute=False):
            services.follow_create(actor=alice, followee_id=bob.pk)
            services.follow_create(actor=charlie, followee_id=bob.pk)
        broken = redis_keys.following_set_key(alice.pk)
        redis_client.delete(broken)
        redis_client.set(broken, "not a set")

        result = outbox_drain_pending(task_grace_seconds=0)

        left = OutboxEntry.objects.filter(applied_at__isnull=True)
        # The mirror's write and the inbox's backfill of alice's follow both meet her key.
        assert (result.redis_down, result.stuck) == (False, 2)
        assert sorted(left.values_list("kind", "subject_id", "object_id")) == [
            ("feed.pair", alice.pk, bob.pk),
            (OUTBOX_PAIR, alice.pk, bob.pk),
        ]
        stuck = graph_entries().get(subject_id=alice.pk, applied_at__isnull=True)
        assert stuck.last_error.startswith("ResponseError: ") and "WRONGTYPE" in stuck.last_error
        assert redis_client.sismember(redis_keys.following_set_key(charlie.pk), bob.pk)
        assert redis_available(breaker_node(broken))

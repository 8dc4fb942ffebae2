"""The request's provisional mirror write (no verifying read) can land after any later work of its pair.

A follow's request writes the pair to Redis after commit without reading the
database again; the follow's feed job confirms it with a verified write. When
the request's write is late (a paused process), the confirmation and even a
later unfollow may have landed before it: the fence of ``social.mirror``
refuses it, so no order of the after-commit work leaves the mirror wrong.
"""

from __future__ import annotations

import itertools

import pytest

from core.models import OutboxEntry
from core.outbox import drain
from social import services
from tests.support.graph import assert_mirror_equals_database, redis_edges

pytestmark = pytest.mark.django_db


def _commit(capture, action):
    """Run ``action`` in a transaction; return its after-commit callbacks, not yet run."""
    with capture(execute=False) as callbacks:
        action()
    return list(callbacks)


class TestLateProvisionalWrite:
    def test_a_follow_written_after_its_confirmation_and_an_unfollow_is_refused(
        self, alice, bob, redis_client, django_capture_on_commit_callbacks
    ):
        follow = _commit(django_capture_on_commit_callbacks, lambda: services.follow_create(actor=alice, followee_id=bob.pk))
        provisional, *confirmation = follow
        for callback in confirmation:  # the follow's job: confirms the pair, verified
            callback()
        unfollow = _commit(django_capture_on_commit_callbacks, lambda: services.follow_delete(actor=alice, followee_id=bob.pk))
        for callback in unfollow:
            callback()

        provisional()  # the request's own write lands last
        drain()

        assert not OutboxEntry.objects.filter(applied_at__isnull=True, kind="social.pair").exists()
        assert redis_edges(redis_client, [alice.pk, bob.pk])["following_set"] == set()
        assert_mirror_equals_database(redis_client, [alice.pk, bob.pk])

    @pytest.mark.parametrize("order", list(itertools.permutations(range(4))))
    def test_every_order_of_two_commits_work_ends_equal_to_the_database(
        self, order, alice, bob, redis_client, django_capture_on_commit_callbacks
    ):
        # follow, unfollow, follow: four after-commit callbacks of the first two commits run in
        # every order (the third commit's run last), and the drain confirms what is pending.
        callbacks = _commit(django_capture_on_commit_callbacks, lambda: services.follow_create(actor=alice, followee_id=bob.pk))
        callbacks += _commit(django_capture_on_commit_callbacks, lambda: services.follow_delete(actor=alice, followee_id=bob.pk))
        assert len(callbacks) >= 2
        steps = [callbacks[index] for index in order if index < len(callbacks)]
        for step in steps:
            step()

        drain()

        assert redis_edges(redis_client, [alice.pk, bob.pk])["following_set"] == set()
        assert_mirror_equals_database(redis_client, [alice.pk, bob.pk])

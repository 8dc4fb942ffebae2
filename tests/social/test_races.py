"""Concurrency: processes with their own database connections toggle the same pair and the same celebrity.

Afterwards (once the outbox is drained) the database, the Redis sets, the
sorted sets and the counts agree, and no count read meanwhile was negative.
"""

from __future__ import annotations

import multiprocessing
import random
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connections

from core.models import OutboxEntry
from core.outbox import drain as outbox_drain_pending
from social import selectors, services
from social.models import Follow
from social.reconcile import reconcile_all
from tests.support.graph import assert_mirror_equals_database
from users.models import User

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

PROCESSES = 8


def count_rounds(
    rounds: int, seed: int, step: Callable[[int, random.Random], None], refusals: tuple[type[Exception], ...] = ()
) -> tuple[int, int]:
    """Run ``step(index, rng)`` ``rounds`` times in a child; an exception of ``refusals`` is an
    answer the rules give, any other is printed and counted. Closes the child's connections at
    the end. Returns (ops, errors)."""
    rng = random.Random(seed)
    ops = errors = 0
    for index in range(rounds):
        try:
            step(index, rng)
        except refusals:
            pass
        except Exception as exc:  # noqa: BLE001 - counted and asserted zero
            print("race error", repr(exc)[:300], flush=True)
            errors += 1
        ops += 1
    connections.close_all()
    return ops, errors


def toggle_pair(args: tuple[int, int, int, int]) -> tuple[int, int]:
    """Child: follow then unfollow ``followee`` as ``follower``, ``rounds`` times each; returns (ops, errors)."""
    follower_id, followee_id, rounds, seed = args
    connections.close_all()
    actor = User.objects.get(pk=follower_id)

    def step(index: int, rng: random.Random) -> None:
        if (index + rng.randint(0, 1)) % 2 == 0:
            services.follow_create(actor=actor, followee_id=followee_id)
        else:
            services.follow_delete(actor=actor, followee_id=followee_id)

    return count_rounds(rounds, seed, step)


def toggle_celebrity(args: tuple[list[int], int, int, int]) -> tuple[int, int]:
    """Child: random follows and unfollows of ``celebrity_id`` by its own ``follower_ids``."""
    follower_ids, celebrity_id, rounds, seed = args
    connections.close_all()
    actors = list(User.objects.filter(pk__in=follower_ids))

    def step(index: int, rng: random.Random) -> None:
        actor = rng.choice(actors)
        if rng.random() < 0.5:
            services.follow_create(actor=actor, followee_id=celebrity_id)
        else:
            services.follow_delete(actor=actor, followee_id=celebrity_id)

    return count_rounds(rounds, seed, step)


def toggle_block_or_follows(args: tuple[int, int, int, int, str]) -> tuple[int, int]:
    """Child: ``rounds`` random blocks and unblocks (``role`` "block") or follows and unfollows
    either way (``role`` "follow") of one pair; a refusal the rules give (blocked already, a
    follow refused by the block) is an answer, not an error. Returns (ops, errors)."""
    a_id, b_id, rounds, seed, role = args
    from social import controls

    connections.close_all()
    a, b = User.objects.get(pk=a_id), User.objects.get(pk=b_id)

    def step(index: int, rng: random.Random) -> None:
        if role == "block":
            (controls.block_create if rng.random() < 0.5 else controls.block_delete)(actor=a, target_id=b_id)
            # One statement, one snapshot: a block and a follow of the pair side by side is an error.
            with connections["default"].cursor() as cursor:
                cursor.execute(
                    "SELECT EXISTS (SELECT 1 FROM social_block WHERE blocker_id = %s AND blocked_id = %s)"
                    " AND EXISTS (SELECT 1 FROM social_follow WHERE follower_id IN (%s, %s) AND followee_id IN (%s, %s))",
                    [a_id, b_id, a_id, b_id, a_id, b_id],
                )
                if cursor.fetchone()[0]:
                    raise AssertionError("a follow beside the block")
        else:
            actor, other = (a, b_id) if rng.random() < 0.5 else (b, a_id)
            (services.follow_create if rng.random() < 0.6 else services.follow_delete)(actor=actor, followee_id=other)

    return count_rounds(rounds, seed, step, refusals=(controls.ControlConflictError, services.FollowBlockedError))


def watch_counts(args: tuple[int, int, Any]) -> tuple[int, int]:
    """Child: read the followers count of ``user_id`` until ``stop`` is set; returns the lowest and
    the highest count seen."""
    user_id, _, stop = args
    connections.close_all()
    seen = []
    while not stop.is_set():
        seen.append(selectors.follow_counts(user_id=user_id).followers)
    connections.close_all()
    return min(seen), max(seen)


def run_children(target: Any, jobs: list[Any], watched_user_id: int) -> tuple[list[tuple[int, int]], tuple[int, int]]:
    """Fork one process per job (own DB connections) plus a count watcher; returns results and the
    (lowest, highest) count the watcher saw meanwhile."""
    connections.close_all()  # children must not share the parent's socket
    context = multiprocessing.get_context("fork")
    with context.Manager() as manager, context.Pool(len(jobs) + 1) as pool:
        manager_stop = manager.Event()
        watcher = pool.apply_async(watch_counts, ((watched_user_id, 0, manager_stop),))
        results = pool.map(target, jobs)
        manager_stop.set()
        lowest = watcher.get(timeout=60)
    return results, lowest


def drain_until_empty() -> int:
    """Drain like the beat would until nothing is pending; returns how many drains it took."""
    for attempt in range(1, 20):
        # No grace: a job that failed in a child (a deadlock under the storm) is as old as the
        # beat's next drain would find it.
        outbox_drain_pending(start_rebuild=False, task_grace_seconds=0)
        if not OutboxEntry.objects.filter(applied_at__isnull=True).exists():
            return attempt
    raise AssertionError("outbox did not drain")


class TestSamePair:
    def test_eight_processes_toggling_one_pair_500_times_end_with_redis_equal_to_the_database(self, user_factory, redis_client):
        alice, bob = user_factory(username="alice"), user_factory(username="bob")

        results, (lowest, highest) = run_children(
            toggle_pair, [(alice.pk, bob.pk, 500, seed) for seed in range(PROCESSES)], bob.pk
        )
        drain_until_empty()

        assert sum(ops for ops, _ in results) == PROCESSES * 500
        assert sum(errors for _, errors in results) == 0
        assert 0 <= lowest <= highest <= 1  # one pair: never a doubled or negative count meanwhile
        edge = Follow.objects.filter(follower=alice, followee=bob).first()
        expected = 1 if edge else 0
        assert selectors.follow_counts(user_id=bob.pk) == selectors.Counts(followers=expected, following=0)
        assert selectors.follow_counts(user_id=alice.pk) == selectors.Counts(followers=0, following=expected)
        assert_mirror_equals_database(redis_client, [alice.pk, bob.pk])
        full = reconcile_all(repair=False, check="full")  # scores too
        assert (full.edges_missing, full.edges_extra, full.scores_wrong) == (0, 0, 0)


class TestSameCelebrity:
    def test_eight_processes_following_and_unfollowing_one_account_agree_afterwards(self, user_factory, redis_client):
        celebrity = user_factory(username="celebrity")
        groups = [[user_factory().pk for _ in range(10)] for _ in range(PROCESSES)]

        results, (lowest, highest) = run_children(
            toggle_celebrity, [(ids, celebrity.pk, 150, seed) for seed, ids in enumerate(groups)], celebrity.pk
        )
        drain_until_empty()

        assert sum(errors for _, errors in results) == 0
        assert 0 <= lowest <= highest <= PROCESSES * 10  # never above the accounts that can follow
        followers = Follow.objects.filter(followee=celebrity).count()
        assert selectors.follow_counts(user_id=celebrity.pk).followers == followers
        everyone = [celebrity.pk] + [pk for ids in groups for pk in ids]
        assert_mirror_equals_database(redis_client, everyone)
        full = reconcile_all(repair=False, check="full")
        assert (full.edges_missing, full.edges_extra, full.scores_wrong) == (0, 0, 0)


class TestBlocksRacingFollows:
    def test_a_block_and_follows_of_one_pair_from_six_processes_never_stand_side_by_side(self, user_factory, redis_client):
        from social.control_mirror import controls_differences
        from social.models import Block

        alice, bob = user_factory(username="alice"), user_factory(username="bob")
        jobs = [(alice.pk, bob.pk, 300, 0, "block")] + [(alice.pk, bob.pk, 150, seed, "follow") for seed in range(1, 6)]

        results, (lowest, highest) = run_children(toggle_block_or_follows, jobs, bob.pk)
        drain_until_empty()

        blocked = Block.objects.filter(blocker=alice, blocked=bob).exists()
        follows = Follow.objects.filter(follower__in=[alice, bob], followee__in=[alice, bob]).count()
        assert sum(errors for _, errors in results) == 0
        assert 0 <= lowest <= highest <= 1
        assert not (blocked and follows)  # a follow never outlives a block
        assert_mirror_equals_database(redis_client, [alice.pk, bob.pk])
        assert controls_differences(redis_client, [alice.pk, bob.pk]) == set()

"""Invariant 5 with real faults: a private redis-server that dies, hangs, refuses, loses its data (C15)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from django.test import Client

from core import redis_keys as core_keys
from core.models import OutboxEntry
from core.outbox import now_ms
from core.redis import breaker_state, forget_sentinel, redis_reset_breaker
from core.tasks import outbox_drain as social_outbox_drain
from social import redis_keys, selectors, services
from social.models import OUTBOX_PAIR
from tests.support.accounts import signed_in
from tests.support.faults import RedisServer, accept_commands_again, point_at, refuse_every_command
from tests.support.graph import assert_mirror_equals_database

pytestmark = pytest.mark.django_db


def reject_writes(server: RedisServer) -> None:
    """The server turns into a replica of a master that does not exist: reads answer, writes raise READONLY."""
    server.client().execute_command("REPLICAOF", "127.0.0.1", "1")


def accept_writes_again(server: RedisServer) -> None:
    server.client().execute_command("REPLICAOF", "NO", "ONE")


FAULTS = {
    "killed": (lambda s: s.kill(), lambda s: s.start()),
    "refuses every command": (refuse_every_command, accept_commands_again),
    "read-only replica": (reject_writes, accept_writes_again),
}


def follow_then_fail(
    fault, private_redis, settings, capture, follower, followee, *, viewer
) -> tuple[Client, Callable[[RedisServer], None]]:
    """Make ``follower`` follow ``followee`` with Redis well, then give Redis ``fault`` (a key of
    FAULTS) with the circuit breaker held open 30 s. Returns (a client signed in as ``viewer``,
    the fault's recover function)."""
    settings.REDIS_CIRCUIT_OPEN_SECONDS = 30.0
    with capture(execute=True):
        services.follow_create(actor=follower, followee_id=followee.pk)
    fail, recover = FAULTS[fault]
    fail(private_redis)
    client = signed_in(viewer, raise_request_exception=False)
    return client, recover


class TestUnfollowDuringOutage:
    """C15: A→B in sync; Redis fails every command; A unfollows B; Redis recovers."""

    @pytest.mark.parametrize("fault", list(FAULTS))
    def test_unfollow_succeeds_pages_render_and_the_drain_removes_b(
        self, fault, private_redis, alice, bob, settings, django_capture_on_commit_callbacks
    ):
        client, recover = follow_then_fail(
            fault, private_redis, settings, django_capture_on_commit_callbacks, alice, bob, viewer=alice
        )

        with django_capture_on_commit_callbacks(execute=True):
            unfollowed = client.post(f"/u/{bob.username}/unfollow/", HTTP_ACCEPT="application/json")
        pages = {
            "profile": client.get(f"/u/{bob.username}/"),
            "following": client.get(f"/u/{alice.username}/following/"),
            "followers": client.get(f"/u/{bob.username}/followers/"),
            "api": client.get(f"/api/follow/or/not/{bob.pk}"),
        }
        pending_during = OutboxEntry.objects.filter(applied_at__isnull=True, kind=OUTBOX_PAIR).count()
        recover(private_redis)
        if fault == "killed":  # restarted empty: the sentinel is gone too
            private_redis.client().set(core_keys.sentinel_key(), now_ms())
        drained = social_outbox_drain()

        assert unfollowed.status_code in (200, 302)
        assert {name: page.status_code for name, page in pages.items()} == dict.fromkeys(pages, 200)
        assert f">{alice.display_name}<" not in pages["followers"].content.decode()
        assert pages["api"].json() == {"success": True, "errorMsg": None, "data": False}
        assert unfollowed.json()["success"] is True
        assert pending_during == 1
        # The mirror pair, the feed's job, which waited for it, and the re-derivation of alice's
        # "who to follow".
        assert drained["applied"] == 3 and not drained["redis_down"]
        assert not private_redis.client().sismember(redis_keys.following_set_key(alice.pk), bob.pk)
        assert OutboxEntry.objects.filter(applied_at__isnull=True, kind=OUTBOX_PAIR).count() == 0
        redis_reset_breaker()
        assert selectors.follow_counts(user_id=bob.pk).followers == 0
        assert_mirror_equals_database(private_redis.client(), [alice.pk, bob.pk])


class TestControlsDuringOutage:
    """Blocks and mutes while Redis fails: they succeed, pages answer from the database, and the
    drain brings the sets level once Redis is back."""

    @pytest.mark.parametrize("fault", list(FAULTS))
    def test_block_and_mute_succeed_pages_render_and_the_drain_mirrors_them(
        self, fault, private_redis, alice, bob, charlie, settings, django_capture_on_commit_callbacks
    ):
        from social.control_mirror import controls_differences

        client, recover = follow_then_fail(
            fault, private_redis, settings, django_capture_on_commit_callbacks, bob, alice, viewer=alice
        )

        with django_capture_on_commit_callbacks(execute=True):
            blocked = client.put(f"/api/block/{bob.pk}/true")
            muted = client.put(f"/api/mute/{charlie.pk}/true?duration=7d")
        as_bob = signed_in(bob, raise_request_exception=False)
        pages = {
            "bob sees alice": as_bob.get(f"/u/{alice.username}/"),
            "alice's followers": client.get(f"/u/{alice.username}/followers/"),
        }
        recover(private_redis)
        if fault == "killed":  # restarted empty: the sentinel is gone too
            private_redis.client().set(core_keys.sentinel_key(), now_ms())
        drained = social_outbox_drain()
        redis_reset_breaker()

        assert (blocked.status_code, muted.status_code) == (200, 200)
        assert {name: page.status_code for name, page in pages.items()} == {"bob sees alice": 404, "alice's followers": 200}
        assert f">{bob.display_name}<" not in pages["alice's followers"].content.decode()
        assert not drained["redis_down"]
        assert controls_differences(private_redis.client(), [alice.pk, bob.pk, charlie.pk]) == set()
        assert private_redis.client().smembers(redis_keys.blocks_key(alice.pk)) == {str(bob.pk).encode()}
        assert_mirror_equals_database(private_redis.client(), [alice.pk, bob.pk])


class TestBreaker:
    def test_a_hung_redis_costs_one_timeout_per_page_not_one_per_read(
        self, private_redis, alice, bob, charlie, settings, monkeypatch
    ):
        settings.REDIS_CIRCUIT_OPEN_SECONDS = 30.0
        settings.REDIS_SOCKET_TIMEOUT = 0.3
        attempts: list[str] = []
        from core import redis as core_redis

        real_get_redis = core_redis.get_redis

        def counted_get_redis():
            attempts.append("redis")
            return real_get_redis()

        monkeypatch.setattr(core_redis, "get_redis", counted_get_redis)
        point_at(settings, private_redis)  # rebuild the client with the shorter timeout
        private_redis.pause()
        try:
            reads = [
                selectors.is_following(follower_id=alice.pk, followee_id=bob.pk),
                selectors.relationship(viewer_id=alice.pk, user_id=bob.pk).is_following,
                selectors.follow_counts(user_id=bob.pk).followers,
                len(selectors.followers_page(user_id=bob.pk, cursor=None, limit=10).entries),
                len(selectors.following_page(user_id=alice.pk, cursor=None, limit=10).entries),
                selectors.common_following(user_id=alice.pk, other_id=charlie.pk).count,
                selectors.familiar_followers(viewer_id=alice.pk, user_id=bob.pk).count,
                selectors.mutual_follows(user_id=alice.pk).count,
            ]
            state_while_hung = breaker_state()
        finally:
            private_redis.resume()

        assert reads == [False, False, 0, 0, 0, 0, 0, 0]  # answered from the database
        assert attempts == ["redis"]  # one attempt; the seven reads after it skipped Redis
        assert state_while_hung == "open"

    def test_after_the_open_period_one_probe_closes_the_breaker(
        self, private_redis, alice, bob, settings, django_capture_on_commit_callbacks
    ):
        settings.REDIS_CIRCUIT_OPEN_SECONDS = 0.2
        with django_capture_on_commit_callbacks(execute=True):
            services.follow_create(actor=alice, followee_id=bob.pk)
        private_redis.kill()
        assert selectors.follow_counts(user_id=bob.pk).followers == 1  # from the database
        assert breaker_state() == "open"
        private_redis.start()
        private_redis.client().set(core_keys.sentinel_key(), now_ms())
        time.sleep(0.25)

        answered = selectors.is_following(follower_id=alice.pk, followee_id=bob.pk)

        assert answered is False  # Redis restarted empty and answered: the probe closed the breaker
        assert breaker_state() == "closed"

    def test_a_follow_while_the_breaker_is_open_does_not_touch_redis(
        self, private_redis, alice, bob, settings, django_capture_on_commit_callbacks
    ):
        settings.REDIS_CIRCUIT_OPEN_SECONDS = 30.0
        private_redis.kill()
        selectors.follow_counts(user_id=bob.pk)  # opens the breaker
        private_redis.start()  # back, but this process does not know yet

        with django_capture_on_commit_callbacks(execute=True):
            result = services.follow_create(actor=alice, followee_id=bob.pk)

        assert result.changed is True
        assert OutboxEntry.objects.filter(applied_at__isnull=True, kind=OUTBOX_PAIR).count() == 1
        assert private_redis.client().scard(redis_keys.following_set_key(alice.pk)) == 0
        # The mirror pair, and the follow's jobs that waited for it: the feed's, "who to follow", the
        # notification, and the notification's write of the unread counter.
        assert social_outbox_drain()["applied"] == 5
        assert private_redis.client().sismember(redis_keys.following_set_key(alice.pk), bob.pk)


class TestDataLoss:
    """Redis restarted without persistence: detected by the sentinel and rebuilt in the background."""

    def test_reads_use_the_database_until_the_drain_started_rebuild_sets_the_sentinel(
        self, private_redis, user_factory, django_capture_on_commit_callbacks
    ):
        users = [user_factory() for _ in range(6)]
        with django_capture_on_commit_callbacks(execute=True):
            for follower in users[1:]:
                services.follow_create(actor=follower, followee_id=users[0].pk)
            services.follow_create(actor=users[0], followee_id=users[1].pk)
        private_redis.kill()
        private_redis.start()  # empty: no RDB, no AOF
        forget_sentinel()

        counts_during = selectors.follow_counts(user_id=users[0].pk)
        drained = social_outbox_drain()  # eager in tests: the rebuild it queues runs inline

        assert counts_during == selectors.Counts(followers=5, following=1)  # from the database
        assert drained["rebuilt"] is True
        assert private_redis.client().exists(core_keys.sentinel_key())
        assert not private_redis.client().exists(core_keys.rebuild_lock_key())
        assert_mirror_equals_database(private_redis.client(), [u.pk for u in users])
        assert selectors.follow_counts(user_id=users[0].pk) == selectors.Counts(followers=5, following=1)

    def test_no_second_rebuild_while_one_holds_the_lock(self, private_redis, alice):
        client = private_redis.client()
        client.delete(core_keys.sentinel_key())
        client.set(core_keys.rebuild_lock_key(), "other-worker", ex=60)

        drained = social_outbox_drain()

        assert drained["rebuilt"] is False
        assert not client.exists(core_keys.sentinel_key())
        assert client.get(core_keys.rebuild_lock_key()) == b"other-worker"


# --- many writers through a Redis crash and a worker crash -----------------


def random_writer(args: tuple[list[int], int, int, int]) -> tuple[int, int]:
    """Child process: ``ops`` random follows/unfollows among ``user_ids`` (30% aimed at ``hot_id``).

    :returns: ``(ops_done, errors)``; each op is its own request-like transaction.
    """
    import random

    from django.db import connections

    from users.models import User

    user_ids, hot_id, ops, seed = args
    connections.close_all()
    rng = random.Random(seed)
    actors = {u.pk: u for u in User.objects.filter(pk__in=user_ids)}
    done = errors = 0
    while done < ops:
        actor = actors[rng.choice(user_ids)]
        target = hot_id if rng.random() < 0.3 else rng.choice(user_ids)
        if target == actor.pk:
            continue
        try:
            if rng.random() < 0.55:
                services.follow_create(actor=actor, followee_id=target)
            else:
                services.follow_delete(actor=actor, followee_id=target)
        except Exception as exc:  # noqa: BLE001 - counted and asserted zero
            print("writer error", repr(exc)[:300], flush=True)
            errors += 1
        done += 1
    from core.sender import flush_sends

    flush_sends()  # a pool process ends without running exit handlers
    connections.close_all()
    return done, errors


@pytest.mark.slow
@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
@pytest.mark.filterwarnings("ignore:task_always_eager has no effect on send_task")  # sending to the broker is the point
class TestManyWritersThroughFaults:
    WRITERS = 5
    OPS_EACH = 2000

    def test_ten_thousand_ops_survive_a_redis_crash_and_a_worker_killed_mid_drain(
        self, request, settings, user_factory, redis_isolated
    ):
        import multiprocessing
        import uuid

        from django.db import connections

        from social.reconcile import reconcile_all
        from tests.support.faults import CeleryWorker, purge_queue, send_drain, wait_until

        settings.REDIS_CIRCUIT_OPEN_SECONDS = 0.5
        server = RedisServer()
        server.start()
        request.addfinalizer(server.stop)  # the private redis-server must not outlive the test
        point_at(settings, server)
        probe = server.client()
        probe.set(core_keys.sentinel_key(), now_ms())
        users = [user_factory() for _ in range(40)]
        ids = [u.pk for u in users]
        queue = f"ff_faults_{uuid.uuid4().hex[:8]}"
        worker = CeleryWorker(queue=queue, redis_url=server.url, extra_env={"SOCIAL_OUTBOX_DRAIN_BATCH": "20"})
        second = CeleryWorker(queue=queue, redis_url=server.url, extra_env={"SOCIAL_OUTBOX_DRAIN_BATCH": "20"})

        def outbox() -> tuple[int, int]:
            graph = OutboxEntry.objects.filter(kind=OUTBOX_PAIR)
            return graph.count(), graph.filter(applied_at__isnull=True).count()

        def drain() -> None:  # what beat sends every SOCIAL_OUTBOX_DRAIN_SECONDS
            send_drain(queue)

        try:
            worker.start()
            connections.close_all()
            context = multiprocessing.get_context("fork")
            jobs = [(ids, ids[0], self.OPS_EACH, seed) for seed in range(self.WRITERS)]
            with context.Pool(self.WRITERS) as pool:
                running = pool.map_async(random_writer, jobs)
                # Redis dies after 1,000 changes and comes back empty 2,000 changes later.
                wait_until(lambda: outbox()[0] >= 1000, timeout=300, what="1,000 changes")
                server.kill()
                killed_at = outbox()[0]
                wait_until(lambda: outbox()[0] >= killed_at + 2000, timeout=300, what="2,000 changes with Redis down")
                server.start()
                results = running.get(timeout=600)
            _total, pending_before = outbox()
            # One drain, killed once it has applied some entries but not all.
            drain()
            wait_until(lambda: 0 < outbox()[1] < pending_before - 40, timeout=120, interval=0.01, what="drain under way")
            worker.kill()
            pending_after_kill = outbox()[1]
            # A new worker: the unacked drain is redelivered, beat keeps sending drains.
            second.start()
            drain()
            wait_until(
                lambda: (
                    outbox()[1] == 0 and probe.exists(core_keys.sentinel_key()) and not probe.exists(core_keys.rebuild_lock_key())
                ),
                timeout=300,
                interval=0.2,
                what="outbox drained and mirror rebuilt",
            )
            drain()  # and one more beat after everything settled
            wait_until(lambda: b"core.tasks.outbox_drain" in second.log.read_bytes(), timeout=60, what="final drain")
            time.sleep(1)
        finally:
            worker.stop()
            second.stop()
            purge_queue(queue)

        redis_reset_breaker()
        forget_sentinel()
        full = reconcile_all(repair=False, check="full")
        assert sum(done for done, _ in results) == self.WRITERS * self.OPS_EACH >= 10_000
        assert sum(errors for _, errors in results) == 0  # every write succeeded, Redis or not
        # Of the 2,000 changes made while Redis was down, those whose pair
        # changed again after the restart were confirmed by that change's feed
        # job (it applies the mirror entries of its pair first): many remain.
        assert pending_before >= 100 and 0 < pending_after_kill < pending_before
        assert outbox()[1] == 0
        assert_mirror_equals_database(probe, ids)  # sets and sorted sets, edge for edge
        assert (full.edges_missing, full.edges_extra, full.scores_wrong) == (0, 0, 0)  # scores too
        for user_id in ids:
            counts = selectors.follow_counts(user_id=user_id)
            assert counts.followers == _db_count(followee_id=user_id)
            assert counts.following == _db_count(follower_id=user_id)


def _db_count(**where: int) -> int:
    from social.models import Follow

    return Follow.objects.filter(**where).count()

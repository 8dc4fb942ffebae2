"""Invariant 5 with real faults: a private redis-server that dies, hangs, refuses, loses its data (C15)."""

from __future__ import annotations

import time

import pytest
from django.test import Client

from social import redis_keys, selectors, services
from social.models import MirrorOutbox
from social.redis_client import breaker_state, redis_reset_breaker
from social.tasks import social_outbox_drain
from tests.social.faults import RedisServer, point_at
from tests.social.helpers import assert_mirror_equals_database

pytestmark = pytest.mark.django_db


@pytest.fixture
def private_redis(settings, redis_isolated):
    """A redis-server of this test's own, which the application uses, with the sentinel set."""
    server = RedisServer()
    server.start()
    point_at(settings, server)
    server.client().set(redis_keys.social_sentinel_key(), "test")
    redis_reset_breaker()
    yield server
    server.stop()
    redis_reset_breaker()


def refuse_every_command(server: RedisServer) -> None:
    """The server answers every command of every client with NOAUTH (a password was set and clients dropped)."""
    server.client().config_set("requirepass", "rotated-secret")
    server.client(password="rotated-secret").execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")


def accept_commands_again(server: RedisServer) -> None:
    server.client(password="rotated-secret").config_set("requirepass", "")


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


class TestUnfollowDuringOutage:
    """C15: A→B in sync; Redis fails every command; A unfollows B; Redis recovers."""

    @pytest.mark.parametrize("fault", list(FAULTS))
    def test_unfollow_succeeds_pages_render_and_the_drain_removes_b(
        self, fault, private_redis, alice, bob, settings, django_capture_on_commit_callbacks
    ):
        settings.REDIS_CIRCUIT_OPEN_SECONDS = 30.0
        with django_capture_on_commit_callbacks(execute=True):
            services.follow_create(actor=alice, target_id=bob.pk)
        fail, recover = FAULTS[fault]
        fail(private_redis)
        client = Client(raise_request_exception=False)
        client.force_login(alice)

        with django_capture_on_commit_callbacks(execute=True):
            unfollowed = client.post(f"/u/{bob.username}/unfollow/", HTTP_ACCEPT="application/json")
        pages = {
            "profile": client.get(f"/u/{bob.username}/"),
            "following": client.get(f"/u/{alice.username}/following/"),
            "followers": client.get(f"/u/{bob.username}/followers/"),
            "api": client.get(f"/api/follow/or/not/{bob.pk}"),
        }
        pending_during = MirrorOutbox.objects.filter(applied_at__isnull=True).count()
        recover(private_redis)
        if fault == "killed":  # restarted empty: the sentinel is gone too
            private_redis.client().set(redis_keys.social_sentinel_key(), "test")
        drained = social_outbox_drain()

        assert unfollowed.status_code in (200, 302)
        assert {name: page.status_code for name, page in pages.items()} == dict.fromkeys(pages, 200)
        assert f">{alice.display_name}<" not in pages["followers"].content.decode()
        assert pages["api"].json() == {"success": True, "errorMsg": None, "data": False}
        assert unfollowed.json()["success"] is True
        assert pending_during == 1
        assert drained["applied"] == 1 and not drained["redis_down"]
        assert not private_redis.client().sismember(redis_keys.following_set_key(alice.pk), bob.pk)
        assert MirrorOutbox.objects.filter(applied_at__isnull=True).count() == 0
        redis_reset_breaker()
        assert selectors.follow_counts(user_id=bob.pk).followers == 0
        assert_mirror_equals_database(private_redis.client(), [alice.pk, bob.pk])


class TestBreaker:
    def test_a_hung_redis_costs_one_timeout_per_page_not_one_per_read(self, private_redis, alice, bob, charlie, settings, monkeypatch):
        settings.REDIS_CIRCUIT_OPEN_SECONDS = 30.0
        settings.REDIS_SOCKET_TIMEOUT = 0.3
        attempts: list[str] = []
        from social import selectors as selectors_module

        real_get_redis = selectors_module.get_redis
        monkeypatch.setattr(selectors_module, "get_redis", lambda: attempts.append("redis") or real_get_redis())
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

    def test_after_the_open_period_one_probe_closes_the_breaker(self, private_redis, alice, bob, settings, django_capture_on_commit_callbacks):
        settings.REDIS_CIRCUIT_OPEN_SECONDS = 0.2
        with django_capture_on_commit_callbacks(execute=True):
            services.follow_create(actor=alice, target_id=bob.pk)
        private_redis.kill()
        assert selectors.follow_counts(user_id=bob.pk).followers == 1  # from the database
        assert breaker_state() == "open"
        private_redis.start()
        private_redis.client().set(redis_keys.social_sentinel_key(), "test")
        time.sleep(0.25)

        answered = selectors.is_following(follower_id=alice.pk, followee_id=bob.pk)

        assert answered is False  # Redis restarted empty and answered: the probe closed the breaker
        assert breaker_state() == "closed"

    def test_a_follow_while_the_breaker_is_open_does_not_touch_redis(self, private_redis, alice, bob, settings, django_capture_on_commit_callbacks):
        settings.REDIS_CIRCUIT_OPEN_SECONDS = 30.0
        private_redis.kill()
        selectors.follow_counts(user_id=bob.pk)  # opens the breaker
        private_redis.start()  # back, but this process does not know yet

        with django_capture_on_commit_callbacks(execute=True):
            result = services.follow_create(actor=alice, target_id=bob.pk)

        assert result.changed is True
        assert MirrorOutbox.objects.filter(applied_at__isnull=True).count() == 1
        assert private_redis.client().scard(redis_keys.following_set_key(alice.pk)) == 0
        assert social_outbox_drain()["applied"] == 1
        assert private_redis.client().sismember(redis_keys.following_set_key(alice.pk), bob.pk)


class TestDataLoss:
    """Redis restarted without persistence: detected by the sentinel and rebuilt in the background."""

    def test_reads_use_the_database_until_the_drain_started_rebuild_sets_the_sentinel(
        self, private_redis, user_factory, django_capture_on_commit_callbacks
    ):
        users = [user_factory() for _ in range(6)]
        with django_capture_on_commit_callbacks(execute=True):
            for follower in users[1:]:
                services.follow_create(actor=follower, target_id=users[0].pk)
            services.follow_create(actor=users[0], target_id=users[1].pk)
        private_redis.kill()
        private_redis.start()  # empty: no RDB, no AOF
        selectors.forget_sentinel()

        counts_during = selectors.follow_counts(user_id=users[0].pk)
        drained = social_outbox_drain()  # eager in tests: the rebuild it queues runs inline

        assert counts_during == selectors.Counts(followers=5, following=1)  # from the database
        assert drained["rebuild_queued"] is True
        assert private_redis.client().exists(redis_keys.social_sentinel_key())
        assert not private_redis.client().exists(redis_keys.social_rebuild_lock_key())
        assert_mirror_equals_database(private_redis.client(), [u.pk for u in users])
        assert selectors.follow_counts(user_id=users[0].pk) == selectors.Counts(followers=5, following=1)

    def test_no_second_rebuild_while_one_holds_the_lock(self, private_redis, alice):
        client = private_redis.client()
        client.delete(redis_keys.social_sentinel_key())
        client.set(redis_keys.social_rebuild_lock_key(), "other-worker", ex=60)

        drained = social_outbox_drain()

        assert drained["rebuild_queued"] is False
        assert not client.exists(redis_keys.social_sentinel_key())
        assert client.get(redis_keys.social_rebuild_lock_key()) == b"other-worker"

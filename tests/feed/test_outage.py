"""Redis outage (C14): publishing still works, pages read the database, nothing is lost after recovery."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from core.outbox import drain
from core.paging import Cursor
from feed import selectors
from feed.models import Note
from tests.support.accounts import signed_in
from tests.support.feed import inbox_ids

pytestmark = pytest.mark.django_db

BASE_MS = int((timezone.now() - timedelta(hours=1)).timestamp() * 1000)


def all_pages(user, limit=2):
    ids: list[int] = []
    cursor: Cursor | None = None
    while True:
        page = selectors.home_timeline(user_id=user.pk, cursor=cursor, limit=limit)
        ids.extend(n.pk for n in page.notes)
        if page.next_cursor is None:
            return ids
        cursor = page.next_cursor


class TestNotePublishedWhileRedisIsDown:
    def test_the_note_is_kept_shown_from_the_database_and_delivered_after_recovery(
        self, active_alice, active_bob, follow, publish, synced, redis_switch, redis_client
    ):
        follow(active_alice, active_bob)
        synced(active_alice)
        n0 = publish(active_bob, "n0", at_ms=BASE_MS)
        n1 = publish(active_bob, "n1", at_ms=BASE_MS + 10)

        redis_switch(up=False)
        n2 = publish(active_bob, "n2", at_ms=BASE_MS + 20)  # the fan-out task fails
        client = signed_in(active_alice)
        during = client.get("/home")
        feed_during = selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=10)

        redis_switch(up=True)
        n3 = publish(active_bob, "n3", at_ms=BASE_MS + 30)
        inbox_before_repair = inbox_ids(redis_client, active_alice)
        repaired = drain(task_grace_seconds=0).applied

        assert Note.objects.filter(pk=n2.pk, fanned_out_at__isnull=True).count() == 0
        assert during.status_code == 200 and "n2" in during.content.decode()
        assert (feed_during.source, [n.body for n in feed_during.notes]) == ("database", ["n2", "n1", "n0"])
        assert inbox_before_repair == [n3.pk, n1.pk, n0.pk]
        assert repaired == 1
        assert inbox_ids(redis_client, active_alice) == [n3.pk, n2.pk, n1.pk, n0.pk]
        assert all_pages(active_alice) == [n3.pk, n2.pk, n1.pk, n0.pk]

    def test_publishing_through_the_api_answers_201_while_redis_is_down(self, active_bob, redis_switch):
        client = signed_in(active_bob)
        redis_switch(up=False)

        response = client.post("/api/notes", {"body": "still works"})

        assert response.status_code == 201
        assert Note.objects.get().fanned_out_at is None

    def test_follow_and_unfollow_work_and_the_feed_reads_the_database(
        self, active_alice, active_bob, follow, unfollow, publish, redis_switch
    ):
        note = publish(active_bob, "visible after follow")
        redis_switch(up=False)

        follow(active_alice, active_bob)
        followed = selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=5)
        unfollow(active_alice, active_bob)
        unfollowed = selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=5)

        assert [n.pk for n in followed.notes] == [note.pk]
        assert unfollowed.notes == []


class TestBreakerOpen:
    def test_home_sends_redis_nothing_while_the_breaker_is_open(
        self, active_alice, active_bob, follow, publish, synced, private_redis, settings, monkeypatch
    ):
        import redis as redis_py

        settings.REDIS_CIRCUIT_OPEN_SECONDS = 30.0
        follow(active_alice, active_bob)
        synced(active_alice)
        publish(active_bob, "while up", at_ms=BASE_MS)
        client = signed_in(active_alice)
        assert "while up" in client.get("/home").content.decode()
        private_redis.kill()
        client.get("/home")  # fails over: the breaker opens
        sent: list[object] = []
        send = redis_py.Redis.execute_command

        def spy(self, *args, **options):
            sent.append(args[0])
            return send(self, *args, **options)

        monkeypatch.setattr(redis_py.Redis, "execute_command", spy)

        page = client.get("/home")

        assert page.status_code == 200 and "while up" in page.content.decode()
        # The visit asked Redis whether the inbox is synced, past the open breaker: a hung Redis
        # then cost every home page a socket timeout.
        assert sent == []

"""Delivery through a real Celery worker process and RabbitMQ, on real Redis and MariaDB.

Each test has its own queue (so parallel runs never take each other's
tasks), its own key prefix and commits its rows (transactional tests), so
the worker, a separate process on the test database, sees them.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from config.celery_app import app
from core.sender import flush_sends
from feed import redis_keys, selectors, services
from feed.models import Note, from_ms
from feed.rebuild import inbox_rebuild
from social import services as social_services
from social.mirror import mirror_apply_pairs
from social.models import Follow
from tests.support.accounts import make_user
from tests.support.faults import DELIVERY_TIMEOUT, wait_until
from tests.support.feed import fanned_out, inbox, inbox_ids

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

BASE_MS = int((timezone.now() - timedelta(hours=1)).timestamp() * 1000)


def queued_messages(queue: str) -> int:
    """Messages waiting in ``queue`` (a passive declare; 0 when it does not exist)."""
    with app.connection_for_write() as conn:
        try:
            return int(conn.default_channel.queue_declare(queue, passive=True).message_count)
        except Exception:  # noqa: BLE001 - the queue was never declared
            return 0


def empty_queue(queue: str) -> None:
    """Drop the messages in ``queue`` but keep it (the producer remembers it declared it)."""
    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge(queue)


def delivered_to(client: Any, readers: list[Any], note: Note) -> int:
    """How many of ``readers`` have ``note`` in their inbox (one pipeline)."""
    pipe = client.pipeline(transaction=False)
    for reader in readers:
        pipe.zscore(redis_keys.inbox_key(reader.pk), redis_keys.note_member(note.pk))
    return sum(1 for score in pipe.execute() if score is not None)


def bulk_follow(readers: list[Any], author: Any) -> None:
    """Follow rows in bulk with the mirror applied explicitly (no signals, so no feed tasks)."""
    Follow.objects.bulk_create([Follow(follower_id=r.pk, followee_id=author.pk) for r in readers])
    mirror_apply_pairs([(r.pk, author.pk) for r in readers])


class TestRollbackAndCommitC16:
    def test_a_rolled_back_note_sends_nothing_and_a_committed_one_finds_its_row(self, queue, worker, redis_client):
        bob, alice = make_user("bob"), make_user("alice")
        social_services.follow_create(actor=alice, followee_id=bob.pk)
        wait_until(lambda: queued_messages(queue) == 1, timeout=10, what="the backfill task queued")
        empty_queue(queue)

        with pytest.raises(RuntimeError), transaction.atomic():
            services.note_create(author=bob, body="rolled back")
            raise RuntimeError("failed after the insert")
        flush_sends()  # what this process would send, sent
        after_rollback = queued_messages(queue)
        note = services.note_create(author=bob, body="committed")
        flush_sends()
        after_commit = queued_messages(queue)
        worker()
        wait_until(lambda: fanned_out(note), timeout=DELIVERY_TIMEOUT, what="fan-out")

        assert (after_rollback, after_commit) == (0, 1)
        assert list(Note.objects.values_list("body", flat=True)) == ["committed"]
        assert inbox(redis_client, alice) == [(str(note.pk).encode(), note.published_ms)]


class TestFanOutThroughTheWorker:
    def test_a_published_note_reaches_every_active_follower(self, worker, redis_client):
        worker()
        bob = make_user("bob")
        active = [make_user() for _ in range(30)]
        inactive = [make_user(active=False), make_user(last_seen_at=timezone.now() - timedelta(days=60))]
        for reader in active + inactive:
            social_services.follow_create(actor=reader, followee_id=bob.pk)

        note = services.note_create(author=bob, body="to everyone")
        wait_until(lambda: fanned_out(note), timeout=DELIVERY_TIMEOUT, what="fan-out")

        assert delivered_to(redis_client, active, note) == 30
        assert delivered_to(redis_client, inactive, note) == 0
        assert redis_client.zscore(redis_keys.outbox_key(bob.pk), note.pk) == note.published_ms

    def test_a_worker_killed_mid_fan_out_is_replaced_and_every_follower_gets_the_note_once(self, worker, redis_client):
        bob = make_user("bob")
        readers = [make_user() for _ in range(60)]
        bulk_follow(readers, bob)  # no backfill tasks ahead of the fan-out in the queue
        first = worker(FEED_FANOUT_BATCH_SIZE="5", FEED_FANOUT_BATCH_PAUSE_SECONDS="0.3")

        note = services.note_create(author=bob, body="survives a crash")
        wait_until(
            lambda: delivered_to(redis_client, readers, note) >= 10,
            timeout=DELIVERY_TIMEOUT,
            interval=0.01,
            what="fan-out under way",
        )
        first.kill()  # SIGKILL: the task is not acknowledged
        at_kill = delivered_to(redis_client, readers, note)
        second = worker()  # a new worker gets the redelivered message
        wait_until(lambda: fanned_out(note), timeout=DELIVERY_TIMEOUT, what="fan-out finished")

        assert 10 <= at_kill < 60
        assert "core.tasks.outbox_apply" in second.log.read_text()  # the redelivered fan-out
        assert [inbox(redis_client, r) for r in readers] == [[(str(note.pk).encode(), note.published_ms)]] * 60

    def test_a_hybrid_author_appears_in_feeds_through_pull(self, worker, redis_client, settings):
        settings.FANOUT_PULL_THRESHOLD = 3
        worker(FANOUT_PULL_THRESHOLD="3")
        alice, bob, charlie = make_user("alice"), make_user("bob"), make_user("charlie")
        for reader in [alice, make_user(), make_user()]:
            social_services.follow_create(actor=reader, followee_id=bob.pk)
        social_services.follow_create(actor=alice, followee_id=charlie.pk)
        inbox_rebuild(user_id=alice.pk)

        b1 = services.note_create(author=bob, body="b1", created_at=from_ms(BASE_MS + 1))
        c1 = services.note_create(author=charlie, body="c1", created_at=from_ms(BASE_MS + 2))
        b2 = services.note_create(author=bob, body="b2", created_at=from_ms(BASE_MS + 3))
        wait_until(lambda: fanned_out(b1, c1, b2), timeout=DELIVERY_TIMEOUT, what="fan-outs")
        page = selectors.home_timeline(user_id=alice.pk, cursor=None, limit=10)

        assert inbox_ids(redis_client, alice) == [c1.pk]
        assert redis_client.sismember(redis_keys.pull_authors_key(), bob.pk)
        assert ([n.body for n in page.notes], page.source) == (["b2", "c1", "b1"], "redis")

    def test_unfollow_removes_and_follow_backfills(self, worker, redis_client):
        worker()
        alice, bob, charlie = make_user("alice"), make_user("bob"), make_user("charlie")
        social_services.follow_create(actor=alice, followee_id=bob.pk)
        social_services.follow_create(actor=alice, followee_id=charlie.pk)
        b1 = services.note_create(author=bob, body="b1", created_at=from_ms(BASE_MS + 100))
        c1 = services.note_create(author=charlie, body="c1", created_at=from_ms(BASE_MS + 101))
        b2 = services.note_create(author=bob, body="b2", created_at=from_ms(BASE_MS + 102))
        wait_until(lambda: len(inbox_ids(redis_client, alice)) == 3, timeout=DELIVERY_TIMEOUT, what="three notes")

        social_services.follow_delete(actor=alice, followee_id=bob.pk)
        wait_until(lambda: inbox_ids(redis_client, alice) == [c1.pk], timeout=DELIVERY_TIMEOUT, what="bob's notes removed")
        social_services.follow_create(actor=alice, followee_id=bob.pk)
        wait_until(lambda: len(inbox_ids(redis_client, alice)) == 3, timeout=DELIVERY_TIMEOUT, what="bob's notes backfilled")

        assert inbox(redis_client, alice) == [
            (str(b2.pk).encode(), BASE_MS + 102),
            (str(c1.pk).encode(), BASE_MS + 101),
            (str(b1.pk).encode(), BASE_MS + 100),
        ]

    def test_a_hidden_note_disappears_at_once_and_leaves_every_inbox(self, worker, redis_client):
        worker()
        bob = make_user("bob")
        readers = [make_user() for _ in range(5)]
        for reader in readers:
            social_services.follow_create(actor=reader, followee_id=bob.pk)
        inbox_rebuild(user_id=readers[0].pk)
        kept = services.note_create(author=bob, body="kept", created_at=from_ms(BASE_MS))
        hidden = services.note_create(author=bob, body="hidden", created_at=from_ms(BASE_MS + 1))
        wait_until(lambda: delivered_to(redis_client, readers, hidden) == 5, timeout=DELIVERY_TIMEOUT, what="delivery")

        services.note_hide(note=hidden, hidden=True)
        at_once = selectors.home_timeline(user_id=readers[0].pk, cursor=None, limit=10)
        wait_until(lambda: delivered_to(redis_client, readers, hidden) == 0, timeout=DELIVERY_TIMEOUT, what="withdrawal")

        assert [n.pk for n in at_once.notes] == [kept.pk]
        assert delivered_to(redis_client, readers, kept) == 5


published = st.lists(st.tuples(st.integers(0, 1), st.integers(0, 4)), min_size=1, max_size=10)
arrivals = st.lists(st.tuples(st.integers(1, 4), st.integers(0, 1), st.integers(0, 5)), max_size=4)


@pytest.fixture
def hypothesis_world(worker) -> dict[str, Any]:
    worker()
    alice = make_user("alice")
    authors = [make_user(), make_user()]
    for author in authors:
        social_services.follow_create(actor=alice, followee_id=author.pk)
    return {"alice": alice, "authors": authors}


@hypothesis_settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(initial=published, later=arrivals, limit=st.integers(1, 3))
def test_the_paging_invariant_holds_with_deliveries_by_the_worker(initial, later, limit, hypothesis_world, redis_client):
    """Notes delivered by the worker, many equal milliseconds, publishes between pages:
    every note once, newest first; a note published mid-scroll once iff it sorts after the reader."""
    alice, authors = hypothesis_world["alice"], hypothesis_world["authors"]
    Note.objects.all().delete()
    redis_client.delete(redis_keys.inbox_key(alice.pk))
    inbox_rebuild(user_id=alice.pk)

    def publish(a: int, t: int) -> Note:
        note = services.note_create(author=authors[a], body=f"{a}@{t}", created_at=from_ms(BASE_MS + t))
        wait_until(lambda: fanned_out(note), timeout=DELIVERY_TIMEOUT, what="fan-out")
        return note

    must = {publish(a, t).pk for a, t in initial}
    may: set[int] = set()
    seen: list[int] = []
    last_id, offset = None, 0
    for page_number in range(1, 60):
        page = selectors.home_timeline_scroll(user_id=alice.pk, last_id=last_id, offset=offset, limit=limit)
        seen.extend(n.pk for n in page.notes)
        if not page.has_more:
            break
        last_id, offset = page.min_time, page.offset
        last = page.notes[-1]
        for after_page, a, t in later:
            if after_page == page_number:
                note = publish(a, t)
                after = note.published_ms < last.published_ms or (note.published_ms == last.published_ms and note.pk > last.pk)
                (must if after else may).add(note.pk)

    assert len(seen) == len(set(seen))
    assert set(seen) == must
    scores = [Note.objects.get(pk=i).published_ms for i in seen]
    assert scores == sorted(scores, reverse=True)


class TestSplitFanOutOnTwoWorkers:
    def test_a_big_authors_parts_are_shared_by_two_workers_and_every_follower_gets_the_note(self, worker, redis_client):
        from core.models import OutboxEntry
        from feed.outbox import NOTE_PART_KIND

        # Parts of 20 followers, each slow enough (batches of 5, 50 ms apart) that both workers take some.
        env = {"FEED_FANOUT_PART_FOLLOWERS": "20", "FEED_FANOUT_BATCH_SIZE": "5", "FEED_FANOUT_BATCH_PAUSE_SECONDS": "0.05"}
        first, second = worker(**env), worker(**env)
        bob = make_user("bob")
        readers = [make_user() for _ in range(200)]
        bulk_follow(readers, bob)

        note = services.note_create(author=bob, body="to two hundred")
        parts = OutboxEntry.objects.filter(kind=NOTE_PART_KIND, subject_id=note.pk)
        wait_until(
            lambda: parts.count() == 10 and not parts.filter(applied_at__isnull=True).exists(),
            timeout=DELIVERY_TIMEOUT,
            what="ten parts applied",
        )

        assert delivered_to(redis_client, readers, note) == 200
        tasks_done = [
            sum(1 for line in process.log.read_text().splitlines() if "core.tasks.outbox_apply[" in line and "succeeded" in line)
            for process in (first, second)
        ]
        assert sum(tasks_done) == 11  # the note's entry, then one task per part
        assert min(tasks_done) >= 2  # both workers delivered parts


class TestBlockDuringFanOut:
    """Issue 16: a block that commits while the worker fans the blocked account's note out."""

    def test_the_note_never_stays_in_the_blockers_inbox(self, worker, redis_client):
        from social import controls

        bob = make_user("bob")
        readers = [make_user() for _ in range(40)]
        alice = readers[20]
        bulk_follow(readers, bob)  # no backfill tasks ahead of the fan-out in the queue
        worker(FEED_FANOUT_BATCH_SIZE="4", FEED_FANOUT_BATCH_PAUSE_SECONDS="0.2")

        note = services.note_create(author=bob, body="in flight while alice blocks bob")
        wait_until(
            lambda: delivered_to(redis_client, readers, note) >= 4,
            timeout=DELIVERY_TIMEOUT,
            interval=0.01,
            what="fan-out under way",
        )
        controls.block_create(actor=alice, target_id=bob.pk)
        at_block = delivered_to(redis_client, readers, note)
        wait_until(lambda: fanned_out(note), timeout=DELIVERY_TIMEOUT, what="fan-out finished")
        # The unfollow's inbox clean-up (a task of its own) may still be queued behind the fan-out.
        wait_until(lambda: note.pk not in inbox_ids(redis_client, alice), timeout=DELIVERY_TIMEOUT, what="alice's inbox clean")

        assert 4 <= at_block < 40  # the block really landed mid-way
        assert delivered_to(redis_client, [r for r in readers if r is not alice], note) == 39
        assert note.pk not in [n.pk for n in selectors.home_timeline(user_id=alice.pk, cursor=None, limit=10).notes]
        assert not Follow.objects.filter(follower=alice, followee=bob).exists()

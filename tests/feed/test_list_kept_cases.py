"""Kept list timelines in the cases a break-it pass found: a build against a member set that
changes back before the lists job runs, overlapping builds, the reconcile's false drift (a member
pulled since the build, the cap's cut among equal times, a deletion from a full timeline), and
keys left behind. Each test states the database's page (``list_timeline(..., database_only=True)``)
or what the reconcile must not report."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from core import outbox as core_outbox
from feed import rebuild, redis_keys, selectors, services
from feed.reconcile import lists_drift
from tests.feed.test_lists import list_ids, make_list
from tests.support.feed import build_kept, is_kept, kept_ids

pytestmark = pytest.mark.django_db

BASE_MS = int((timezone.now() - timedelta(hours=1)).timestamp() * 1000)


def drain():
    """Apply every pending outbox entry (what the workers do after a lag)."""
    core_outbox.drain(task_grace_seconds=0, start_rebuild=False)


def many_with_one_between(publish, many, one, count=12):
    """``count`` notes of ``many`` one ms apart and one of ``one`` among them (so a kept timeline
    that misses it is read from Redis past it, not from the database), oldest first."""
    notes = [publish(many, at_ms=BASE_MS + 2 * i) for i in range(count)]
    notes.insert(count // 2, publish(one, at_ms=BASE_MS + count - 1))
    return notes


class TestBuildFromADatabaseAheadOfTheMemberSet:
    """The drop on a member change compares the database with the Redis member set, so a build
    reads the Redis set (with its lock taken), not the database: when the Redis set lags (the
    ``feed.lists`` entry not applied yet) and a build read the database in between, a change the
    database undid before the entries were applied was never seen, and the kept timeline kept
    what the build made."""

    def test_a_member_added_and_removed_while_the_lists_job_lags_leaves_a_stray(self, cast, publish, run_commits, redis_client):
        alice, bob, charlie = cast
        crew = make_list(run_commits, alice, [bob])
        b1, c1 = publish(bob, at_ms=BASE_MS + 1), publish(charlie, at_ms=BASE_MS + 2)

        services.list_members_add(list_=crew, account_ids=[charlie.pk])  # feed.lists pending
        build_kept(alice, crew)  # a read asked for it: the truth has charlie
        services.list_members_remove(list_=crew, account_ids=[charlie.pk])  # feed.lists pending
        drain()  # the member set was {bob} and is {bob}: nothing dropped

        assert list_ids(alice, crew, database_only=True) == [b1.pk]
        assert is_kept(alice, crew) is True
        assert list_ids(alice, crew) == [b1.pk]  # c1 is shown: charlie is no member
        assert c1.pk not in kept_ids(redis_client, alice, crew)

    def test_a_member_removed_and_added_back_while_the_lists_job_lags_is_lost(self, cast, publish, run_commits, redis_client):
        alice, bob, charlie = cast
        crew = make_list(run_commits, alice, [bob, charlie])
        notes = many_with_one_between(publish, bob, charlie)

        services.list_members_remove(list_=crew, account_ids=[charlie.pk])  # feed.lists pending
        build_kept(alice, crew)  # the truth has no charlie
        services.list_members_add(list_=crew, account_ids=[charlie.pk])  # feed.lists pending
        drain()  # the member set was {bob, charlie} and is: nothing dropped

        expected = [n.pk for n in reversed(notes)]
        assert list_ids(alice, crew, limit=3, database_only=True) == expected
        assert is_kept(alice, crew) is True
        assert list_ids(alice, crew, limit=3) == expected


class TestReconcileFalsePositives:
    def test_a_member_pulled_since_the_build_is_no_drift(
        self, cast, publish, run_commits, redis_client, settings, people, follow
    ):
        """An author crosses FANOUT_PULL_THRESHOLD and ``is_pull_author`` adds it to the pull set
        (no generation bump): the kept timeline rightly keeps its older notes (reads merge its
        outbox too, duplicates fold), but the reconcile's truth leaves pulled authors out."""
        alice, bob, charlie = cast
        settings.FANOUT_PULL_THRESHOLD = 2
        crew = make_list(run_commits, alice, [bob, charlie])
        b1, c1 = publish(bob, at_ms=BASE_MS + 1), publish(charlie, at_ms=BASE_MS + 2)
        build_kept(alice, crew)
        follow(people(1)[0], bob)
        b2 = publish(bob, at_ms=BASE_MS + 3)  # bob is pulled from now on
        selectors.forget_pull_authors()
        assert redis_client.sismember(redis_keys.pull_authors_key(), str(bob.pk))

        assert is_kept(alice, crew) is True
        assert list_ids(alice, crew) == list_ids(alice, crew, database_only=True) == [b2.pk, c1.pk, b1.pk]
        assert lists_drift(repair=False) == 0


class TestOverlappingBuilds:
    @pytest.mark.django_db(transaction=True)
    def test_a_build_dropped_by_a_member_change_writes_into_the_next_builds_copy(self, run_commits, monkeypatch):
        """Build 1 reads the truth (charlie a member); charlie leaves the list, whose ``feed.lists``
        entry drops the timeline and build 1's lock; a read queues build 2, which takes the lock
        and empties the copy; build 1 then adds its stale truth to that copy (``BUILD_ADD_LUA``
        did not check the lock) and fails its swap; build 2 swaps the copy in, charlie's notes too."""
        import threading

        from django.db import connection

        from tests.support import graph
        from tests.support.accounts import make_user
        from tests.support.feed import Publisher

        alice, bob, charlie = make_user("alice"), make_user("bob"), make_user("charlie")
        graph.follow(alice, bob)
        graph.follow(alice, charlie)
        rebuild.inbox_rebuild(user_id=alice.pk)
        publish = Publisher()
        crew = make_list(run_commits, alice, [bob, charlie])
        b1, c1 = publish(bob, at_ms=BASE_MS + 1), publish(charlie, at_ms=BASE_MS + 2)

        truth = rebuild.list_timeline_truth
        second_started, first_done = threading.Event(), threading.Event()
        outcome: dict[str, Any] = {}

        def second_build() -> None:
            try:
                outcome["second"] = rebuild.list_timeline_rebuild(reader_id=alice.pk, list_id=crew.pk)
            except Exception as exc:  # noqa: BLE001 - reported by the assertion below
                outcome["second"] = exc
            finally:
                connection.close()

        def hooked(list_id, pulled):
            if threading.current_thread() is not threading.main_thread():
                second_started.set()  # build 2 holds the lock and emptied the copy
                assert first_done.wait(10)
                return truth(list_id, pulled)
            entries = truth(list_id, pulled)  # build 1: charlie is a member
            run_commits(lambda: services.list_members_remove(list_=crew, account_ids=[charlie.pk]))
            thread = threading.Thread(target=second_build)
            outcome["thread"] = thread
            thread.start()
            assert second_started.wait(10)
            return entries

        monkeypatch.setattr(rebuild, "list_timeline_truth", hooked)
        first = rebuild.list_timeline_rebuild(reader_id=alice.pk, list_id=crew.pk)
        first_done.set()
        outcome["thread"].join(10)

        assert first.lost
        assert not isinstance(outcome["second"], Exception), outcome["second"]
        assert outcome["second"].kept
        assert list_ids(alice, crew, database_only=True) == [b1.pk]
        assert is_kept(alice, crew) is True
        assert list_ids(alice, crew) == [b1.pk], f"{c1.pk} is charlie's, no member now"


class TestReconcileFalsePositivesAtTheCap:
    def test_equal_times_trimmed_at_the_cap_are_no_drift(self, cast, publish, run_commits, redis_client, settings):
        """At the cap, the fan-out trims the oldest by rank: among notes of one millisecond Redis
        orders members by their bytes ("12" < "13"), and trims the lower id; the truth
        (``recent_entries``: newest first, then id ascending) keeps the lower id. Pages are right
        (the tail's millisecond is read from the database), the reconcile reports drift."""
        alice, bob, _ = cast
        settings.INBOX_MAX_LEN = 3
        crew = make_list(run_commits, alice, [bob])
        while len(str(publish(bob, at_ms=BASE_MS).pk)) < 2:  # ids of one length: bytes order = id order
            pass
        tied = [publish(bob, at_ms=BASE_MS + 1), publish(bob, at_ms=BASE_MS + 1)]
        newer = publish(bob, at_ms=BASE_MS + 2)
        assert len({len(str(n.pk)) for n in tied}) == 1
        build_kept(alice, crew)
        newest = publish(bob, at_ms=BASE_MS + 3)  # the cap trims one of the tied two

        assert list_ids(alice, crew, limit=2) == list_ids(alice, crew, limit=2, database_only=True)
        assert newest.pk in kept_ids(redis_client, alice, crew) and newer.pk in kept_ids(redis_client, alice, crew)
        assert lists_drift(repair=False) == 0

    def test_a_note_deleted_from_a_full_timeline_is_no_drift(self, cast, publish, run_commits, redis_client, settings):
        """A kept timeline at the cap loses a deleted note; the next older note lies below its
        floor (pages read it from the database), but the truth is the newest ``INBOX_MAX_LEN``."""
        alice, bob, _ = cast
        settings.INBOX_MAX_LEN = 3
        crew = make_list(run_commits, alice, [bob])
        notes = [publish(bob, at_ms=BASE_MS + i) for i in range(5)]
        build_kept(alice, crew)

        run_commits(lambda: services.note_delete(note=notes[-1], actor=bob))

        assert list_ids(alice, crew, limit=2) == list_ids(alice, crew, limit=2, database_only=True)
        assert lists_drift(repair=False) == 0


class TestLeftBehind:
    @pytest.fixture
    def trimmed(self, cast, publish, run_commits, settings):
        """alice's list of bob, kept at a cap of 2, then trimmed by fan-out (its floor SET again)."""
        alice, bob, _ = cast
        settings.INBOX_MAX_LEN = 2
        crew = make_list(run_commits, alice, [bob])
        publish(bob, at_ms=BASE_MS + 1)
        build_kept(alice, crew)
        publish(bob, at_ms=BASE_MS + 2)
        publish(bob, at_ms=BASE_MS + 3)
        return alice, crew

    def test_a_deleted_readers_kept_timelines_are_purged(self, trimmed, run_commits, redis_client):
        """``account_purge`` unlinked ``all_user_keys`` and the lists' member sets, not the kept
        timelines' keys."""
        alice, crew = trimmed
        keys = redis_keys.list_timeline_keys(alice.pk, crew.pk)

        run_commits(alice.delete)
        drain()

        assert [key for key in keys if redis_client.exists(key)] == []

    def test_a_floor_raised_by_the_fan_out_expires_with_the_timeline(self, trimmed, redis_client):
        """``SWAP_INBOX_LUA`` gives a list's inbox and floor the synced marker's expiry; a floor the
        fan-out raises (a plain SET drops an expiry) gets it again, or it would stay for ever."""
        alice, crew = trimmed

        assert redis_client.ttl(redis_keys.list_floor_key(alice.pk, crew.pk)) > 0

    def test_a_timeline_built_empty_expires_once_notes_arrive(self, cast, publish, run_commits, redis_client):
        """A build with no notes unlinks the inbox, so ``EXPIREAT`` finds nothing; the first
        delivery creates the inbox and gives it the synced marker's expiry."""
        alice, bob, _ = cast
        crew = make_list(run_commits, alice, [bob])
        build_kept(alice, crew)
        publish(bob, at_ms=BASE_MS + 1)

        assert redis_client.ttl(redis_keys.list_synced_key(alice.pk, crew.pk)) > 0
        assert redis_client.ttl(redis_keys.list_inbox_key(alice.pk, crew.pk)) > 0

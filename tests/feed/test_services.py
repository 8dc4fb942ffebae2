"""Notes and their delivery: publish, fan-out, hide/delete, follow and unfollow, (de)activation."""

from __future__ import annotations

from datetime import timedelta
from typing import cast

import pytest
import redis
from django.db import transaction
from django.utils import timezone

from core import tasks as core_tasks
from core.models import OutboxEntry
from core.outbox import drain
from feed import delivery, redis_keys, selectors, services
from feed import outbox as feed_outbox
from feed.models import Note
from feed.rebuild import inbox_rebuild
from tests.support.accounts import make_user
from tests.support.feed import inbox, inbox_ids

pytestmark = pytest.mark.django_db

BASE_MS = int((timezone.now() - timedelta(hours=1)).timestamp() * 1000)


class TestNoteCreate:
    def test_saves_the_note_and_fans_out_only_after_commit(
        self, active_alice, active_bob, follow, redis_client, django_capture_on_commit_callbacks
    ):
        follow(active_alice, active_bob)

        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            note = services.note_create(author=active_bob, body="  hello world  ")
            assert inbox(redis_client, active_alice) == []  # nothing before commit
        for callback in callbacks:
            callback()

        note.refresh_from_db()
        assert note.body == "hello world"
        assert note.created_at.microsecond % 1000 == 0  # whole milliseconds
        assert inbox(redis_client, active_alice) == [(str(note.pk).encode(), note.published_ms)]
        assert redis_client.zscore(redis_keys.outbox_key(active_bob.pk), note.pk) == note.published_ms
        assert note.fanned_out_at is not None

    def test_a_rolled_back_note_sends_no_task_and_reaches_no_inbox(
        self, active_alice, active_bob, follow, redis_client, monkeypatch, django_capture_on_commit_callbacks
    ):
        follow(active_alice, active_bob)
        sent = []
        monkeypatch.setattr(core_tasks.outbox_apply, "apply_async", lambda kwargs, **options: sent.append(kwargs))

        with django_capture_on_commit_callbacks(execute=True) as callbacks, pytest.raises(RuntimeError), transaction.atomic():
            services.note_create(author=active_bob, body="never committed")
            raise RuntimeError("the request failed after the insert")

        assert callbacks == []
        assert sent == []
        assert Note.objects.count() == 0
        assert inbox(redis_client, active_alice) == []

    def test_the_task_of_a_committed_note_finds_its_row(
        self, active_alice, active_bob, follow, monkeypatch, django_capture_on_commit_callbacks
    ):
        follow(active_alice, active_bob)
        results = []
        real = feed_outbox.note_fan_out

        def recorded(**kw):
            results.append(real(**kw))
            return results[-1]

        monkeypatch.setattr(feed_outbox, "note_fan_out", recorded)

        with django_capture_on_commit_callbacks(execute=True):
            services.note_create(author=active_bob, body="committed")

        assert [r.mode for r in results] == ["push"]
        assert results[0].followers == 1

    @pytest.mark.parametrize("body", ["", "   ", "\n\t"])
    def test_an_empty_body_is_rejected(self, active_bob, body, django_capture_on_commit_callbacks):
        with django_capture_on_commit_callbacks(execute=True) as callbacks, pytest.raises(services.NoteInvalidError):
            services.note_create(author=active_bob, body=body)

        assert Note.objects.count() == 0
        assert callbacks == []

    def test_the_length_limit_is_inclusive(self, active_bob, settings, django_capture_on_commit_callbacks):
        settings.NOTE_MAX_LENGTH = 10

        with django_capture_on_commit_callbacks(execute=True):
            note = services.note_create(author=active_bob, body="x" * 10)
            with pytest.raises(services.NoteInvalidError):
                services.note_create(author=active_bob, body="x" * 11)

        assert list(Note.objects.values_list("pk", flat=True)) == [note.pk]

    def test_a_deactivated_author_cannot_publish(self, active_bob):
        active_bob.is_active = False

        with pytest.raises(services.NoteForbiddenError) as raised:
            services.note_create(author=active_bob, body="hi")

        assert raised.value.status == 403
        assert Note.objects.count() == 0


class TestFanOut:
    def test_reaches_every_active_follower_and_skips_inactive_ones(self, active_bob, follow, people, redis_client, publish):
        active = people(3)
        never_seen = make_user(active=False)
        away = make_user(last_seen_at=timezone.now() - timedelta(days=31))
        for reader in [*active, never_seen, away]:
            follow(reader, active_bob)

        note = publish(active_bob)

        member = [(str(note.pk).encode(), note.published_ms)]
        assert [inbox(redis_client, reader) for reader in active] == [member] * 3
        assert inbox(redis_client, never_seen) == []
        assert inbox(redis_client, away) == []

    def test_reads_followers_in_batches_with_one_pipeline_each(
        self, active_bob, follow, people, redis_client, publish, settings, monkeypatch
    ):
        settings.FEED_FANOUT_BATCH_SIZE = 2
        readers = people(5)
        for reader in readers:
            follow(reader, active_bob)
        batches = []
        real = delivery.deliver

        def recorded(client, ids, author, entries, **options):
            batches.append(sorted(ids))
            return real(client, ids, author, entries, **options)

        monkeypatch.setattr(delivery, "deliver", recorded)

        note = publish(active_bob)

        assert sorted(i for batch in batches for i in batch) == sorted(r.pk for r in readers)
        assert max(len(batch) for batch in batches) <= 2
        assert all(inbox_ids(redis_client, r) == [note.pk] for r in readers)

    def test_inboxes_are_trimmed_to_the_cap_on_every_write(
        self, active_alice, active_bob, follow, publish, redis_client, settings
    ):
        settings.INBOX_MAX_LEN = 5
        follow(active_alice, active_bob)

        notes = [publish(active_bob, at_ms=BASE_MS + i) for i in range(8)]

        assert inbox_ids(redis_client, active_alice) == [n.pk for n in reversed(notes[3:])]
        assert redis_client.zcard(redis_keys.outbox_key(active_bob.pk)) == 5

    def test_a_retry_after_a_partial_run_then_a_delete_leaves_one_canonical_member_then_none(
        self, active_bob, follow, people, publish, redis_client, settings, monkeypatch, django_capture_on_commit_callbacks
    ):
        # C11
        settings.FEED_FANOUT_BATCH_SIZE = 2
        readers = people(5)
        for reader in readers:
            follow(reader, active_bob)
        real = delivery.deliver
        calls = []

        def flaky(client, ids, author, entries, **options):
            calls.append(ids)
            if len(calls) == 2:
                raise redis.exceptions.ConnectionError("connection lost mid fan-out")
            return real(client, ids, author, entries, **options)

        monkeypatch.setattr(delivery, "deliver", flaky)
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            note = services.note_create(author=active_bob, body="n1")
        with pytest.raises(redis.exceptions.ConnectionError):
            feed_outbox.note_fan_out(note_id=note.pk)
        partial = [r for r in readers if inbox_ids(redis_client, r)]
        monkeypatch.setattr(delivery, "deliver", real)

        entry = OutboxEntry.objects.get(kind=feed_outbox.NOTE.name, subject_id=note.pk)
        core_tasks.outbox_apply.apply(kwargs={"entry_ids": [entry.pk]})  # the retry
        feed_outbox.note_fan_out(note_id=note.pk)  # and a duplicate delivery
        for reader in readers[:2]:  # a backfill and a rebuild write it too
            feed_outbox.inbox_backfill_followee(follower_id=reader.pk, followee_id=active_bob.pk)
        inbox_rebuild(user_id=readers[2].pk)

        assert 0 < len(partial) < 5
        assert [inbox(redis_client, r) for r in readers] == [[(str(note.pk).encode(), note.published_ms)]] * 5

        with django_capture_on_commit_callbacks(execute=True):
            services.note_delete(note=note)

        assert [inbox(redis_client, r) for r in readers] == [[]] * 5
        assert redis_client.zcard(redis_keys.outbox_key(active_bob.pk)) == 0
        del callbacks

    def test_a_pull_author_is_not_fanned_out(
        self, active_alice, active_bob, active_charlie, follow, publish, redis_client, settings
    ):
        settings.FANOUT_PULL_THRESHOLD = 2
        follow(active_alice, active_bob)
        follow(active_charlie, active_bob)

        note = publish(active_bob)

        assert inbox(redis_client, active_alice) == []
        assert redis_client.zrange(redis_keys.outbox_key(active_bob.pk), 0, -1) == [str(note.pk).encode()]
        assert redis_client.smembers(redis_keys.pull_authors_key()) == {str(active_bob.pk).encode()}

    def test_members_are_plain_decimal_strings(self):
        assert [redis_keys.note_member(v) for v in (7, "7", b"7")] == ["7", "7", "7"]
        with pytest.raises(ValueError):
            redis_keys.note_member("7.0")


class TestHideAndDelete:
    def test_a_hidden_note_leaves_every_inbox_and_unhiding_restores_it(
        self, active_alice, active_charlie, active_bob, follow, publish, redis_client, django_capture_on_commit_callbacks
    ):
        follow(active_alice, active_bob)
        follow(active_charlie, active_bob)
        older = publish(active_bob, at_ms=BASE_MS)
        note = publish(active_bob, at_ms=BASE_MS + 5)

        with django_capture_on_commit_callbacks(execute=True):
            changed = services.note_hide(note=note, hidden=True)

        assert changed is True
        assert inbox_ids(redis_client, active_alice) == inbox_ids(redis_client, active_charlie) == [older.pk]
        assert redis_client.zscore(redis_keys.outbox_key(active_bob.pk), note.pk) is None

        with django_capture_on_commit_callbacks(execute=True):
            services.note_hide(note=note, hidden=False)

        assert inbox(redis_client, active_alice) == [(str(note.pk).encode(), BASE_MS + 5), (str(older.pk).encode(), BASE_MS)]

    def test_hiding_twice_changes_nothing_the_second_time(self, active_bob, publish, django_capture_on_commit_callbacks):
        note = publish(active_bob)

        with django_capture_on_commit_callbacks(execute=True):
            first = services.note_hide(note=note, hidden=True)
            second = services.note_hide(note=note, hidden=True)

        assert (first, second) == (True, False)
        # The publish's entry and the first hide's: the second recorded nothing.
        assert OutboxEntry.objects.filter(kind=feed_outbox.NOTE_KIND, subject_id=note.pk).count() == 2

    def test_only_the_author_can_delete(self, active_bob, active_charlie, publish):
        note = publish(active_bob)

        with pytest.raises(services.NoteForbiddenError):
            services.note_delete(note=note, actor=active_charlie)

        note.refresh_from_db()
        assert note.deleted_at is None

    def test_a_note_hidden_during_its_fan_out_is_withdrawn(
        self, active_alice, active_bob, follow, redis_client, monkeypatch, django_capture_on_commit_callbacks
    ):
        follow(active_alice, active_bob)
        with django_capture_on_commit_callbacks(execute=False):
            note = services.note_create(author=active_bob, body="racing a moderator")
        real = delivery.fan_out_to_followers

        def hide_meanwhile(*args, **kwargs):
            result = real(*args, **kwargs)
            Note.objects.filter(pk=note.pk).update(is_hidden=True)  # the moderator's commit
            return result

        monkeypatch.setattr(delivery, "fan_out_to_followers", hide_meanwhile)

        feed_outbox.note_fan_out(note_id=note.pk)

        assert inbox(redis_client, active_alice) == []


class TestFollowAndUnfollow:
    def test_unfollow_removes_the_followee_and_refollow_backfills_it(
        self, active_alice, active_bob, active_charlie, follow, unfollow, publish, redis_client
    ):
        # C10: A->B, A->C; b1@100, c1@101, b2@102; A unfollows B.
        follow(active_alice, active_bob)
        follow(active_alice, active_charlie)
        b1 = publish(active_bob, at_ms=BASE_MS + 100)
        c1 = publish(active_charlie, at_ms=BASE_MS + 101)
        b2 = publish(active_bob, at_ms=BASE_MS + 102)

        unfollow(active_alice, active_bob)

        assert inbox(redis_client, active_alice) == [(str(c1.pk).encode(), BASE_MS + 101)]

        follow(active_alice, active_bob)  # pinned: a re-follow backfills like a first follow

        assert inbox(redis_client, active_alice) == [
            (str(b2.pk).encode(), BASE_MS + 102),
            (str(c1.pk).encode(), BASE_MS + 101),
            (str(b1.pk).encode(), BASE_MS + 100),
        ]

    def test_follow_backfills_the_newest_notes_up_to_the_cap(
        self, active_alice, active_bob, follow, publish, redis_client, settings
    ):
        settings.INBOX_MAX_LEN = 3
        notes = [publish(active_bob, at_ms=BASE_MS + i) for i in range(5)]

        follow(active_alice, active_bob)

        assert inbox_ids(redis_client, active_alice) == [n.pk for n in reversed(notes[2:])]

    def test_following_an_account_past_the_pull_threshold_backfills_nothing_and_pulls_it(
        self, active_alice, active_bob, follow, publish, redis_client, settings, user_factory
    ):
        note = publish(active_bob)  # fanned out while bob had no followers
        for fan in [user_factory(), user_factory()]:
            follow(fan, active_bob)
        settings.FANOUT_PULL_THRESHOLD = 3
        inbox_rebuild(user_id=active_alice.pk)  # a maintained inbox, which a backfill would write
        alice_inbox_before = inbox_ids(redis_client, active_alice)

        follow(active_alice, active_bob)  # bob's third follower: past the threshold before his next note

        assert alice_inbox_before == []
        assert inbox_ids(redis_client, active_alice) == []  # not pushed: a pull never removes what was pushed
        assert redis_client.sismember(redis_keys.pull_authors_key(), active_bob.pk)
        assert note.pk in [n.pk for n in selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=10).notes]

    def test_unfollowing_someone_not_followed_touches_nothing(
        self, active_alice, active_bob, active_charlie, follow, unfollow, publish, redis_client
    ):
        follow(active_alice, active_bob)
        note = publish(active_bob)

        unfollow(active_alice, active_charlie)

        assert inbox_ids(redis_client, active_alice) == [note.pk]

    def test_a_late_removal_after_a_refollow_keeps_the_notes(self, active_alice, active_bob, follow, publish, redis_client):
        follow(active_alice, active_bob)
        note = publish(active_bob)

        removed = feed_outbox.inbox_remove_followee(follower_id=active_alice.pk, followee_id=active_bob.pk)

        assert removed == 0
        assert inbox_ids(redis_client, active_alice) == [note.pk]

    def test_a_late_backfill_after_an_unfollow_adds_nothing(
        self, active_alice, active_bob, follow, unfollow, publish, redis_client
    ):
        follow(active_alice, active_bob)
        publish(active_bob)
        unfollow(active_alice, active_bob)

        added = feed_outbox.inbox_backfill_followee(follower_id=active_alice.pk, followee_id=active_bob.pk)

        assert added == 0
        assert inbox(redis_client, active_alice) == []


class TestAuthorDeactivation:
    def test_a_deactivated_authors_notes_leave_feeds_and_come_back_on_reactivation(
        self, active_alice, active_bob, active_charlie, follow, publish, redis_client, django_capture_on_commit_callbacks
    ):
        from users.services import user_set_active

        follow(active_alice, active_bob)
        follow(active_alice, active_charlie)
        b1 = publish(active_bob, at_ms=BASE_MS + 1)
        c1 = publish(active_charlie, at_ms=BASE_MS + 2)

        with django_capture_on_commit_callbacks(execute=True):
            user_set_active(user=active_bob, is_active=False)

        assert inbox_ids(redis_client, active_alice) == [c1.pk]

        with django_capture_on_commit_callbacks(execute=True):
            user_set_active(user=active_bob, is_active=True)

        assert inbox_ids(redis_client, active_alice) == [c1.pk, b1.pk]
        assert redis_client.zrange(redis_keys.outbox_key(active_bob.pk), 0, -1) == [str(b1.pk).encode()]


class TestPendingFanOut:
    def test_delivers_notes_whose_fan_out_never_ran(
        self, active_alice, active_bob, follow, redis_client, django_capture_on_commit_callbacks
    ):
        follow(active_alice, active_bob)
        with django_capture_on_commit_callbacks(execute=False):  # the task was lost
            note = services.note_create(author=active_bob, body="lost task")

        handled = drain(task_grace_seconds=0).applied
        again = drain(task_grace_seconds=0).applied

        assert (handled, again) == (1, 0)
        assert inbox_ids(redis_client, active_alice) == [note.pk]

    def test_leaves_young_notes_to_their_own_task(self, active_bob, django_capture_on_commit_callbacks):
        with django_capture_on_commit_callbacks(execute=False):
            services.note_create(author=active_bob, body="just now")

        assert drain(task_grace_seconds=60).applied == 0


class TestSplitFanOut:
    def test_an_author_over_the_part_size_is_delivered_in_parts_that_cover_every_follower_once(
        self, settings, follow, publish, redis_client
    ):
        from core.models import OutboxEntry
        from feed.outbox import NOTE_PART_KIND, unpack_part

        settings.FEED_FANOUT_PART_FOLLOWERS = 4
        author = make_user("wide")
        readers = [make_user() for _ in range(10)]
        for reader in readers:
            follow(reader, author)

        note = publish(author, "in three parts")

        parts = OutboxEntry.objects.filter(kind=NOTE_PART_KIND, subject_id=note.pk).order_by("id")
        # A part entry's object is its packed part: never None (cast for the type checker only).
        assert [
            (unpack_part(cast(int, entry.object_id)).parts, unpack_part(cast(int, entry.object_id)).index) for entry in parts
        ] == [(3, 0), (3, 1), (3, 2)]
        assert all(entry.applied_at is not None for entry in parts)
        assert [redis_client.zscore(redis_keys.inbox_key(reader.pk), note.pk) for reader in readers] == [note.published_ms] * 10

    def test_below_the_part_size_a_fan_out_is_one_job(self, settings, follow, publish):
        from core.models import OutboxEntry
        from feed.outbox import NOTE_PART_KIND

        settings.FEED_FANOUT_PART_FOLLOWERS = 4
        author = make_user("narrow")
        for _ in range(4):
            follow(make_user(), author)

        note = publish(author, "one job")

        assert not OutboxEntry.objects.filter(kind=NOTE_PART_KIND, subject_id=note.pk).exists()

    def test_the_database_path_splits_followers_the_same_way(self, settings, follow):
        from core.redis import get_redis
        from feed.delivery import Part, follower_batches

        author = make_user("parted")
        readers = [make_user() for _ in range(9)]
        for reader in readers:
            follow(reader, author)
        client = get_redis()

        by_source = {
            source: [
                sorted(id_ for batch in follower_batches(client, author.pk, source=source, part=Part(3, index)) for id_ in batch)
                for index in range(3)
            ]
            for source in ("redis", "database")
        }

        assert by_source["redis"] == by_source["database"]
        assert sorted(id_ for part in by_source["redis"] for id_ in part) == sorted(reader.pk for reader in readers)
        assert all(id_ % 3 == index for index, part in enumerate(by_source["redis"]) for id_ in part)

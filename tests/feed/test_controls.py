"""Blocks and mutes in the home feed (issue 16): filtered at fan-out and at read, pulled
authors included, on both read paths; a block racing a fan-out leaves nothing behind."""

from datetime import timedelta

import pytest
from django.utils import timezone

from feed import delivery, redis_keys, selectors
from feed.outbox import note_fan_out
from feed.rebuild import database_inboxes, inbox_rebuild
from social import controls
from social import redis_keys as social_keys
from social import services as social_services
from social.models import Mute
from tests.support.accounts import make_user
from tests.support.feed import inbox_ids

pytestmark = pytest.mark.django_db


def page_ids(user, *, database_only=False):
    return [
        note.pk for note in selectors.home_timeline(user_id=user.pk, cursor=None, limit=20, database_only=database_only).notes
    ]


@pytest.fixture
def reader_and_authors(active_alice, active_bob, active_charlie, follow):
    follow(active_alice, active_bob)
    follow(active_alice, active_charlie)
    return active_alice, active_bob, active_charlie


class TestMuteInTheFeed:
    def test_notes_already_in_the_inbox_leave_the_page_at_once(self, reader_and_authors, publish, run_commits, redis_client):
        alice, bob, charlie = reader_and_authors
        muted_note, other_note = publish(bob), publish(charlie)
        assert set(inbox_ids(redis_client, alice)) == {muted_note.pk, other_note.pk}

        run_commits(lambda: controls.mute_create(actor=alice, target_id=bob.pk))

        assert page_ids(alice) == [other_note.pk]
        assert page_ids(alice, database_only=True) == [other_note.pk]

    def test_notes_published_while_muted_are_not_fanned_out_to_the_muter(
        self, reader_and_authors, publish, run_commits, redis_client
    ):
        alice, bob, _ = reader_and_authors
        dave = make_user("dave")
        run_commits(lambda: social_services.follow_create(actor=dave, followee_id=bob.pk))
        run_commits(lambda: controls.mute_create(actor=alice, target_id=bob.pk))

        note = publish(bob)

        assert note.pk not in inbox_ids(redis_client, alice)
        assert note.pk in inbox_ids(redis_client, dave)

    def test_an_expired_mute_lets_notes_through_again(self, reader_and_authors, publish, run_commits, redis_client):
        alice, bob, _ = reader_and_authors
        run_commits(lambda: controls.mute_create(actor=alice, target_id=bob.pk, duration=timedelta(days=1)))
        Mute.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
        # Redis still holds the old expiry score, which now lies in the past.
        redis_client.zadd(social_keys.mutes_key(alice.pk), {str(bob.pk): int(timezone.now().timestamp() * 1000) - 1000})

        note = publish(bob)

        assert note.pk in inbox_ids(redis_client, alice)
        assert page_ids(alice)[0] == note.pk

    def test_when_a_mute_runs_out_the_notes_from_before_and_during_it_come_back(
        self, reader_and_authors, publish, run_commits, redis_client, settings
    ):
        from social.tasks import social_mutes_expire

        settings.CELERY_TASK_ALWAYS_EAGER = True
        alice, bob, charlie = reader_and_authors
        before, other = publish(bob), publish(charlie)
        run_commits(lambda: controls.mute_create(actor=alice, target_id=bob.pk, duration=timedelta(days=1)))
        during = publish(bob)
        assert inbox_ids(redis_client, alice) == [other.pk]
        # The day passed (Redis holds the expiry as a score, now in the past).
        Mute.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
        redis_client.zadd(social_keys.mutes_key(alice.pk), {str(bob.pk): int(timezone.now().timestamp() * 1000) - 1000})

        run_commits(social_mutes_expire.delay)  # beat, within MUTE_EXPIRY_SECONDS

        assert not Mute.objects.exists()
        assert inbox_ids(redis_client, alice) == [during.pk, other.pk, before.pk]
        assert page_ids(alice) == page_ids(alice, database_only=True) == [during.pk, other.pk, before.pk]

    def test_a_muted_pulled_author_is_left_out_on_both_paths(
        self, reader_and_authors, publish, run_commits, redis_client, settings
    ):
        alice, bob, charlie = reader_and_authors
        redis_client.sadd(redis_keys.pull_authors_key(), bob.pk)
        selectors.forget_pull_authors()
        pulled, pushed = publish(bob), publish(charlie)
        assert pulled.pk not in inbox_ids(redis_client, alice)
        assert page_ids(alice) == [pushed.pk, pulled.pk]

        run_commits(lambda: controls.mute_create(actor=alice, target_id=bob.pk))

        assert page_ids(alice) == [pushed.pk]
        assert page_ids(alice, database_only=True) == [pushed.pk]

    def test_an_inbox_rebuild_leaves_muted_authors_out(self, reader_and_authors, publish, run_commits, redis_client):
        alice, bob, charlie = reader_and_authors
        muted_note, other_note = publish(bob), publish(charlie)
        run_commits(lambda: controls.mute_create(actor=alice, target_id=bob.pk))

        inbox_rebuild(user_id=alice.pk)

        assert inbox_ids(redis_client, alice) == [other_note.pk]
        assert [note_id for note_id, _ in database_inboxes([alice.pk], pulled=set())[alice.pk]] == [other_note.pk]
        assert muted_note.pk not in page_ids(alice)


class TestBlockInTheFeed:
    def test_the_blocked_authors_notes_leave_the_inbox_and_never_enter(
        self, reader_and_authors, publish, run_commits, redis_client
    ):
        alice, bob, charlie = reader_and_authors
        old, kept = publish(bob), publish(charlie)

        run_commits(lambda: controls.block_create(actor=alice, target_id=bob.pk))
        later = publish(bob)

        assert inbox_ids(redis_client, alice) == [kept.pk]
        assert later.pk not in inbox_ids(redis_client, alice)
        assert page_ids(alice) == [kept.pk]
        assert old.pk not in page_ids(alice, database_only=True)

    def test_a_block_while_the_fan_out_is_in_flight_leaves_nothing(
        self, reader_and_authors, run_commits, redis_client, monkeypatch, django_capture_on_commit_callbacks
    ):
        alice, bob, _ = reader_and_authors
        from feed import services

        with django_capture_on_commit_callbacks(execute=False):
            note = services.note_create(author=bob, body="in flight")
        real_batches = delivery.follower_batches

        def batches_then_block(*args, **kwargs):
            # The fan-out has read its followers (alice among them); the block commits now.
            for batch in real_batches(*args, **kwargs):
                assert alice.pk in batch
                run_commits(lambda: controls.block_create(actor=bob, target_id=alice.pk))
                yield batch

        monkeypatch.setattr(delivery, "follower_batches", batches_then_block)
        note_fan_out(note_id=note.pk)

        assert note.pk not in inbox_ids(redis_client, alice)
        assert note.pk not in page_ids(alice)


class TestMuteKeepsTheInboxTrue:
    def test_a_mute_takes_the_notes_out_and_an_unmute_brings_them_back(
        self, reader_and_authors, publish, run_commits, redis_client
    ):
        alice, bob, charlie = reader_and_authors
        old, other = publish(bob), publish(charlie)

        run_commits(lambda: controls.mute_create(actor=alice, target_id=bob.pk))
        during = publish(bob)
        muted_inbox = inbox_ids(redis_client, alice)
        run_commits(lambda: controls.mute_delete(actor=alice, target_id=bob.pk))

        assert muted_inbox == [other.pk]  # what an inbox rebuild makes of it
        assert [note_id for note_id, _ in database_inboxes([alice.pk], pulled=set())[alice.pk]] == [during.pk, other.pk, old.pk]
        assert inbox_ids(redis_client, alice) == [during.pk, other.pk, old.pk]
        assert page_ids(alice) == page_ids(alice, database_only=True) == [during.pk, other.pk, old.pk]


class TestNoteApiVisibility:
    def test_a_private_or_blocking_authors_note_is_not_served(
        self, active_alice, active_bob, active_charlie, publish, run_commits
    ):
        from django.test import Client

        note = publish(active_bob)
        active_bob.approve_followers = True
        active_bob.save(update_fields=["approve_followers"])
        run_commits(lambda: controls.block_create(actor=active_bob, target_id=active_charlie.pk))
        stranger, blocked = Client(), Client()
        stranger.force_login(active_alice)
        blocked.force_login(active_charlie)

        assert stranger.get(f"/api/notes/{note.pk}").status_code == 403
        assert Client().get(f"/api/notes/{note.pk}").status_code == 403
        assert blocked.get(f"/api/notes/{note.pk}").status_code == 404
        assert blocked.get(f"/n/{note.pk}/").status_code == 404

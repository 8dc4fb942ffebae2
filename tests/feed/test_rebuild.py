"""Rebuilding feeds: one inbox (C13), catch-up of returning readers, the full rebuild and its command."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from core.models import OutboxEntry
from feed import outbox as feed_outbox
from feed import rebuild, redis_keys, selectors, services
from feed.models import Note
from tests.support.accounts import make_user
from tests.support.feed import inbox, inbox_ids

pytestmark = pytest.mark.django_db

BASE_MS = int((timezone.now() - timedelta(hours=1)).timestamp() * 1000)


class TestInboxRebuildC13:
    @pytest.fixture
    def graph(self, active_alice, active_bob, active_charlie, follow, publish, settings):
        settings.INBOX_MAX_LEN = 5
        follow(active_alice, active_bob)
        follow(active_alice, active_charlie)
        for at in (100, 102, 104, 106):
            publish(active_bob, f"b{at}", at_ms=BASE_MS + at)
        for at in (101, 103, 105, 107):
            publish(active_charlie, f"c{at}", at_ms=BASE_MS + at)

    def test_rebuilds_the_newest_notes_with_exact_scores_and_clears_the_flag(self, active_alice, graph, redis_client):
        redis_client.delete(redis_keys.inbox_key(active_alice.pk))

        result = rebuild.inbox_rebuild(user_id=active_alice.pk)

        by_id = dict(Note.objects.values_list("pk", "body"))
        assert [(by_id[int(m)], score - BASE_MS) for m, score in inbox(redis_client, active_alice)] == [
            ("c107", 107),
            ("b106", 106),
            ("c105", 105),
            ("b104", 104),
            ("c103", 103),
        ]
        assert (result.entries, result.synced) == (5, True)
        assert not redis_client.exists(redis_keys.inbox_rebuilding_key(active_alice.pk))
        assert redis_client.exists(redis_keys.inbox_synced_key(active_alice.pk))

    def test_an_error_mid_rebuild_clears_the_flag_and_a_rerun_is_safe(self, active_alice, graph, redis_client, monkeypatch):
        redis_client.delete(redis_keys.inbox_key(active_alice.pk))
        real = rebuild.database_inboxes
        calls = []

        def failing(*args, **kwargs):
            calls.append(1)
            raise RuntimeError("database went away")  # while the inbox is being built aside

        monkeypatch.setattr(rebuild, "database_inboxes", failing)

        with pytest.raises(RuntimeError):
            rebuild.inbox_rebuild(user_id=active_alice.pk)

        assert calls == [1]
        assert not redis_client.exists(redis_keys.inbox_rebuilding_key(active_alice.pk))
        assert not redis_client.exists(redis_keys.inbox_build_key(active_alice.pk))  # the build lock is released
        assert inbox(redis_client, active_alice) == []  # nothing half-built was swapped in
        monkeypatch.setattr(rebuild, "database_inboxes", real)
        rebuild.inbox_rebuild(user_id=active_alice.pk)
        first = inbox(redis_client, active_alice)
        rebuild.inbox_rebuild(user_id=active_alice.pk)
        assert [s - BASE_MS for _, s in inbox(redis_client, active_alice)] == [107, 106, 105, 104, 103]
        assert inbox(redis_client, active_alice) == first  # a re-run changes nothing

    def test_a_pull_authors_notes_are_left_out_of_the_inbox(self, active_alice, graph, redis_client):
        bob = type(active_alice).objects.get(username="bob")
        redis_client.sadd(redis_keys.pull_authors_key(), bob.pk)

        rebuild.inbox_rebuild(user_id=active_alice.pk)

        assert [s - BASE_MS for _, s in inbox(redis_client, active_alice)] == [107, 105, 103, 101]

    def test_an_inactive_reader_is_rebuilt_but_not_marked_synced(self, active_bob, follow, publish, redis_client):
        away = make_user(last_seen_at=timezone.now() - timedelta(days=40))
        follow(away, active_bob)
        note = publish(active_bob)

        result = rebuild.inbox_rebuild(user_id=away.pk)

        assert (result.entries, result.synced) == (1, False)
        assert inbox_ids(redis_client, away) == [note.pk]
        assert not redis_client.exists(redis_keys.inbox_synced_key(away.pk))

    def test_the_synced_marker_expires_before_fan_out_would_skip_the_reader(self, active_alice, redis_client):
        rebuild.inbox_rebuild(user_id=active_alice.pk)

        ttl = redis_client.ttl(redis_keys.inbox_synced_key(active_alice.pk))

        window = 30 * 86400
        assert window - 3600 - 120 <= ttl <= window - 3600


class TestReturningReaders:
    def test_a_reader_away_past_feed_active_days_catches_up_at_sign_in(
        self, active_bob, follow, publish, redis_client, django_capture_on_commit_callbacks
    ):
        reader = make_user(last_seen_at=timezone.now() - timedelta(days=45))
        reader.set_password("pw")
        reader.save()
        follow(reader, active_bob)
        while_away = publish(active_bob, "while you were away")
        assert inbox(redis_client, reader) == []  # skipped at fan-out

        client = Client()
        with django_capture_on_commit_callbacks(execute=True):
            assert client.login(username=reader.username, password="pw")
        page = selectors.home_timeline(user_id=reader.pk, cursor=None, limit=10)

        assert inbox_ids(redis_client, reader) == [while_away.pk]
        assert [n.pk for n in page.notes] == [while_away.pk]
        assert (page.source, page.catching_up) == ("redis", False)

    def test_only_one_catch_up_is_queued_at_a_time(
        self, active_alice, redis_client, monkeypatch, django_capture_on_commit_callbacks
    ):
        sent = []
        monkeypatch.setattr("core.tasks.outbox_apply.apply_async", lambda kwargs, **options: sent.append(kwargs))

        with django_capture_on_commit_callbacks(execute=True):
            first = services.inbox_catch_up_request(user_id=active_alice.pk)
            second = services.inbox_catch_up_request(user_id=active_alice.pk)

        assert (first, second) == (True, False)
        rebuilds = OutboxEntry.objects.filter(kind=feed_outbox.INBOX.name, subject_id=active_alice.pk)
        assert sent == [{"entry_ids": list(rebuilds.values_list("pk", flat=True))}] and rebuilds.count() == 1
        assert 0 < redis_client.ttl(redis_keys.inbox_rebuilding_key(active_alice.pk)) <= redis_keys.REBUILDING_TTL_SECONDS

    def test_a_visit_that_moves_last_seen_extends_the_synced_marker(self, active_alice, synced, redis_client):
        synced(active_alice)
        type(active_alice).objects.filter(pk=active_alice.pk).update(last_seen_at=timezone.now() - timedelta(days=10))
        redis_client.expire(redis_keys.inbox_synced_key(active_alice.pk), 100)
        active_alice.refresh_from_db()

        services.feed_visit(user=active_alice)

        assert redis_client.ttl(redis_keys.inbox_synced_key(active_alice.pk)) > 29 * 86400


class TestFullRebuild:
    def test_rebuilds_outboxes_pull_set_and_active_inboxes_only(
        self, active_alice, active_bob, active_charlie, follow, publish, people, redis_client, settings
    ):
        settings.FANOUT_PULL_THRESHOLD = 3
        away = make_user(last_seen_at=timezone.now() - timedelta(days=40))
        for fan in [*people(2), active_alice]:
            follow(fan, active_charlie)  # charlie: 3 followers, pulled
        follow(active_alice, active_bob)
        follow(away, active_bob)
        b1 = publish(active_bob, at_ms=BASE_MS + 1)
        c1 = publish(active_charlie, at_ms=BASE_MS + 2)
        for user in (active_alice, away, active_bob, active_charlie):
            redis_client.delete(*redis_keys.all_user_keys(user.pk))
        redis_client.delete(redis_keys.pull_authors_key())

        stats = rebuild.rebuild_all_inboxes()
        again = rebuild.rebuild_all_inboxes()

        assert redis_client.smembers(redis_keys.pull_authors_key()) == {str(active_charlie.pk).encode()}
        assert redis_client.zrange(redis_keys.outbox_key(active_bob.pk), 0, -1) == [str(b1.pk).encode()]
        assert redis_client.zrange(redis_keys.outbox_key(active_charlie.pk), 0, -1) == [str(c1.pk).encode()]
        assert inbox_ids(redis_client, active_alice) == [b1.pk]
        assert inbox_ids(redis_client, away) == []  # caught up when back
        assert [n.pk for n in selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=5).notes] == [c1.pk, b1.pk]
        assert (stats.pull_authors, stats.outbox_entries) == (again.pull_authors, again.outbox_entries) == (1, 2)

    def test_the_command_rebuilds_everything_or_one_user(self, active_alice, active_bob, follow, publish, redis_client):
        follow(active_alice, active_bob)
        note = publish(active_bob)
        redis_client.delete(redis_keys.inbox_key(active_alice.pk), redis_keys.outbox_key(active_bob.pk))

        out = StringIO()
        call_command("rebuild_feeds", "--no-progress", stdout=out)
        redis_client.delete(redis_keys.inbox_key(active_alice.pk))
        call_command("rebuild_feeds", "--user", str(active_alice.pk), stdout=out)

        assert inbox_ids(redis_client, active_alice) == [note.pk]
        assert redis_client.zrange(redis_keys.outbox_key(active_bob.pk), 0, -1) == [str(note.pk).encode()]
        assert "outbox entries 1" in out.getvalue()
        assert f"user {active_alice.pk}: inbox 1 notes (synced: True)" in out.getvalue()

    def test_the_command_rejects_an_unknown_user(self, db):
        from django.core.management import CommandError

        with pytest.raises(CommandError):
            call_command("rebuild_feeds", "--user", "999999999")

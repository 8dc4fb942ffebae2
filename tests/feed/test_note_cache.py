"""The note cache of the home feed: filled at fan-out and on a miss, forgotten on every change, no query per page."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.template.loader import render_to_string
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core.models import OutboxEntry
from feed import note_cache, redis_keys, selectors, services
from feed import outbox as feed_outbox
from feed.models import Note, now_whole_ms
from tests.support.accounts import signed_in
from tests.support.feed import inbox_ids
from users.account_cache import parse_account_value
from users.models import User
from users.redis_keys import ACCOUNT_TOMBSTONE, account_key

pytestmark = pytest.mark.django_db

BASE_MS = int((timezone.now() - timedelta(hours=1)).timestamp() * 1000)


def page_ids(user, limit=10):
    return [note.pk for note in selectors.home_timeline(user_id=user.pk, cursor=None, limit=limit).notes]


@pytest.fixture
def no_tasks(monkeypatch):
    """The worker is busy: outbox entries sent to Celery stay pending (inline kinds still apply)."""
    monkeypatch.setattr("core.tasks.outbox_apply.apply_async", lambda *args, **kwargs: None)


@pytest.fixture
def feed(active_alice, active_bob, active_charlie, follow, publish, synced):
    """alice follows bob and charlie, who published 6 notes (fanned out: cached)."""
    follow(active_alice, active_bob)
    follow(active_alice, active_charlie)
    synced(active_alice)
    return [publish(active_bob if i % 2 else active_charlie, f"note {i}", at_ms=BASE_MS + i) for i in range(6)]


class TestFilling:
    def test_the_fan_out_caches_the_note_and_its_author(self, active_alice, active_bob, follow, publish, redis_client):
        follow(active_alice, active_bob)

        note = publish(active_bob, "words with  spaces and ünïcode")

        assert redis_client.get(redis_keys.note_cache_key(note.pk)) == note_cache.note_value(note)
        assert note_cache.parse_note_value(redis_client.get(redis_keys.note_cache_key(note.pk))) == (
            active_bob.pk,
            note.published_ms,
            "words with  spaces and ünïcode",
        )
        assert parse_account_value(redis_client.get(account_key(active_bob.pk))) == (
            active_bob.username,
            active_bob.display_name,
        )

    def test_a_page_of_cached_notes_makes_one_query_and_carries_bodies_and_authors(
        self, active_alice, active_bob, active_charlie, feed
    ):
        note_cache.forget_note_authors()  # a process that never met these ids
        with CaptureQueriesContext(connection) as first:
            page = selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=4)
        with CaptureQueriesContext(connection) as again:
            selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=4)
        with CaptureQueriesContext(connection) as shown:
            seen = [(note.pk, note.body, note.author.username, note.author.shown_name, note.published_ms) for note in page.notes]

        # The one query: which of the page's authors alice may see now (feed.page_reader, "Visibility").
        assert (len(first.captured_queries), len(again.captured_queries), len(shown.captured_queries)) == (1, 1, 0)
        assert page.source == "redis"
        expected = sorted(feed, key=lambda n: -n.published_ms)[:4]
        assert seen == [(n.pk, n.body, n.author.username, n.author.shown_name, n.published_ms) for n in expected]

    def test_the_templates_and_the_api_render_the_page_without_a_query(self, active_alice, feed):
        page = selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=10)

        with CaptureQueriesContext(connection) as rendered:
            html = "".join(render_to_string("feed/_note.html", {"note": note}) for note in page.notes)
        response = signed_in(active_alice).get("/api/feed?limit=10")

        assert len(rendered.captured_queries) == 0
        assert html.count('class="note"') == 6
        assert [item["id"] for item in response.json()["data"]["list"]] == [n.pk for n in page.notes]
        assert {item["author"]["username"] for item in response.json()["data"]["list"]} == {"bob", "charlie"}

    def test_a_miss_reads_the_database_once_and_fills_the_cache(self, active_alice, active_bob, follow, synced, redis_client):
        follow(active_alice, active_bob)
        rows = Note.objects.bulk_create(
            [Note(author=active_bob, body=f"bulk {i}", created_at=now_whole_ms() - timedelta(minutes=i)) for i in range(4)]
        )
        synced(active_alice)  # the inbox holds them; nothing ever cached them (the oldest, its horizon, is the database's)

        with CaptureQueriesContext(connection) as missed:
            first = page_ids(active_alice, limit=2)
        with CaptureQueriesContext(connection) as hit:
            second = page_ids(active_alice, limit=2)

        assert first == second == [row.pk for row in rows[:2]]
        # The notes with their authors, on the primary; the filled author still active (forget_gone_fills);
        # the visibility check.
        assert len(missed.captured_queries) == 3
        assert len(hit.captured_queries) == 1  # the visibility check
        assert all(redis_client.get(redis_keys.note_cache_key(row.pk)) for row in rows[:3])  # the round read 3

    def test_a_stale_author_table_entry_is_corrected(self, active_alice, active_bob, active_charlie, feed, monkeypatch):
        note = feed[1]  # bob's
        monkeypatch.setitem(note_cache._note_authors, note.pk, active_charlie.pk)  # a wrong guess

        page = selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=10)

        assert {n.pk: n.author.username for n in page.notes}[note.pk] == "bob"
        assert note_cache._note_authors[note.pk] == active_bob.pk

    def test_the_per_process_tables_empty_themselves_when_full(self, active_alice, feed, monkeypatch):
        monkeypatch.setattr(note_cache, "NOTE_AUTHORS_MAX", 2)
        monkeypatch.setattr(note_cache, "PARSED_MAX", 2)

        first = page_ids(active_alice)
        second = page_ids(active_alice)

        assert first == second == [n.pk for n in sorted(feed, key=lambda n: -n.published_ms)]
        assert len(note_cache._parsed_notes) <= 2
        assert len(note_cache._note_authors) <= 2 + 6


class TestForgetting:
    def test_a_hidden_note_leaves_the_page_at_commit_before_its_task_runs(
        self, active_alice, feed, no_tasks, redis_client, django_capture_on_commit_callbacks
    ):
        hidden = feed[5]
        with django_capture_on_commit_callbacks(execute=True):
            services.note_hide(note=hidden, hidden=True)

        assert redis_client.get(redis_keys.note_cache_key(hidden.pk)) == redis_keys.CACHE_TOMBSTONE
        assert hidden.pk not in page_ids(active_alice)
        assert hidden.pk not in inbox_ids(redis_client, active_alice)  # a stale id, confirmed on the primary and removed

    def test_the_task_forgets_it_again_when_the_commit_could_not(
        self, active_alice, feed, redis_client, monkeypatch, django_capture_on_commit_callbacks
    ):
        hidden = feed[5]
        monkeypatch.setattr(note_cache, "cache_forget_now", lambda **kw: False)  # Redis failed at commit

        with django_capture_on_commit_callbacks(execute=True):
            services.note_hide(note=hidden, hidden=True)  # eager: the feed.note task retracts

        assert redis_client.get(redis_keys.note_cache_key(hidden.pk)) == redis_keys.CACHE_TOMBSTONE
        assert hidden.pk not in page_ids(active_alice)

    def test_an_unhidden_note_is_cached_again_by_its_fan_out(
        self, active_alice, feed, redis_client, django_capture_on_commit_callbacks
    ):
        note = feed[5]
        with django_capture_on_commit_callbacks(execute=True):
            services.note_hide(note=note, hidden=True)
        with django_capture_on_commit_callbacks(execute=True):
            services.note_hide(note=note, hidden=False)

        assert redis_client.get(redis_keys.note_cache_key(note.pk)) == note_cache.note_value(note)
        assert page_ids(active_alice)[0] == note.pk

    def test_a_deleted_note_leaves_the_page_at_commit(
        self, active_alice, active_bob, feed, no_tasks, django_capture_on_commit_callbacks
    ):
        note = feed[5]
        with django_capture_on_commit_callbacks(execute=True):
            services.note_delete(note=note, actor=active_bob)

        assert note.pk not in page_ids(active_alice)

    def test_a_deactivated_authors_notes_leave_the_page_at_commit(
        self, active_alice, active_bob, feed, no_tasks, redis_client, django_capture_on_commit_callbacks
    ):
        from users.services import user_set_active

        with django_capture_on_commit_callbacks(execute=True):
            user_set_active(user=active_bob, is_active=False)

        assert redis_client.get(account_key(active_bob.pk)) == ACCOUNT_TOMBSTONE
        assert {n.author_id for n in selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=10).notes} == {
            feed[0].author_id
        }

    def test_an_author_whose_entry_is_forgotten_is_read_from_the_database(self, active_alice, active_bob, feed, redis_client):
        User.objects.filter(pk=active_bob.pk).update(is_active=False)  # no signal: the forget done by hand below
        note_cache.cache_forget(redis_client, author_ids=[active_bob.pk])

        shown = page_ids(active_alice)

        assert shown == [n.pk for n in sorted(feed, key=lambda n: -n.published_ms) if n.author_id != active_bob.pk]
        assert not set(inbox_ids(redis_client, active_alice)) & {n.pk for n in feed if n.author_id == active_bob.pk}

    def test_a_renamed_author_is_shown_with_the_new_name(
        self, active_alice, active_bob, feed, django_capture_on_commit_callbacks
    ):
        page_ids(active_alice)  # the old name is cached
        with django_capture_on_commit_callbacks(execute=True):
            active_bob.display_name = "Robert"
            active_bob.save()

        names = {n.author.shown_name for n in selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=10).notes}

        assert names == {"Robert", "Charlie"}
        assert OutboxEntry.objects.filter(
            kind=feed_outbox.AUTHOR_CACHE_KIND, subject_id=active_bob.pk, applied_at__isnull=False
        ).exists()

    def test_a_save_of_other_fields_forgets_nothing(self, active_bob, feed, redis_client, django_capture_on_commit_callbacks):
        with django_capture_on_commit_callbacks(execute=True):
            active_bob.last_login = timezone.now()
            active_bob.save(update_fields=["last_login"])

        assert not OutboxEntry.objects.filter(kind=feed_outbox.AUTHOR_CACHE_KIND, subject_id=active_bob.pk).exists()
        assert redis_client.get(account_key(active_bob.pk)) != ACCOUNT_TOMBSTONE

    def test_a_tombstone_refuses_a_fill_read_before_the_change(self, active_alice, feed, redis_client):
        note = Note.objects.select_related("author").get(pk=feed[5].pk)  # read while visible...
        note_cache.cache_forget(redis_client, note_ids=[note.pk])  # ...then the change committed

        pipe = redis_client.pipeline(transaction=False)
        note_cache.queue_cache_fill(pipe, [note], replace=False)  # the reader's late fill
        pipe.execute()

        assert redis_client.get(redis_keys.note_cache_key(note.pk)) == redis_keys.CACHE_TOMBSTONE
        assert 0 < redis_client.ttl(redis_keys.note_cache_key(note.pk)) <= redis_keys.CACHE_TOMBSTONE_SECONDS

    def test_while_tombstoned_pages_read_the_database_and_write_nothing(self, active_alice, feed, redis_client):
        note = feed[5]
        note_cache.cache_forget(redis_client, note_ids=[note.pk])

        with CaptureQueriesContext(connection) as queries:
            shown = page_ids(active_alice, limit=3)

        assert shown[0] == note.pk
        assert len(queries.captured_queries) == 2  # the note (its author is cached), no fill; the visibility check
        assert redis_client.get(redis_keys.note_cache_key(note.pk)) == redis_keys.CACHE_TOMBSTONE

    def test_a_deleted_account_leaves_no_cache_key(
        self, active_alice, active_bob, feed, redis_client, django_capture_on_commit_callbacks
    ):
        with django_capture_on_commit_callbacks(execute=True):
            User.objects.get(pk=active_bob.pk).delete()

        assert not redis_client.exists(account_key(active_bob.pk))
        assert {n.author.username for n in selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=10).notes} == {
            "charlie"
        }


class TestFollowing:
    def test_an_unfollowed_authors_notes_are_skipped_and_left_for_the_unfollow_task(
        self, active_alice, active_bob, feed, no_tasks, redis_client, django_capture_on_commit_callbacks
    ):
        from social import services as social_services

        with django_capture_on_commit_callbacks(execute=True):
            social_services.follow_delete(
                actor=active_alice, followee_id=active_bob.pk
            )  # the mirror applies inline; feed.pair waits

        bobs = {n.pk for n in feed if n.author_id == active_bob.pk}
        assert not set(page_ids(active_alice)) & bobs
        assert bobs <= set(inbox_ids(redis_client, active_alice))

    def test_a_page_from_redis_reads_no_follow_row_also_past_the_horizon(self, active_alice, active_bob, active_charlie, feed):
        with CaptureQueriesContext(connection) as queries:
            page = selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=10)  # 6 notes: the tail from the database

        notes_sql, follow_sql = (
            [q["sql"] for q in queries.captured_queries if table in q["sql"]] for table in ("feed_note", "social_follow")
        )
        assert (page.source, len(page.notes)) == ("redis", 6)
        assert (len(queries.captured_queries), len(notes_sql), len(follow_sql)) == (2, 1, 1)
        assert "social_follow" not in notes_sql[0]  # the tail's authors are the Redis following set
        # The visibility check reads follow rows only by key, for the page's authors (bob and charlie).
        assert follow_sql[0].endswith(
            f"WHERE follower_id = {active_alice.pk} AND followee_id IN ({min(active_bob.pk, active_charlie.pk)}, {max(active_bob.pk, active_charlie.pk)})"
        )

    def test_only_the_pages_authors_are_asked_about(self, active_alice, feed, monkeypatch):
        asked: list[int] = []
        real = note_cache.lookup

        def spy(client, keys, set_key, members):
            asked.append(len(members))
            return real(client, keys, set_key, members)

        monkeypatch.setattr(note_cache, "lookup", spy)
        read_with_the_inbox: list[note_cache.NoteReads] = []
        real_reads = note_cache.NoteReads.of.__func__  # type: ignore[attr-defined]

        def reads_spy(cls: Any, *replies: Any) -> note_cache.NoteReads:
            read_with_the_inbox.append(real_reads(cls, *replies))
            return read_with_the_inbox[-1]

        monkeypatch.setattr(note_cache.NoteReads, "of", classmethod(reads_spy))
        note_cache.forget_note_authors()

        page_ids(active_alice, limit=2)

        # The authors of the page's 3 ids (2 accounts), never the following set: on one server read
        # with the inbox's first round (no lookup of its own), on a cluster by the lookup.
        asked += [len(reads.followed) for reads in read_with_the_inbox]
        assert asked and max(asked) <= 2


class TestReadWithTheInbox:
    """On one server the first round reads the note cache of the window's first ids (``INBOX_ROUND_LUA``)."""

    def lookups(self, monkeypatch: Any) -> list[list[int]]:
        asked: list[list[int]] = []
        real = note_cache.lookup

        def spy(client: Any, keys: Any, set_key: Any, members: Any) -> Any:
            asked.append(list(members))
            return real(client, keys, set_key, members)

        monkeypatch.setattr(note_cache, "lookup", spy)
        return asked

    def test_a_cached_page_takes_no_second_round_and_equals_the_database_page(
        self, active_alice, feed, monkeypatch, redis_backend
    ):
        asked = self.lookups(monkeypatch)
        note_cache.forget_note_authors()  # a process that never met these ids

        page = selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=4)

        truth = selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=4, database_only=True)
        assert page.source == "redis"
        assert [(n.pk, n.author_id, n.body, n.published_ms) for n in page.notes] == [
            (n.pk, n.author_id, n.body, n.published_ms) for n in truth.notes
        ]
        assert [n.author.username for n in page.notes] == [n.author.username for n in truth.notes]
        if redis_backend is None:  # a cluster has no script: it makes its lookups
            assert asked == []

    def test_what_the_round_found_missing_is_read_from_the_database_and_filled(
        self, active_alice, active_bob, active_charlie, feed, monkeypatch, redis_client, redis_backend
    ):
        if redis_backend is not None:
            pytest.skip("a cluster reads the note cache by its own lookups")
        newest = max(feed, key=lambda n: n.published_ms)
        redis_client.delete(redis_keys.note_cache_key(newest.pk))  # evicted
        redis_client.delete(account_key(active_bob.pk), account_key(active_charlie.pk))  # both authors' entries
        asked = self.lookups(monkeypatch)

        page = selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=6)

        assert [n.pk for n in page.notes] == [n.pk for n in sorted(feed, key=lambda n: -n.published_ms)]
        assert {n.author.username for n in page.notes} == {active_bob.username, active_charlie.username}
        assert asked == []  # the round's reads were the lookup: what they missed came from the database
        assert redis_client.get(redis_keys.note_cache_key(newest.pk)) == note_cache.note_value(newest)
        assert parse_account_value(redis_client.get(account_key(active_bob.pk)))[0] == active_bob.username

    def test_a_muted_or_unfollowed_author_read_with_the_round_is_still_left_out(
        self, active_alice, active_bob, feed, no_tasks, redis_client, django_capture_on_commit_callbacks
    ):
        from social import services as social_services

        with django_capture_on_commit_callbacks(execute=True):
            social_services.follow_delete(actor=active_alice, followee_id=active_bob.pk)

        page = selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=10)

        assert page.notes and {n.author_id for n in page.notes} == {n.author_id for n in feed} - {active_bob.pk}


class TestRedisDown:
    def test_a_cached_page_falls_back_to_the_database_when_redis_fails(self, active_alice, feed, monkeypatch):
        def fail(*args, **kwargs):
            raise ConnectionError("redis is gone")

        monkeypatch.setattr(note_cache, "resolve_notes", fail)

        page = selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=10)

        assert page.source == "database"
        assert [n.pk for n in page.notes] == [n.pk for n in sorted(feed, key=lambda n: -n.published_ms)]

    def test_an_inbox_being_rebuilt_reads_the_database(self, active_alice, feed, redis_client):
        redis_client.set(redis_keys.inbox_rebuilding_key(active_alice.pk), "1")

        page = selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=10)

        assert (page.source, page.catching_up, len(page.notes)) == ("database", True, 6)


def test_a_cached_author_answers_as_its_account_in_json(user_factory: Any) -> None:
    from feed.paging import FeedAuthor
    from users.serializers import user_json

    named = user_factory(username="zoe", display_name="Zoë Z")
    plain = user_factory(username="yan")

    for user in (named, plain):
        assert user_json(FeedAuthor.of(user)) == user_json(user)
    assert user_json(FeedAuthor.of(named)) == {"id": named.pk, "username": "zoe", "displayName": "Zoë Z"}

"""Visibility at read time (issue 23, invariant 10): a committed block, removal, unfollow or
privacy change is in force on the reader's very next request, while Redis still holds the
state from before it (the change committed, its after-commit work not applied: the outbox
entries pending, the follow mirror, the inbox and the note cache as they were).

The cast: ``alice`` (the reader) follows ``bob`` (a private account) and ``charlie`` (public);
their notes are in alice's inbox and in the note cache, as after fan-out. Bob's oldest note is
the inbox's tail, so a Redis page takes it from the database (the following set's part).
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core.models import OutboxEntry
from feed import note_cache, redis_keys, selectors
from social import controls
from social import redis_keys as social_keys
from social import services as social_services
from social.visibility import hidden_authors
from tests.support.accounts import make_user, signed_in
from tests.support.feed import cursor_all, inbox_ids, scroll_all

pytestmark = pytest.mark.django_db

BASE_MS = int((timezone.now() - timedelta(hours=1)).timestamp() * 1000)
NOTE_ID = re.compile(r'data-note-id="(\d+)"')

# (name, author, ms after BASE_MS), oldest first: bob's b0 is the inbox's tail.
NOTES = [
    ("b0", "bob", 0),
    ("c1", "charlie", 10),
    ("b1", "bob", 20),
    ("b2", "bob", 30),
    ("c2", "charlie", 40),
    ("b3", "bob", 50),
    ("c3", "charlie", 60),
]


@pytest.fixture
def lagging(django_capture_on_commit_callbacks):
    """``lagging(action)``: run and commit ``action()`` with none of its after-commit work applied
    (the mirror writes, the inbox clean-up, the cache tombstones: Redis lags the database)."""

    def run(action):
        with django_capture_on_commit_callbacks(execute=False):
            return action()

    return run


@pytest.fixture
def cast(active_alice, active_bob, active_charlie, follow, publish, synced, run_commits):
    """alice follows private bob and public charlie; ``{name: note}`` of ``NOTES``, fanned out."""
    follow(active_alice, active_bob)
    follow(active_alice, active_charlie)
    run_commits(lambda: controls.account_privacy_set(actor=active_bob, private=True))
    synced(active_alice)
    authors = {"bob": active_bob, "charlie": active_charlie}
    return {name: publish(authors[author], name, at_ms=BASE_MS + at) for name, author, at in NOTES}


def ids(notes, names):
    """The ids of ``notes`` named in ``names`` (a space-separated string), in that order."""
    return [notes[name].pk for name in names.split()]


def every_read(reader):
    """What every way of reading the home feed shows ``reader``: ``{read: note ids in order}``."""
    client = signed_in(reader)
    scroll = client.get("/api/blog/of/follow?limit=20").json()["data"]
    return {
        "selector": [note.pk for note in selectors.home_timeline(user_id=reader.pk, cursor=None, limit=20).notes],
        "home page": [int(found) for found in NOTE_ID.findall(client.get("/home").content.decode())],
        "api feed": [item["id"] for item in client.get("/api/feed?limit=20").json()["data"]["list"]],
        "api scroll": [item["id"] for item in scroll["list"]],
        "cursor pages of 2": cursor_all(reader, 2)[0],
        "scroll pages of 2": scroll_all(reader, 2)[0],
        "database path": [
            note.pk for note in selectors.home_timeline(user_id=reader.pk, cursor=None, limit=20, database_only=True).notes
        ],
    }


def the_same(expected):
    return dict.fromkeys(
        ["selector", "home page", "api feed", "api scroll", "cursor pages of 2", "scroll pages of 2", "database path"], expected
    )


def cache_cold(redis_client, notes):
    """Forget what Redis and this process know of the notes (a cold process, a cache emptied)."""
    redis_client.delete(*redis_keys.note_cache_keys([note.pk for note in notes.values()]))
    note_cache.forget_note_authors()


# The changes after which alice may no longer see bob's notes (bob is private).
ENDS_BOB = {
    "bob blocks alice": lambda alice, bob: controls.block_create(actor=bob, target_id=alice.pk),
    "alice blocks bob": lambda alice, bob: controls.block_create(actor=alice, target_id=bob.pk),
    "bob removes alice as a follower": lambda alice, bob: controls.follower_remove(actor=bob, follower_id=alice.pk),
    "alice unfollows bob": lambda alice, bob: social_services.follow_delete(actor=alice, followee_id=bob.pk),
}


class TestTheHomeFeedWhileRedisLags:
    @pytest.mark.parametrize("change", list(ENDS_BOB))
    @pytest.mark.parametrize("cache", ["warm", "cold"])
    def test_the_next_read_shows_none_of_the_private_accounts_notes(
        self, active_alice, active_bob, cast, lagging, redis_client, change, cache
    ):
        before = every_read(active_alice)

        lagging(lambda: ENDS_BOB[change](active_alice, active_bob))
        if cache == "cold":
            cache_cold(redis_client, cast)

        # Redis lags: alice's following set and inbox still hold bob, the entries are pending.
        assert str(active_bob.pk).encode() in redis_client.smembers(social_keys.following_set_key(active_alice.pk))
        assert set(ids(cast, "b3 b2 b1 b0")) <= set(inbox_ids(redis_client, active_alice))
        assert OutboxEntry.objects.filter(applied_at__isnull=True).exists()
        assert before == the_same(ids(cast, "c3 b3 c2 b2 b1 c1 b0"))
        assert selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=20).source == "redis"
        assert every_read(active_alice) == the_same(ids(cast, "c3 c2 c1"))

    def test_a_public_account_that_blocks_the_reader_leaves_its_feed_at_once(
        self, active_alice, active_charlie, cast, lagging, redis_client
    ):
        lagging(lambda: controls.block_create(actor=active_charlie, target_id=active_alice.pk))

        assert set(ids(cast, "c3 c2 c1")) <= set(inbox_ids(redis_client, active_alice))
        assert every_read(active_alice) == the_same(ids(cast, "b3 b2 b1 b0"))

    def test_a_pulled_private_accounts_notes_leave_at_once(
        self, active_alice, active_bob, active_charlie, follow, publish, synced, lagging, redis_client, run_commits
    ):
        follow(active_alice, active_bob)
        follow(active_alice, active_charlie)
        run_commits(lambda: controls.account_privacy_set(actor=active_bob, private=True))
        redis_client.sadd(redis_keys.pull_authors_key(), active_bob.pk)  # a big account: pulled at read time
        selectors.forget_pull_authors()
        synced(active_alice)
        notes = {
            name: publish({"bob": active_bob, "charlie": active_charlie}[author], name, at_ms=BASE_MS + at)
            for name, author, at in NOTES
        }
        assert not set(ids(notes, "b3 b2 b1 b0")) & set(inbox_ids(redis_client, active_alice))
        assert every_read(active_alice)["selector"] == ids(notes, "c3 b3 c2 b2 b1 c1 b0")

        lagging(lambda: controls.follower_remove(actor=active_bob, follower_id=active_alice.pk))

        assert every_read(active_alice) == the_same(ids(notes, "c3 c2 c1"))

    def test_an_account_turning_private_leaves_the_feed_of_a_reader_who_unfollowed_it(
        self, active_alice, active_charlie, cast, lagging, redis_client
    ):
        lagging(lambda: social_services.follow_delete(actor=active_alice, followee_id=active_charlie.pk))
        lagging(lambda: controls.account_privacy_set(actor=active_charlie, private=True))

        assert set(ids(cast, "c3 c2 c1")) <= set(inbox_ids(redis_client, active_alice))
        assert every_read(active_alice) == the_same(ids(cast, "b3 b2 b1 b0"))

    def test_equal_publish_times_are_scrolled_once_each_around_the_hidden_notes(
        self, active_alice, active_bob, active_charlie, follow, publish, synced, lagging
    ):
        follow(active_alice, active_bob)
        follow(active_alice, active_charlie)
        synced(active_alice)
        older = publish(active_charlie, "older", at_ms=BASE_MS)
        at = BASE_MS + 100
        # One millisecond, ids ascending: c_a, b_a, c_b, b_b, c_c.
        c_a, _, c_b, _, c_c = (
            publish(author, at_ms=at) for author in (active_charlie, active_bob, active_charlie, active_bob, active_charlie)
        )
        newest = publish(active_charlie, "newest", at_ms=BASE_MS + 200)

        lagging(lambda: controls.block_create(actor=active_bob, target_id=active_alice.pk))
        seen, states, pages = scroll_all(active_alice, 2)
        client = signed_in(active_alice)
        first = client.get("/api/blog/of/follow?limit=3").json()["data"]
        second = client.get(f"/api/blog/of/follow?limit=3&lastId={first['minTime']}&offset={first['offset']}").json()["data"]

        assert seen == [newest.pk, c_a.pk, c_b.pk, c_c.pk, older.pk]
        assert (states[:2], pages) == ([(at, 1), (at, 3)], 3)
        assert [n["id"] for n in first["list"] + second["list"]] == [newest.pk, c_a.pk, c_b.pk, c_c.pk, older.pk]


class TestHiddenAuthors:
    def test_an_author_is_hidden_unless_the_reader_follows_it_in_the_database(self, active_alice, people, run_commits):
        followed, followed_private, unfollowed, private, blocker, blocked = people(6)
        for account in (followed_private, private):
            account.approve_followers = True
            account.save(update_fields=["approve_followers"])
        for account in (followed, blocker, blocked):
            run_commits(lambda account=account: social_services.follow_create(actor=active_alice, followee_id=account.pk))
        run_commits(lambda: social_services.follow_create(actor=active_alice, followee_id=followed_private.pk))  # a request
        run_commits(lambda: controls.follow_request_approve(actor=followed_private, requester_id=active_alice.pk))
        run_commits(lambda: controls.block_create(actor=blocker, target_id=active_alice.pk))
        run_commits(lambda: controls.block_create(actor=active_alice, target_id=blocked.pk))
        deleted_id = 999_999_999
        everyone = {followed.pk, followed_private.pk, unfollowed.pk, private.pk, blocker.pk, blocked.pk, deleted_id}

        with CaptureQueriesContext(connection) as queries:
            found = hidden_authors(reader_id=active_alice.pk, author_ids=everyone)

        assert found == {unfollowed.pk, private.pk, blocker.pk, blocked.pk, deleted_id}
        assert len(queries.captured_queries) == 1
        assert hidden_authors(reader_id=active_alice.pk, author_ids=set()) == set()


class TestTheCheckCosts:
    def test_one_query_per_page_whatever_number_of_rounds_its_hidden_notes_take(self, active_alice, active_bob, cast, lagging):
        lagging(lambda: controls.block_create(actor=active_bob, target_id=active_alice.pk))
        note_cache.forget_note_authors()  # the first round meets bob's notes without knowing their author

        with CaptureQueriesContext(connection) as queries:
            page = selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=2)

        assert [note.pk for note in page.notes] == ids(cast, "c3 c2")
        assert len(queries.captured_queries) == 1
        assert "social_follow" in queries.captured_queries[0]["sql"]

    def test_an_empty_page_makes_no_query(self, db):
        loner = make_user("loner")

        with CaptureQueriesContext(connection) as queries:
            page = selectors.home_timeline(user_id=loner.pk, cursor=None, limit=20)

        assert (page.source, page.notes, len(queries.captured_queries)) == ("redis", [], 0)


class TestNotesOnProfilesWhileRedisLags:
    @pytest.mark.parametrize("change", ["bob removes alice as a follower", "alice unfollows bob"])
    def test_a_private_accounts_notes_are_refused_to_the_reader_it_no_longer_has(
        self, active_alice, active_bob, cast, lagging, change
    ):
        client = signed_in(active_alice)
        assert NOTE_ID.findall(client.get("/u/bob/").content.decode()) == [str(pk) for pk in ids(cast, "b3 b2 b1 b0")]

        lagging(lambda: ENDS_BOB[change](active_alice, active_bob))
        profile = client.get("/u/bob/").content.decode()

        assert NOTE_ID.findall(profile) == []
        assert 'id="private-notice"' in profile
        assert client.get("/u/bob/notes/").status_code == 403
        assert client.get(f"/n/{cast['b3'].pk}/").status_code == 403
        assert client.get(f"/api/notes/{cast['b3'].pk}").status_code == 403

    def test_a_blocking_account_is_absent_for_the_blocked_reader(self, active_alice, active_bob, cast, lagging):
        client = signed_in(active_alice)

        lagging(lambda: controls.block_create(actor=active_bob, target_id=active_alice.pk))

        assert client.get("/u/bob/").status_code == 404
        assert client.get("/u/bob/notes/").status_code == 404
        assert client.get(f"/n/{cast['b3'].pk}/").status_code == 404
        assert client.get(f"/api/notes/{cast['b3'].pk}").status_code == 404

    def test_an_account_turning_private_hides_its_notes_from_non_followers_at_once(
        self, active_alice, active_charlie, cast, lagging
    ):
        dave = make_user("dave")
        strangers = {"dave": signed_in(dave), "signed out": Client()}
        assert all(
            NOTE_ID.findall(c.get("/u/charlie/").content.decode()) == [str(pk) for pk in ids(cast, "c3 c2 c1")]
            for c in strangers.values()
        )

        lagging(lambda: controls.account_privacy_set(actor=active_charlie, private=True))

        for client in strangers.values():
            profile = client.get("/u/charlie/").content.decode()
            assert (NOTE_ID.findall(profile), 'id="private-notice"' in profile) == ([], True)
            assert client.get("/u/charlie/notes/").status_code == 403
            assert client.get(f"/n/{cast['c3'].pk}/").status_code == 403
            assert client.get(f"/api/notes/{cast['c3'].pk}").status_code == 403
        # alice follows charlie: she still sees them, on the profile and in her feed.
        assert NOTE_ID.findall(signed_in(active_alice).get("/u/charlie/").content.decode()) == [
            str(pk) for pk in ids(cast, "c3 c2 c1")
        ]
        assert every_read(active_alice)["selector"] == ids(cast, "c3 b3 c2 b2 b1 c1 b0")

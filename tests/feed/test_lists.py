"""Lists: membership follows the graph, a list timeline keeps the home feed's guarantees, and an
exclusive list keeps its members' notes out of the home feed on every path."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from core.paging import Cursor
from feed import redis_keys, selectors, services
from feed.models import ListMember
from feed.rebuild import inbox_rebuild, lists_rebuild
from feed.reconcile import lists_drift, reconcile_inboxes
from social import controls
from tests.support.feed import inbox_ids
from users.services import user_set_active

pytestmark = pytest.mark.django_db

BASE_MS = int((timezone.now() - timedelta(hours=1)).timestamp() * 1000)


def make_list(run_commits, owner, members=(), *, exclusive=False, title="friends"):
    created = run_commits(lambda: services.list_create(owner=owner, title=title, exclusive=exclusive))
    if members:
        run_commits(lambda: services.list_members_add(list_=created, account_ids=[m.pk for m in members]))
    return created


def list_ids(reader, list_, *, limit=10, database_only=False):
    """Every note id of the list's timeline, paged with the cursor ``limit`` at a time."""
    ids: list[int] = []
    cursor: Cursor | None = None
    while True:
        page = selectors.list_timeline(
            reader_id=reader.pk, list_id=list_.pk, cursor=cursor, limit=limit, database_only=database_only
        )
        ids.extend(note.pk for note in page.notes)
        if page.next_cursor is None:
            return ids
        cursor = page.next_cursor


def home_ids(reader, *, database_only=False):
    page = selectors.home_timeline(user_id=reader.pk, cursor=None, limit=50, database_only=database_only)
    return [note.pk for note in page.notes]


def members_in_redis(client, reader, list_):
    return {int(member) for member in client.smembers(redis_keys.list_members_key(reader.pk, list_.pk))}


class TestListTimeline:
    def test_shows_the_members_notes_newest_first_from_redis(self, cast, publish, run_commits):
        alice, bob, charlie = cast
        crew = make_list(run_commits, alice, [bob])
        b1 = publish(bob, at_ms=BASE_MS + 1)
        publish(charlie, at_ms=BASE_MS + 2)
        b2 = publish(bob, at_ms=BASE_MS + 3)

        page = selectors.list_timeline(reader_id=alice.pk, list_id=crew.pk, cursor=None, limit=10)

        assert [note.pk for note in page.notes] == [b2.pk, b1.pk]
        assert page.source == "redis"

    def test_the_cursor_walks_every_note_once_with_equal_times_as_the_database_does(self, cast, publish, run_commits):
        alice, bob, charlie = cast
        crew = make_list(run_commits, alice, [bob, charlie])
        notes = [publish(bob if i % 2 else charlie, at_ms=BASE_MS + i // 3) for i in range(11)]
        expected = [note.pk for note in sorted(notes, key=lambda n: (-n.published_ms, n.pk))]

        assert list_ids(alice, crew, limit=3) == expected
        assert list_ids(alice, crew, limit=3, database_only=True) == expected

    def test_many_members_with_small_windows_and_ties_page_as_the_database(
        self, active_alice, people, follow, publish, run_commits
    ):
        members = people(8)
        for member in members:
            follow(active_alice, member)
        crew = make_list(run_commits, active_alice, members)
        notes = [publish(members[i * 5 % 8], at_ms=BASE_MS + i // 4) for i in range(40)]
        expected = [note.pk for note in sorted(notes, key=lambda n: (-n.published_ms, n.pk))]

        assert list_ids(active_alice, crew, limit=4) == expected
        assert list_ids(active_alice, crew, limit=4, database_only=True) == expected

    def test_a_pulled_members_notes_are_in_it(self, cast, publish, run_commits, settings, people, follow, redis_client):
        alice, bob, _ = cast
        settings.FANOUT_PULL_THRESHOLD = 2
        follow(people(1)[0], bob)  # bob has 2 followers now: pulled
        crew = make_list(run_commits, alice, [bob])
        note = publish(bob)

        assert note.pk not in inbox_ids(redis_client, alice)
        assert list_ids(alice, crew) == [note.pk]

    def test_a_muted_member_is_skipped(self, cast, publish, run_commits):
        alice, bob, charlie = cast
        crew = make_list(run_commits, alice, [bob, charlie])
        publish(bob)
        c1 = publish(charlie)

        run_commits(lambda: controls.mute_create(actor=alice, target_id=bob.pk))

        assert list_ids(alice, crew) == [c1.pk]
        assert list_ids(alice, crew, database_only=True) == [c1.pk]

    def test_redis_down_reads_the_database(self, cast, publish, run_commits, redis_switch):
        alice, bob, _ = cast
        crew = make_list(run_commits, alice, [bob])
        b1 = publish(bob, at_ms=BASE_MS + 1)
        b2 = publish(bob, at_ms=BASE_MS + 2)

        redis_switch(False)
        page = selectors.list_timeline(reader_id=alice.pk, list_id=crew.pk, cursor=None, limit=10)
        redis_switch(True)

        assert [note.pk for note in page.notes] == [b2.pk, b1.pk]
        assert page.source == "database"

    def test_a_list_whose_keys_are_missing_reads_the_database(self, cast, publish, run_commits, redis_client):
        alice, bob, _ = cast
        crew = make_list(run_commits, alice, [bob])
        b1 = publish(bob)
        redis_client.delete(redis_keys.list_index_key(alice.pk))

        page = selectors.list_timeline(reader_id=alice.pk, list_id=crew.pk, cursor=None, limit=10)

        assert [note.pk for note in page.notes] == [b1.pk]
        assert page.source == "database"

    def test_a_private_accounts_notes_leave_a_removed_followers_list_at_once(self, cast, publish, run_commits, redis_client):
        alice, bob, _ = cast
        run_commits(lambda: controls.account_privacy_set(actor=bob, private=True))
        crew = make_list(run_commits, alice, [bob])
        with_followers = run_commits(lambda: services.note_create(author=bob, body="followers only", visibility="private"))
        assert list_ids(alice, crew) == [with_followers.pk]

        # The removal commits; its after-commit work (the mirrors) has not run yet.
        controls.follower_remove(actor=bob, follower_id=alice.pk)

        assert list_ids(alice, crew) == []
        assert list_ids(alice, crew, database_only=True) == []
        assert not ListMember.objects.filter(list=crew).exists()


class TestMembershipFollowsTheGraph:
    def test_an_unfollowed_member_leaves_the_list_and_its_timeline(self, cast, publish, run_commits, unfollow, redis_client):
        alice, bob, charlie = cast
        crew = make_list(run_commits, alice, [bob, charlie])
        publish(bob)
        c1 = publish(charlie)

        unfollow(alice, bob)

        assert set(ListMember.objects.filter(list=crew).values_list("account_id", flat=True)) == {charlie.pk}
        assert members_in_redis(redis_client, alice, crew) == {charlie.pk}
        assert list_ids(alice, crew) == [c1.pk]

    def test_a_member_who_blocks_the_reader_leaves_the_list(self, cast, publish, run_commits, redis_client):
        alice, bob, charlie = cast
        crew = make_list(run_commits, alice, [bob, charlie])
        publish(bob)

        run_commits(lambda: controls.block_create(actor=bob, target_id=alice.pk))

        assert members_in_redis(redis_client, alice, crew) == {charlie.pk}
        assert list_ids(alice, crew) == []

    def test_a_member_the_reader_blocks_leaves_the_list(self, cast, run_commits, redis_client):
        alice, bob, charlie = cast
        crew = make_list(run_commits, alice, [bob, charlie])

        run_commits(lambda: controls.block_create(actor=alice, target_id=bob.pk))

        assert set(ListMember.objects.filter(list=crew).values_list("account_id", flat=True)) == {charlie.pk}
        assert members_in_redis(redis_client, alice, crew) == {charlie.pk}

    def test_a_deactivated_member_leaves_the_timeline_and_comes_back_with_its_account(
        self, cast, publish, run_commits, redis_client
    ):
        alice, bob, charlie = cast
        crew = make_list(run_commits, alice, [bob, charlie])
        b1 = publish(bob)

        run_commits(lambda: user_set_active(user=bob, is_active=False))

        assert members_in_redis(redis_client, alice, crew) == {charlie.pk}
        assert list_ids(alice, crew) == []
        assert list_ids(alice, crew, database_only=True) == []

        run_commits(lambda: user_set_active(user=bob, is_active=True))

        assert members_in_redis(redis_client, alice, crew) == {bob.pk, charlie.pk}
        assert list_ids(alice, crew) == [b1.pk]

    def test_an_account_not_followed_cannot_be_added(self, cast, people, run_commits):
        alice, _, _ = cast
        stranger = people(1)[0]
        crew = make_list(run_commits, alice)

        with pytest.raises(services.ListInvalidError):
            services.list_members_add(list_=crew, account_ids=[stranger.pk])

        assert not ListMember.objects.filter(list=crew).exists()

    def test_a_list_deleted_meanwhile_is_not_found_and_nothing_is_written(self, cast, run_commits):
        alice, bob, _ = cast
        stale = make_list(run_commits, alice)
        run_commits(lambda: services.list_delete(list_=stale))

        for change in (
            lambda: services.list_members_add(list_=stale, account_ids=[bob.pk]),
            lambda: services.list_members_remove(list_=stale, account_ids=[bob.pk]),
            lambda: services.list_update(list_=stale, title="again"),
        ):
            with pytest.raises(services.ListNotFoundError):
                change()

        assert not ListMember.objects.exists()

    def test_a_deleted_list_leaves_no_keys(self, cast, run_commits, redis_client):
        alice, bob, _ = cast
        crew = make_list(run_commits, alice, [bob])

        run_commits(lambda: services.list_delete(list_=crew))

        assert not redis_client.exists(redis_keys.list_members_key(alice.pk, crew.pk))
        assert redis_client.smembers(redis_keys.list_index_key(alice.pk)) == set()


class TestExclusiveList:
    def test_push_keeps_the_members_new_notes_out_of_the_inbox(self, cast, publish, run_commits, redis_client):
        alice, bob, charlie = cast
        crew = make_list(run_commits, alice, [bob], exclusive=True)

        b1 = publish(bob)
        c1 = publish(charlie)

        assert inbox_ids(redis_client, alice) == [c1.pk]
        assert home_ids(alice) == [c1.pk]
        assert list_ids(alice, crew) == [b1.pk]

    def test_pull_keeps_a_big_members_notes_out_of_home(self, cast, publish, run_commits, settings, people, follow):
        alice, bob, charlie = cast
        settings.FANOUT_PULL_THRESHOLD = 2
        follow(people(1)[0], bob)
        make_list(run_commits, alice, [bob], exclusive=True)

        publish(bob)
        c1 = publish(charlie)

        assert home_ids(alice) == [c1.pk]

    def test_making_a_list_exclusive_takes_the_notes_out_and_back(self, cast, publish, run_commits, redis_client):
        alice, bob, charlie = cast
        crew = make_list(run_commits, alice, [bob])
        b1 = publish(bob)
        c1 = publish(charlie)
        assert set(inbox_ids(redis_client, alice)) == {b1.pk, c1.pk}

        run_commits(lambda: services.list_update(list_=crew, exclusive=True))

        assert inbox_ids(redis_client, alice) == [c1.pk]
        assert home_ids(alice) == [c1.pk]

        run_commits(lambda: services.list_update(list_=crew, exclusive=False))

        assert set(inbox_ids(redis_client, alice)) == {b1.pk, c1.pk}

    def test_rebuild_and_the_database_leave_the_members_out(self, cast, publish, run_commits, redis_client):
        alice, bob, charlie = cast
        make_list(run_commits, alice, [bob], exclusive=True)
        publish(bob)
        c1 = publish(charlie)

        inbox_rebuild(user_id=alice.pk)

        assert inbox_ids(redis_client, alice) == [c1.pk]
        assert home_ids(alice, database_only=True) == [c1.pk]

    def test_reconcile_removes_a_stray_note_of_a_member(self, cast, publish, run_commits, redis_client):
        alice, bob, charlie = cast
        make_list(run_commits, alice, [bob], exclusive=True)
        b1 = publish(bob)
        c1 = publish(charlie)
        redis_client.zadd(redis_keys.inbox_key(alice.pk), {str(b1.pk): b1.published_ms})

        report = reconcile_inboxes(user_id=alice.pk)

        assert report.notes_extra == 1
        assert inbox_ids(redis_client, alice) == [c1.pk]


class TestListsReconcile:
    def test_drift_of_the_list_keys_is_found_and_repaired(self, cast, run_commits, redis_client):
        alice, bob, charlie = cast
        crew = make_list(run_commits, alice, [bob, charlie], exclusive=True)
        redis_client.srem(redis_keys.list_members_key(alice.pk, crew.pk), str(bob.pk))
        redis_client.delete(redis_keys.excluded_key(alice.pk))

        assert lists_drift(repair=False) == 1
        assert lists_drift(repair=True) == 1

        assert members_in_redis(redis_client, alice, crew) == {bob.pk, charlie.pk}
        assert {int(m) for m in redis_client.smembers(redis_keys.excluded_key(alice.pk))} == {bob.pk, charlie.pk}
        assert lists_drift(repair=False) == 0

    def test_the_inbox_reconcile_repairs_the_list_keys_of_the_readers_it_walks(self, cast, run_commits, redis_client):
        alice, bob, _ = cast
        crew = make_list(run_commits, alice, [bob])
        redis_client.delete(redis_keys.list_index_key(alice.pk))

        report = reconcile_inboxes(user_id=alice.pk)

        assert report.lists_drifted == 1
        assert redis_client.sismember(redis_keys.list_index_key(alice.pk), str(crew.pk))

    def test_a_rebuild_writes_what_the_database_holds(self, cast, run_commits, redis_client):
        alice, bob, _ = cast
        crew = make_list(run_commits, alice, [bob])
        redis_client.delete(redis_keys.list_members_key(alice.pk, crew.pk))

        written = lists_rebuild([alice.pk])

        assert written[alice.pk].lists == {crew.pk: {bob.pk}}
        assert members_in_redis(redis_client, alice, crew) == {bob.pk}

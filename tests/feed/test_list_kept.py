"""A list's kept timeline: built from the database on a read's request, added to by fan-out,
withdrawn from by deletions, dropped when its members change or the pull set is derived again,
compared by the reconcile; a page read from it equals the database's on every path."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from feed import rebuild, redis_keys, selectors, services
from feed.reconcile import lists_drift
from social import controls
from tests.feed.test_lists import list_ids, make_list
from tests.support.accounts import signed_in
from tests.support.feed import build_kept, is_kept, kept_ids

pytestmark = pytest.mark.django_db

BASE_MS = int((timezone.now() - timedelta(hours=1)).timestamp() * 1000)


class TestBuildAndDelivery:
    def test_a_read_asks_for_the_build_and_then_reads_the_kept_timeline(self, cast, publish, run_commits, redis_client):
        alice, bob, _ = cast
        crew = make_list(run_commits, alice, [bob])
        b1 = publish(bob, at_ms=BASE_MS + 1)
        client = signed_in(alice)

        assert is_kept(alice, crew) is False
        run_commits(lambda: client.get(f"/lists/{crew.pk}/"))  # its after-commit work queues the build (eager)

        assert is_kept(alice, crew) is True
        assert kept_ids(redis_client, alice, crew) == [b1.pk]
        assert [n.pk for n in client.get(f"/lists/{crew.pk}/").context["page"].notes] == [b1.pk]

    def test_fan_out_adds_a_members_notes_and_only_theirs(self, cast, publish, run_commits, redis_client):
        alice, bob, charlie = cast
        crew = make_list(run_commits, alice, [bob])
        before = publish(bob, at_ms=BASE_MS + 1)
        build_kept(alice, crew)

        after = publish(bob, at_ms=BASE_MS + 3)
        publish(charlie, at_ms=BASE_MS + 2)

        assert kept_ids(redis_client, alice, crew) == [after.pk, before.pk]
        assert list_ids(alice, crew) == [after.pk, before.pk]
        assert list_ids(alice, crew, database_only=True) == [after.pk, before.pk]

    def test_pages_with_ties_equal_the_databases(self, active_alice, people, follow, publish, run_commits, synced):
        members = people(6)
        for member in members:
            follow(active_alice, member)
        synced(active_alice)
        crew = make_list(run_commits, active_alice, members[:4])
        early = [publish(members[i % 6], at_ms=BASE_MS + i // 3) for i in range(12)]
        build_kept(active_alice, crew)
        late = [publish(members[i % 6], at_ms=BASE_MS + 10 + i // 3) for i in range(12)]
        expected = [n.pk for n in sorted(early + late, key=lambda n: (-n.published_ms, n.pk)) if n.author in members[:4]]

        assert is_kept(active_alice, crew) is True
        assert list_ids(active_alice, crew, limit=3) == expected
        assert list_ids(active_alice, crew, limit=3, database_only=True) == expected

    def test_past_the_cap_pages_go_on_from_the_database(self, cast, publish, run_commits, redis_client, settings):
        alice, bob, _ = cast
        settings.INBOX_MAX_LEN = 5
        crew = make_list(run_commits, alice, [bob])
        notes = [publish(bob, at_ms=BASE_MS + i) for i in range(8)]
        build_kept(alice, crew)
        notes += [publish(bob, at_ms=BASE_MS + 10 + i) for i in range(3)]
        expected = [n.pk for n in reversed(notes)]

        assert len(kept_ids(redis_client, alice, crew)) == 5
        assert int(redis_client.get(redis_keys.list_floor_key(alice.pk, crew.pk))) == BASE_MS + 5
        assert list_ids(alice, crew, limit=2) == expected

    def test_a_deleted_note_leaves_it(self, cast, publish, run_commits, redis_client):
        alice, bob, _ = cast
        crew = make_list(run_commits, alice, [bob])
        b1, b2 = publish(bob, at_ms=BASE_MS + 1), publish(bob, at_ms=BASE_MS + 2)
        build_kept(alice, crew)

        run_commits(lambda: services.note_delete(note=b2, actor=bob))

        assert kept_ids(redis_client, alice, crew) == [b1.pk]
        assert list_ids(alice, crew) == [b1.pk]

    def test_a_muted_members_notes_stay_kept_and_are_skipped_by_reads(self, cast, publish, run_commits, redis_client):
        alice, bob, charlie = cast
        crew = make_list(run_commits, alice, [bob, charlie])
        build_kept(alice, crew)
        b1, c1 = publish(bob, at_ms=BASE_MS + 1), publish(charlie, at_ms=BASE_MS + 2)

        run_commits(lambda: controls.mute_create(actor=alice, target_id=bob.pk))

        assert is_kept(alice, crew) is True
        assert set(kept_ids(redis_client, alice, crew)) == {b1.pk, c1.pk}
        assert list_ids(alice, crew) == [c1.pk]

    def test_an_exclusive_lists_kept_timeline_has_the_notes_home_leaves_out(self, cast, publish, run_commits, redis_client):
        alice, bob, charlie = cast
        crew = make_list(run_commits, alice, [bob], exclusive=True)
        build_kept(alice, crew)
        b1, c1 = publish(bob, at_ms=BASE_MS + 1), publish(charlie, at_ms=BASE_MS + 2)

        assert kept_ids(redis_client, alice, crew) == [b1.pk]
        home = selectors.home_timeline(user_id=alice.pk, cursor=None, limit=10)
        assert [n.pk for n in home.notes] == [c1.pk]

    def test_a_list_made_exclusive_keeps_its_notes_while_home_loses_them(self, cast, publish, run_commits, redis_client):
        alice, bob, _ = cast
        crew = make_list(run_commits, alice, [bob])
        b1 = publish(bob, at_ms=BASE_MS + 1)
        build_kept(alice, crew)

        run_commits(lambda: services.list_update(list_=crew, exclusive=True))

        assert is_kept(alice, crew) is True
        assert kept_ids(redis_client, alice, crew) == [b1.pk]
        assert selectors.home_timeline(user_id=alice.pk, cursor=None, limit=10).notes == []

    def test_a_pulled_members_notes_are_read_from_its_outbox(
        self, cast, publish, run_commits, redis_client, settings, people, follow
    ):
        alice, bob, charlie = cast
        settings.FANOUT_PULL_THRESHOLD = 2
        follow(people(1)[0], bob)
        rebuild.pull_authors_rebuild()
        crew = make_list(run_commits, alice, [bob, charlie])
        build_kept(alice, crew)
        b1, c1 = publish(bob, at_ms=BASE_MS + 1), publish(charlie, at_ms=BASE_MS + 2)

        assert kept_ids(redis_client, alice, crew) == [c1.pk]
        assert is_kept(alice, crew) is True
        assert list_ids(alice, crew) == [c1.pk, b1.pk]

    def test_an_inactive_reader_gets_no_kept_timeline(self, cast, publish, run_commits, redis_client):
        alice, bob, _ = cast
        crew = make_list(run_commits, alice, [bob])
        type(alice).objects.filter(pk=alice.pk).update(last_seen_at=timezone.now() - timedelta(days=400))

        result = rebuild.list_timeline_rebuild(reader_id=alice.pk, list_id=crew.pk)

        assert (result.kept, result.lost) == (False, False)
        assert not redis_client.exists(redis_keys.list_synced_key(alice.pk, crew.pk))


class TestDropped:
    def test_an_unfollowed_member_drops_it_and_the_next_build_leaves_them_out(
        self, cast, publish, run_commits, unfollow, redis_client
    ):
        alice, bob, charlie = cast
        crew = make_list(run_commits, alice, [bob, charlie])
        publish(bob, at_ms=BASE_MS + 1)
        c1 = publish(charlie, at_ms=BASE_MS + 2)
        build_kept(alice, crew)

        unfollow(alice, bob)

        assert is_kept(alice, crew) is False
        assert list_ids(alice, crew) == [c1.pk]
        build_kept(alice, crew)
        assert kept_ids(redis_client, alice, crew) == [c1.pk]

    def test_a_member_added_drops_it_and_the_next_build_has_their_notes(self, cast, publish, run_commits, redis_client):
        alice, bob, charlie = cast
        crew = make_list(run_commits, alice, [bob])
        b1, c1 = publish(bob, at_ms=BASE_MS + 1), publish(charlie, at_ms=BASE_MS + 2)
        build_kept(alice, crew)

        run_commits(lambda: services.list_members_add(list_=crew, account_ids=[charlie.pk]))

        assert is_kept(alice, crew) is False
        assert list_ids(alice, crew) == [c1.pk, b1.pk]
        build_kept(alice, crew)
        assert kept_ids(redis_client, alice, crew) == [c1.pk, b1.pk]

    def test_a_change_to_another_list_keeps_this_one(self, cast, publish, run_commits):
        alice, bob, charlie = cast
        crew = make_list(run_commits, alice, [bob])
        other = make_list(run_commits, alice, [bob], title="other")
        build_kept(alice, crew)

        run_commits(lambda: services.list_members_add(list_=other, account_ids=[charlie.pk]))

        assert is_kept(alice, crew) is True

    def test_a_deactivated_member_drops_it(self, cast, publish, run_commits):
        from users.services import user_set_active

        alice, bob, charlie = cast
        crew = make_list(run_commits, alice, [bob, charlie])
        publish(bob, at_ms=BASE_MS + 1)
        c1 = publish(charlie, at_ms=BASE_MS + 2)
        build_kept(alice, crew)

        run_commits(lambda: user_set_active(user=bob, is_active=False))

        assert is_kept(alice, crew) is False
        assert list_ids(alice, crew) == [c1.pk]

    def test_a_deleted_list_leaves_no_kept_keys(self, cast, run_commits, redis_client):
        alice, bob, _ = cast
        crew = make_list(run_commits, alice, [bob])
        build_kept(alice, crew)

        run_commits(lambda: services.list_delete(list_=crew))

        assert redis_client.exists(*redis_keys.list_timeline_keys(alice.pk, crew.pk)) == 0

    def test_the_pull_set_derived_again_drops_it(self, cast, run_commits):
        alice, bob, _ = cast
        crew = make_list(run_commits, alice, [bob])
        build_kept(alice, crew)

        rebuild.pull_authors_rebuild()
        selectors.forget_pull_authors()

        assert is_kept(alice, crew) is False


class TestQueuedBuild:
    def test_a_copy_written_under_a_queued_build_goes_with_its_lock(self, cast, publish, run_commits, redis_client):
        alice, bob, _ = cast
        crew = make_list(run_commits, alice, [bob])
        redis_client.set(redis_keys.list_build_key(alice.pk, crew.pk), "queued", ex=120)  # its build never runs

        b1 = publish(bob, at_ms=BASE_MS + 1)

        copy = redis_keys.list_copy_key(alice.pk, crew.pk)
        assert [int(member) for member in redis_client.zrange(copy, 0, -1)] == [b1.pk]
        assert 0 < redis_client.ttl(copy) <= 120


class TestRacesWithTheBuild:
    def test_a_note_delivered_after_the_database_read_is_kept(self, cast, publish, run_commits, redis_client, monkeypatch):
        alice, bob, _ = cast
        crew = make_list(run_commits, alice, [bob])
        b1 = publish(bob, at_ms=BASE_MS + 1)
        late = []
        truth = rebuild.list_timeline_truth

        def read_then_publish(list_id, pulled):
            entries = truth(list_id, pulled)
            late.append(publish(bob, at_ms=BASE_MS + 2))
            return entries

        monkeypatch.setattr(rebuild, "list_timeline_truth", read_then_publish)
        build_kept(alice, crew)

        assert kept_ids(redis_client, alice, crew) == [late[0].pk, b1.pk]

    def test_a_note_deleted_after_the_database_read_is_not_brought_back(
        self, cast, publish, run_commits, redis_client, monkeypatch
    ):
        alice, bob, _ = cast
        crew = make_list(run_commits, alice, [bob])
        b1, b2 = publish(bob, at_ms=BASE_MS + 1), publish(bob, at_ms=BASE_MS + 2)
        truth = rebuild.list_timeline_truth

        def read_then_delete(list_id, pulled):
            entries = truth(list_id, pulled)
            run_commits(lambda: services.note_delete(note=b2, actor=bob))
            return entries

        monkeypatch.setattr(rebuild, "list_timeline_truth", read_then_delete)
        build_kept(alice, crew)

        assert kept_ids(redis_client, alice, crew) == [b1.pk]

    def test_a_member_change_during_the_build_loses_it(self, cast, publish, run_commits, redis_client, monkeypatch):
        alice, bob, charlie = cast
        crew = make_list(run_commits, alice, [bob])
        publish(charlie, at_ms=BASE_MS + 1)
        truth = rebuild.list_timeline_truth

        def read_then_add(list_id, pulled):
            entries = truth(list_id, pulled)
            run_commits(lambda: services.list_members_add(list_=crew, account_ids=[charlie.pk]))
            return entries

        monkeypatch.setattr(rebuild, "list_timeline_truth", read_then_add)
        result = rebuild.list_timeline_rebuild(reader_id=alice.pk, list_id=crew.pk)

        assert result.lost
        assert not redis_client.exists(redis_keys.list_synced_key(alice.pk, crew.pk))
        assert is_kept(alice, crew) is False


class TestReconcile:
    def test_a_stray_note_is_found_and_the_timeline_dropped(self, cast, publish, run_commits, redis_client):
        alice, bob, charlie = cast
        crew = make_list(run_commits, alice, [bob])
        b1 = publish(bob, at_ms=BASE_MS + 1)
        c1 = publish(charlie, at_ms=BASE_MS + 2)
        build_kept(alice, crew)
        redis_client.zadd(redis_keys.list_inbox_key(alice.pk, crew.pk), {str(c1.pk): BASE_MS + 2})
        assert list_ids(alice, crew) == [c1.pk, b1.pk]  # the fault, as a reader would see it

        assert lists_drift(repair=False) == 1
        assert lists_drift(repair=True) == 1

        assert is_kept(alice, crew) is False
        assert list_ids(alice, crew) == [b1.pk]
        assert lists_drift(repair=False) == 0

    def test_a_missing_note_is_found(self, cast, publish, run_commits, redis_client):
        alice, bob, _ = cast
        crew = make_list(run_commits, alice, [bob])
        notes = [publish(bob, at_ms=BASE_MS + i) for i in range(12)]
        expected = [note.pk for note in reversed(notes)]
        build_kept(alice, crew)
        redis_client.zrem(redis_keys.list_inbox_key(alice.pk, crew.pk), str(notes[-3].pk))
        # The fault, as a reader would see it: a full window read is trusted down to its cut.
        assert list_ids(alice, crew, limit=2) == expected[:2] + expected[3:]

        assert lists_drift(repair=True) == 1
        build_kept(alice, crew)
        assert kept_ids(redis_client, alice, crew) == expected
        assert lists_drift(repair=False) == 0

    def test_an_emptied_kept_timeline_is_drift_though_pages_stay_right(self, cast, publish, run_commits, redis_client):
        alice, bob, _ = cast
        crew = make_list(run_commits, alice, [bob])
        b1 = publish(bob, at_ms=BASE_MS + 1)
        build_kept(alice, crew)
        redis_client.zrem(redis_keys.list_inbox_key(alice.pk, crew.pk), str(b1.pk))

        # A page reads what no kept id covers from the database, at the database's cost.
        assert list_ids(alice, crew) == [b1.pk]
        assert lists_drift(repair=False) == 1

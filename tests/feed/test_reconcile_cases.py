"""The reconcile above the floor (``feed.reconcile._compare``, ``_pulled_notes``,
``kept_lists_compare``) and builds short of the cap, in the cases a break-it pass found (each
comment says what the code did before its fix). Each test states what the database's page
shows (``database_only=True``) or what the reconcile must report."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from feed import rebuild, redis_keys, selectors, services
from feed.reconcile import lists_drift, reconcile_inboxes
from tests.feed.test_lists import home_ids, list_ids, make_list
from tests.support.feed import build_kept, kept_ids

pytestmark = pytest.mark.django_db

BASE_MS = int((timezone.now() - timedelta(hours=1)).timestamp() * 1000)


def pull(author, people, follow, settings):
    """Make ``author`` a pulled author (2 followers at a threshold of 2), the pull set derived again."""
    settings.FANOUT_PULL_THRESHOLD = 2
    follow(people(1)[0], author)
    rebuild.pull_authors_rebuild()
    selectors.forget_pull_authors()


class TestPulledNotesExempted:
    def test_a_pulled_non_members_note_in_a_kept_list_timeline_is_drift(
        self, cast, publish, run_commits, redis_client, settings, people, follow
    ):
        # Before: _pulled_notes exempts any extra note whose author is in the pull set, whether or not
        # the author is a member of the list; a kept page checks only that the reader follows the
        # author (following_key), so the stray is shown. Now: exempt a pulled author's note in a
        # kept list timeline only when the author is in that list's member set (lists[reader][list]).
        alice, bob, charlie = cast
        crew = make_list(run_commits, alice, [bob])
        b1 = publish(bob, at_ms=BASE_MS + 1)
        c1 = publish(charlie, at_ms=BASE_MS + 2)
        pull(charlie, people, follow, settings)
        build_kept(alice, crew)
        # A stray: charlie is no member of crew.
        redis_client.zadd(redis_keys.list_inbox_key(alice.pk, crew.pk), {str(c1.pk): c1.published_ms})

        assert list_ids(alice, crew, database_only=True) == [b1.pk]
        assert list_ids(alice, crew) == [c1.pk, b1.pk]  # the fault as the reader sees it
        assert lists_drift(repair=False) == 1

    def test_a_pulled_authors_note_at_a_wrong_score_in_an_inbox_is_drift(
        self, cast, publish, run_commits, redis_client, settings, people, follow
    ):
        # Before: _compare drops every pulled_notes member before comparing, the score too; the
        # page merges the inbox and the outbox by (member, score), so a wrong score makes a second
        # entry. Now: exempt a pulled author's held note only when its score is its publish time
        # (read created_at with the author in _pulled_notes and compare), else count scores_wrong.
        alice, bob, charlie = cast
        b1 = publish(bob, at_ms=BASE_MS + 1)
        c1 = publish(charlie, at_ms=BASE_MS + 2)
        b2 = publish(bob, at_ms=BASE_MS + 3)
        pull(charlie, people, follow, settings)
        # charlie's note delivered before the pull, at a score that is not its publish time.
        redis_client.zadd(redis_keys.inbox_key(alice.pk), {str(c1.pk): BASE_MS + 5})

        assert home_ids(alice, database_only=True) == [b2.pk, c1.pk, b1.pk]
        # The fault as the reader sees it: c1 twice, from the inbox and from charlie's outbox.
        assert home_ids(alice) == [c1.pk, b2.pk, c1.pk, b1.pk]
        assert reconcile_inboxes(repair=False).drift > 0


class TestFloor:
    def test_a_floor_above_the_held_notes_hides_a_missing_note(self, cast, publish, redis_client):
        # Before: _compare trusts the floor key, while pages trust a set down to its lowest held
        # score (redis_window's horizon) and never read the floor. Now: compare above
        # min(floor, lowest held score) (the same while the floor is right: no notes are added
        # below it), or count a floor above the lowest held score as drift.
        alice, bob, _ = cast
        notes = [publish(bob, at_ms=BASE_MS + i) for i in range(6)]
        expected = [n.pk for n in reversed(notes)]
        inbox = redis_keys.inbox_key(alice.pk)
        redis_client.zrem(inbox, str(notes[3].pk))
        redis_client.set(redis_keys.inbox_floor_key(alice.pk), BASE_MS + 4)  # a stale or bogus floor

        assert home_ids(alice, database_only=True) == expected
        assert home_ids(alice) != expected  # pages trust the inbox above its lowest score, not the floor
        assert reconcile_inboxes(repair=False).drift > 0

    def test_a_member_that_is_no_note_id_at_the_floor_is_drift(self, cast, publish, redis_client, settings):
        # Before: _compare drops entries at or below the floor before the ``note_id is None`` check
        # (the previous code counted every such member). Now: count members that are not ids as
        # extra whatever their score.
        alice, bob, _ = cast
        settings.INBOX_MAX_LEN = 4
        for i in range(6):
            publish(bob, at_ms=BASE_MS + i)
        inbox = redis_keys.inbox_key(alice.pk)
        floor = int(redis_client.get(redis_keys.inbox_floor_key(alice.pk)))
        redis_client.zadd(inbox, {"garbage": floor})

        with pytest.raises(ValueError):
            home_ids(alice)  # the reader's page fails on it
        assert reconcile_inboxes(repair=False).drift > 0


class TestBuildShortOfTheCap:
    """A build whose truth filled the cap but lost a note to a withdrawal during the build swaps in
    a set short of the cap; SWAP_INBOX_LUA set no floor then (it does now): the set claimed nothing
    was trimmed though the database holds older notes it left out."""

    @pytest.fixture
    def built(self, cast, publish, run_commits, redis_client, settings, monkeypatch):
        alice, bob, _ = cast
        settings.INBOX_MAX_LEN = 4
        crew = make_list(run_commits, alice, [bob])
        old = [publish(bob, at_ms=BASE_MS + i) for i in range(2)]
        for note in old:
            run_commits(lambda note=note: services.note_hide(note=note, hidden=True))
        notes = [publish(bob, at_ms=BASE_MS + 10 + i) for i in range(6)]
        truth = rebuild.list_timeline_truth

        def read_then_delete(members, pulled):
            entries = truth(members, pulled)  # the newest 4: notes[2:]
            for note in notes[4:]:
                run_commits(lambda note=note: services.note_delete(note=note, actor=bob))
            return entries

        monkeypatch.setattr(rebuild, "list_timeline_truth", read_then_delete)
        build_kept(alice, crew)
        monkeypatch.setattr(rebuild, "list_timeline_truth", truth)
        assert kept_ids(redis_client, alice, crew) == [notes[3].pk, notes[2].pk]
        return {"alice": alice, "bob": bob, "crew": crew, "old": old, "notes": notes}

    def test_it_is_no_drift(self, built, redis_client):
        # Before: SWAP_INBOX_LUA sets the floor only when the copy reaches the cap; this truth did
        # (older notes were left out) but a withdrawal during the build made the copy short.
        # Now: tell the swap whether the truth read was full (len(entries) == cap) and then set the
        # floor to the truth's lowest score (or the copy's lowest), whatever the copy's size.
        alice, crew = built["alice"], built["crew"]
        assert list_ids(alice, crew) == list_ids(alice, crew, database_only=True)  # pages are right

        assert lists_drift(repair=False) == 0

    def test_old_notes_delivered_later_leave_a_hole_in_pages(self, built, run_commits, redis_client):
        # Same cause: with no floor, DELIVER_LUA's add_capped takes notes older than the ones the
        # build left out (an unhide re-fans an old note out), so the set's lowest score drops below
        # notes it never held, and pages trust it there. Same fix. (The reconcile does see this.)
        alice, crew = built["alice"], built["crew"]
        for note in built["old"]:
            run_commits(lambda note=note: services.note_hide(note=note, hidden=False))  # fanned out again, old scores
        expected = list_ids(alice, crew, database_only=True)
        assert expected == [n.pk for n in reversed(built["old"] + built["notes"][:4])]

        assert list_ids(alice, crew) == expected


class TestInboxBuildShortOfTheCap:
    def test_a_note_deleted_during_the_rebuild_is_no_drift(self, cast, publish, run_commits, redis_client, settings, monkeypatch):
        # The inbox's version of TestBuildShortOfTheCap (inboxes_rebuild, same swap script).
        alice, bob, _ = cast
        settings.INBOX_MAX_LEN = 4
        notes = [publish(bob, at_ms=BASE_MS + i) for i in range(6)]
        truth = rebuild.database_inboxes

        def read_then_delete(reader_ids, pulled):
            found = truth(reader_ids, pulled)
            run_commits(lambda: services.note_delete(note=notes[-1], actor=bob))
            return found

        monkeypatch.setattr(rebuild, "database_inboxes", read_then_delete)
        rebuild.inbox_rebuild(user_id=alice.pk)
        monkeypatch.setattr(rebuild, "database_inboxes", truth)
        assert home_ids(alice) == home_ids(alice, database_only=True)

        assert reconcile_inboxes(repair=False).drift == 0

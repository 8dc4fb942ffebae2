"""Paging the home timeline: ties, arrivals while paging, stale ids, the cap, hybrid pull, both paths."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from core.errors import InvalidInput
from core.models import OutboxEntry
from core.paging import MAX_MILLISECONDS, InvalidCursorError, feed_cursor
from core.parsing import parse_scroll
from feed import redis_keys, selectors, services
from feed.models import Note
from tests.support.feed import cursor_all, inbox_ids, scroll_all

pytestmark = pytest.mark.django_db

BASE_MS = int((timezone.now() - timedelta(hours=1)).timestamp() * 1000)


class TestScrollContractC08:
    @pytest.fixture
    def inbox_c08(self, active_alice, active_bob, follow, publish, synced):
        follow(active_alice, active_bob)
        synced(active_alice)
        notes = {}
        for name, at in [("n1", 105), ("n2", 104), ("n3", 104), ("n4", 104), ("n5", 103), ("n7", 100)]:
            notes[name] = publish(active_bob, name, at_ms=BASE_MS + at)
        return notes

    def test_the_offset_accumulates_when_a_page_shares_the_previous_minimum(self, active_alice, active_bob, inbox_c08, publish):
        notes = inbox_c08

        ids, states, _ = scroll_all(
            active_alice,
            2,
            between_pages=lambda page: page == 1 and notes.setdefault("n6", publish(active_bob, "n6", at_ms=BASE_MS + 104)),
        )

        names = {n.pk: name for name, n in notes.items()}
        assert [names[i] for i in ids] == ["n1", "n2", "n3", "n4", "n6", "n5", "n7"]
        # page 2 is n3, n4: all at 104 like page 1's minimum -> 1 + 2 = 3 (the seed's recipe says 2)
        assert states == [(BASE_MS + 104, 1), (BASE_MS + 104, 3), (BASE_MS + 103, 1), (BASE_MS + 100, 1)]

    @pytest.mark.parametrize("arrives_after_page", [1, 2])
    def test_every_note_once_newest_first_whenever_n6_arrives(
        self, active_alice, active_bob, inbox_c08, publish, arrives_after_page
    ):
        notes = inbox_c08

        def arrive(page):
            if page == arrives_after_page:
                notes["n6"] = publish(active_bob, "n6", at_ms=BASE_MS + 104)

        ids, _, _ = scroll_all(active_alice, 2, between_pages=arrive)

        scores = [Note.objects.get(pk=i).published_ms for i in ids]
        assert sorted(ids) == sorted(n.pk for n in notes.values())
        assert len(ids) == len(set(ids)) == 7
        assert scores == sorted(scores, reverse=True)

    def test_the_cursor_variant_returns_the_same_order(self, active_alice, active_bob, inbox_c08, publish):
        notes = inbox_c08

        ids, pages = cursor_all(
            active_alice,
            2,
            between_pages=lambda page: page == 1 and notes.setdefault("n6", publish(active_bob, "n6", at_ms=BASE_MS + 104)),
        )

        names = {n.pk: name for name, n in notes.items()}
        assert [names[i] for i in ids] == ["n1", "n2", "n3", "n4", "n6", "n5", "n7"]
        assert pages == 4


class TestStaleIdsC09:
    def test_deleted_rows_are_skipped_filled_from_older_ids_and_removed(
        self, active_alice, active_bob, follow, publish, synced, redis_client, django_capture_on_commit_callbacks
    ):
        follow(active_alice, active_bob)
        synced(active_alice)
        notes = [publish(active_bob, f"n{i}", at_ms=BASE_MS + i) for i in range(1, 13)]
        with django_capture_on_commit_callbacks(execute=True):  # the note cache forgets them at commit
            Note.objects.filter(pk__in=[n.pk for n in notes[4:]]).delete()  # n5..n12, the inbox untouched

        page = selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=5)

        assert [n.body for n in page.notes] == ["n4", "n3", "n2", "n1"]
        assert page.next_cursor is None
        assert sorted(inbox_ids(redis_client, active_alice)) == sorted(n.pk for n in notes[:4])

    def test_the_next_page_continues_after_the_stale_run(
        self, active_alice, active_bob, follow, publish, synced, redis_client, django_capture_on_commit_callbacks
    ):
        follow(active_alice, active_bob)
        synced(active_alice)
        notes = [publish(active_bob, f"n{i}", at_ms=BASE_MS + i) for i in range(1, 13)]
        with django_capture_on_commit_callbacks(execute=True):
            Note.objects.filter(pk__in=[n.pk for n in notes[4:8]]).delete()  # n5..n8

        first = selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=5)
        second = selectors.home_timeline(user_id=active_alice.pk, cursor=first.next_cursor, limit=5)

        assert [n.body for n in first.notes] == ["n12", "n11", "n10", "n9", "n4"]
        assert [n.body for n in second.notes] == ["n3", "n2", "n1"]
        assert second.next_cursor is None
        assert len(inbox_ids(redis_client, active_alice)) == 8

    def test_hidden_notes_disappear_at_once_before_any_cleanup(
        self, active_alice, active_bob, follow, publish, synced, redis_client, monkeypatch, django_capture_on_commit_callbacks
    ):
        follow(active_alice, active_bob)
        synced(active_alice)
        kept = publish(active_bob, "kept", at_ms=BASE_MS)
        hidden = publish(active_bob, "hidden", at_ms=BASE_MS + 1)
        selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=10)  # both in the note cache now
        monkeypatch.setattr("core.tasks.outbox_apply.apply_async", lambda *args, **kwargs: None)  # no task runs
        with django_capture_on_commit_callbacks(execute=True):
            services.note_hide(note=hidden, hidden=True)

        page = selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=10)

        assert [n.pk for n in page.notes] == [kept.pk]
        assert OutboxEntry.objects.filter(subject_id=hidden.pk, applied_at__isnull=True).exists()  # the cleanup never ran

    def test_scroll_contract_skips_stale_ids_without_a_short_page(
        self, active_alice, active_bob, follow, publish, synced, django_capture_on_commit_callbacks
    ):
        follow(active_alice, active_bob)
        synced(active_alice)
        notes = [publish(active_bob, f"n{i}", at_ms=BASE_MS + i) for i in range(1, 13)]
        with django_capture_on_commit_callbacks(execute=True):
            Note.objects.filter(pk__in=[n.pk for n in notes[4:8]]).delete()

        ids, _, pages = scroll_all(active_alice, 5)

        assert ids == [n.pk for n in reversed(notes[8:])] + [n.pk for n in reversed(notes[:4])]
        assert pages == 2


class TestPastTheCapC12:
    @pytest.fixture
    def capped(self, active_alice, active_bob, follow, publish, synced, settings):
        settings.INBOX_MAX_LEN = 5
        follow(active_alice, active_bob)
        synced(active_alice)
        return [publish(active_bob, f"n{i}", at_ms=BASE_MS + i) for i in range(1, 9)]

    def test_the_inbox_never_holds_more_than_the_cap(self, active_alice, capped, redis_client):
        assert redis_client.zcard(redis_keys.inbox_key(active_alice.pk)) == 5

    def test_scrolling_past_the_cap_continues_from_the_database_then_ends(self, active_alice, capped, redis_client):
        pages = []
        cursor = None
        while True:
            page = selectors.home_timeline(user_id=active_alice.pk, cursor=cursor, limit=3)
            pages.append([n.body for n in page.notes])
            if page.next_cursor is None:
                break
            cursor = page.next_cursor

        assert pages == [["n8", "n7", "n6"], ["n5", "n4", "n3"], ["n2", "n1"]]
        assert redis_client.zcard(redis_keys.inbox_key(active_alice.pk)) == 5

    def test_the_scroll_contract_does_the_same_with_an_explicit_end(self, active_alice, capped):
        ids, states, pages = scroll_all(active_alice, 3)

        assert ids == [n.pk for n in reversed(capped)]
        assert pages == 3
        last = selectors.home_timeline_scroll(user_id=active_alice.pk, last_id=states[-1][0], offset=states[-1][1], limit=3)
        assert (last.notes, last.has_more) == ([], False)


class TestLongRuns:
    """Runs of one millisecond longer than a round's read (Redis orders them by member bytes, the feed by id)."""

    @pytest.mark.parametrize("contract", ["cursor", "scroll"])
    def test_a_run_longer_than_a_window_is_paged_whole_in_id_order(
        self, active_alice, active_bob, follow, publish, synced, contract
    ):
        follow(active_alice, active_bob)
        synced(active_alice)
        older = publish(active_bob, "older", at_ms=BASE_MS)
        run = [publish(active_bob, f"r{i}", at_ms=BASE_MS + 1) for i in range(15)]  # ids 9.. and 10.. sort apart as bytes

        ids = cursor_all(active_alice, 3)[0] if contract == "cursor" else scroll_all(active_alice, 3)[0]

        assert ids == [n.pk for n in run] + [older.pk]

    @pytest.mark.parametrize("extra", [0, 2])
    def test_a_run_at_the_inbox_tail_cut_by_the_cap_comes_whole_from_the_database(
        self, active_alice, active_bob, follow, publish, synced, settings, extra
    ):
        settings.INBOX_MAX_LEN = 12
        follow(active_alice, active_bob)
        synced(active_alice)
        run = [publish(active_bob, f"r{i}", at_ms=BASE_MS) for i in range(12 + extra)]  # the cap trims some of the run

        ids, _ = cursor_all(active_alice, 3)

        assert ids == [n.pk for n in run]

    def test_a_short_inbox_ending_in_a_trimmed_run_is_completed_by_the_database(
        self, active_alice, active_bob, follow, publish, synced, settings
    ):
        settings.INBOX_MAX_LEN = 5
        follow(active_alice, active_bob)
        synced(active_alice)
        newest = publish(active_bob, "newest", at_ms=BASE_MS + 1)
        run = [publish(active_bob, f"r{i}", at_ms=BASE_MS) for i in range(8)]  # 4 of them kept, by member bytes

        ids, _ = cursor_all(active_alice, 10)

        assert ids == [newest.pk] + [n.pk for n in run]


class TestHybrid:
    def test_a_pull_authors_notes_are_merged_at_read_time(
        self, active_alice, active_bob, active_charlie, follow, publish, synced, settings, people, redis_client
    ):
        settings.FANOUT_PULL_THRESHOLD = 3
        for fan in people(2):
            follow(fan, active_bob)
        follow(active_alice, active_bob)  # bob now has 3 followers: pulled
        follow(active_alice, active_charlie)
        synced(active_alice)
        b1 = publish(active_bob, "b1", at_ms=BASE_MS + 1)
        c1 = publish(active_charlie, "c1", at_ms=BASE_MS + 2)
        b2 = publish(active_bob, "b2", at_ms=BASE_MS + 3)

        page = selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=10)

        assert inbox_ids(redis_client, active_alice) == [c1.pk]
        assert [n.pk for n in page.notes] == [b2.pk, c1.pk, b1.pk]
        assert page.source == "redis"

    def test_an_unfollowed_pull_author_is_no_longer_merged(
        self, active_alice, active_bob, follow, unfollow, publish, synced, settings
    ):
        settings.FANOUT_PULL_THRESHOLD = 1
        follow(active_alice, active_bob)
        synced(active_alice)
        publish(active_bob, "b1")

        unfollow(active_alice, active_bob)

        assert selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=10).notes == []


class TestBothPaths:
    def test_redis_and_database_pages_are_identical(
        self, active_alice, active_bob, active_charlie, follow, publish, synced, redis_client
    ):
        follow(active_alice, active_bob)
        follow(active_alice, active_charlie)
        synced(active_alice)
        for i in range(12):
            publish(active_bob if i % 3 else active_charlie, at_ms=BASE_MS + i // 4)  # runs of equal ms

        from_redis, _ = cursor_all(active_alice, 4)
        redis_client.delete(redis_keys.inbox_synced_key(active_alice.pk))
        redis_client.set(redis_keys.inbox_rebuilding_key(active_alice.pk), "1")  # catching up: database only
        from_database, _ = cursor_all(active_alice, 4)

        assert from_redis == from_database
        assert len(from_redis) == 12
        page = selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=4)
        assert (page.source, page.catching_up) == ("database", True)

    def test_a_malformed_cursor_is_rejected(self):
        with pytest.raises(InvalidCursorError):
            feed_cursor("not-a-cursor")

    @pytest.mark.parametrize(
        ("last_id", "offset"),
        [
            ("abc", "0"),
            ("-1", "0"),
            ("1", "x"),
            ("1", "-2"),
            ("", "3"),
            (str(2**60), "0"),
            ("1", "1000001"),
            (str(MAX_MILLISECONDS + 1), "0"),
            (str(2**53), "0"),
            ("\u00b2", "0"),
            ("01", "0"),
            ("1 ", "0"),
        ],
    )
    def test_malformed_scroll_values_are_rejected(self, last_id, offset):
        with pytest.raises(InvalidInput):
            parse_scroll(last_id, offset)

    def test_scroll_values_at_the_edges_are_accepted(self):
        assert parse_scroll(str(MAX_MILLISECONDS), "0") == (MAX_MILLISECONDS, 0)
        assert parse_scroll(None, None) == (None, 0)


# --- the paging invariant under generated timestamps --------------------------------

published = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 6)), min_size=0, max_size=25)
arrivals = st.lists(st.tuples(st.integers(1, 6), st.integers(0, 2), st.integers(0, 7)), max_size=8)


@hypothesis_settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    initial=published,
    later=arrivals,
    limit=st.integers(1, 4),
    cap=st.sampled_from([3, 6, 800]),
    contract=st.sampled_from(["cursor", "scroll"]),
    deletions=st.sets(st.integers(0, 24), max_size=4),
)
def test_paging_returns_every_note_once_newest_first(
    initial,
    later,
    limit,
    cap,
    contract,
    deletions,
    active_alice,
    people,
    follow,
    publish,
    synced,
    redis_client,
    settings,
    django_capture_on_commit_callbacks,
):
    """Invariant 2: each note present at the start (and not deleted) exactly once, newest
    first; a note published while paging exactly once if it sorts after the reader's
    position at that moment, else never; deleted ones never."""
    settings.INBOX_MAX_LEN = cap
    Note.objects.all().delete()
    if not hasattr(active_alice, "authors"):
        active_alice.authors = people(3)
        for author in active_alice.authors:
            follow(active_alice, author)
    authors = active_alice.authors
    redis_client.delete(redis_keys.inbox_key(active_alice.pk), *[redis_keys.outbox_key(a.pk) for a in authors])
    synced(active_alice)
    start = [publish(authors[a], at_ms=BASE_MS + t) for a, t in initial]
    gone = {start[i].pk for i in deletions if i < len(start)}
    with django_capture_on_commit_callbacks(execute=True):  # the note cache forgets them at commit
        Note.objects.filter(pk__in=gone).delete()  # rows gone, the inbox untouched
    must = {n.pk for n in start} - gone
    may: set[int] = set()
    seen: list[int] = []
    state: dict[str, Any] = {"cursor": None, "last": None, "offset": 0}
    page: selectors.TimelinePage | selectors.ScrollPage

    for page_number in range(1, 100):
        if contract == "cursor":
            page = selectors.home_timeline(user_id=active_alice.pk, cursor=state["cursor"], limit=limit)
            state["cursor"] = page.next_cursor
            more = page.next_cursor is not None
        else:
            page = selectors.home_timeline_scroll(
                user_id=active_alice.pk, last_id=state["last"], offset=state["offset"], limit=limit
            )
            state["last"], state["offset"] = page.min_time, page.offset
            more = page.has_more
        if more:
            assert len(page.notes) == limit  # no short page before the end
        seen.extend(n.pk for n in page.notes)
        if not more:
            break
        last = Note.objects.get(pk=seen[-1])
        for after_page, a, t in later:
            if after_page == page_number:
                note = publish(authors[a], at_ms=BASE_MS + t)
                after_reader = note.published_ms < last.published_ms or (
                    note.published_ms == last.published_ms and note.pk > last.pk
                )
                (must if after_reader else may).add(note.pk)
    else:
        raise AssertionError("the feed never ended")

    assert len(seen) == len(set(seen))
    assert must <= set(seen)
    assert set(seen) <= must | may
    assert not (set(seen) & may)
    scores = [Note.objects.get(pk=i).published_ms for i in seen]
    assert scores == sorted(scores, reverse=True)


def test_a_note_older_than_what_the_cap_trimmed_does_not_hide_the_trimmed_notes(
    active_alice, people, follow, publish, synced, redis_client, settings, django_capture_on_commit_callbacks
):
    """Found by the paging invariant on the cluster run: the cap trims a note, a page removes a
    deleted one (the inbox is below the cap again), then a note older than the trimmed one
    arrives. Added, it would lower the inbox's lowest score and claim the trimmed note was never
    there; the floor keeps it out, so the database serves that stretch."""
    settings.INBOX_MAX_LEN = 3
    author = people(1)[0]
    follow(active_alice, author)
    synced(active_alice)
    oldest, deleted, tie_a, tie_b, newest = [publish(author, at_ms=BASE_MS + t) for t in (0, 2, 1, 1, 2)]
    with django_capture_on_commit_callbacks(execute=True):
        deleted.delete()
    first = selectors.home_timeline(user_id=active_alice.pk, cursor=None, limit=1)
    late = publish(author, at_ms=BASE_MS)
    seen, cursor = [n.pk for n in first.notes], first.next_cursor
    while cursor is not None:
        page = selectors.home_timeline(user_id=active_alice.pk, cursor=cursor, limit=1)
        seen += [n.pk for n in page.notes]
        cursor = page.next_cursor

    assert seen == [newest.pk, tie_a.pk, tie_b.pk, oldest.pk, late.pk]
    assert redis_client.get(redis_keys.inbox_floor_key(active_alice.pk)) is not None
    assert late.pk not in inbox_ids(redis_client, active_alice)


class TestUserTimeline:
    """An author's own notes on its profile, as each viewer may see them, paged by cursor."""

    @pytest.fixture
    def notes(self, user_factory: Any) -> Any:
        """Nine notes of one author over two milliseconds (ids rise while the times alternate), of
        every visibility, one hidden and one deleted; returns the author."""
        author = user_factory(username="writer")
        moment = timezone.now().replace(microsecond=0) - timedelta(seconds=5)
        visibilities = ["public", "unlisted", "private", "direct", "public", "private", "public", "unlisted", "public"]
        for index, visibility in enumerate(visibilities):
            at = moment if index % 2 else moment - timedelta(milliseconds=1)
            services.note_create(author=author, body=f"note {index}", created_at=at, visibility=visibility)
        Note.objects.filter(body="note 4").update(is_hidden=True)
        Note.objects.filter(body="note 6").update(deleted_at=timezone.now())
        return author

    @pytest.mark.parametrize(
        ("viewer", "shown"),
        [("nobody", ("public", "unlisted")), ("follower", ("public", "unlisted", "private")), ("author", None)],
    )
    def test_pages_of_two_give_what_the_viewer_may_see_once_in_feed_order(
        self, notes: Any, user_factory: Any, follow: Any, viewer: str, shown: tuple[str, ...] | None
    ) -> None:
        viewer_id = None
        if viewer == "follower":
            reader = user_factory(username="reader")
            follow(reader, notes)
            viewer_id = reader.pk
        elif viewer == "author":
            viewer_id = notes.pk
        rows = Note.objects.filter(author=notes, is_hidden=False, deleted_at__isnull=True)
        if shown is not None:
            rows = rows.filter(visibility__in=shown)
        expected = list(rows.order_by("-created_at", "id").values_list("id", "created_at", "body", "visibility"))

        walked: list[tuple[int, Any, str, str]] = []
        cursor = None
        for _ in range(10):
            page = selectors.user_timeline(author=notes, cursor=cursor, limit=2, viewer_id=viewer_id)
            walked += [(note.pk, note.created_at, note.body, note.visibility) for note in page.notes]
            cursor = page.next_cursor
            if cursor is None:
                break

        assert walked == expected
        assert len(expected) == {"nobody": 4, "follower": 6, "author": 7}[viewer]
        assert all(at.tzinfo is not None for _, at, _, _ in walked)

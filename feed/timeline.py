"""Paging the home timeline: merge the inbox and pulled outboxes, fill from the database past the horizon.

**Order.** Publish time (ms) descending, then note id *ascending*. Within one
millisecond a note published later has a larger id, so it sorts after the
ones already there: a note that arrives in a run of equal times while a
client is paging through that run lands after the client's position and is
returned once, instead of shifting the run under the client (the failure of
plain "skip ``offset`` items at this score" paging).

**Position.** A page continues strictly after a ``Position(score, note_id)``
(keyset paging, as ``core.paging`` does for follow lists). The opaque
cursor is that position (``core.paging.Cursor.token``); the scroll
contract ``(lastId, offset)`` is translated to one: the ``offset``-th
visible note at score ``lastId`` (``position_from_scroll``).

**Sources.** The reader's inbox plus the outbox of every followee in the
pull set (hybrid). Each sorted set is trusted only above its *horizon*, the
lowest score it holds: below that it may have been trimmed at the cap, or
never filled. Items with a score at or below the highest horizon come from
the database, which is the truth, in the same order: scrolling past the cap
continues from the database, and a reader whose inbox is missing or
being rebuilt reads the database only.

**Stale ids.** Ids whose note is gone, hidden, deleted or whose author is
deactivated are skipped, the page is filled from older ids (no short page
in the middle of a feed) and the stale ids are removed from the sorted sets
that hold them, so the next page does not scan them again. Ids of
authors the reader no longer follows are skipped but left for the unfollow
task, so a follow mirror that lags cannot delete a live entry.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis
from django.db.models import Q, QuerySet

from core.cluster import pipeline
from core.replica import primary_reads

from . import redis_keys
from .models import Note, from_ms

# The largest note id a position can name: "after every note at this score".
MAX_NOTE_ID = 2**63 - 1
# Ids read per sorted set per round at least (stale ids make rounds repeat).
MIN_WINDOW = 10


@dataclass(frozen=True, order=True)
class Position:
    """A place in the feed order; a page holds the notes strictly after it.

    ``score`` is a publish time in unix ms; ``note_id`` 0 means "before
    every note of that millisecond", ``MAX_NOTE_ID`` "after all of them".
    """

    score: int
    note_id: int

    def precedes(self, score: int, note_id: int) -> bool:
        """Whether the note ``(score, note_id)`` comes strictly after this position."""
        return score < self.score or (score == self.score and note_id > self.note_id)


def order_key(score: int, note_id: int) -> tuple[int, int]:
    """Sort key of the feed order (newest first, ties by id ascending)."""
    return (-score, note_id)


@dataclass
class Candidate:
    """A note id read from Redis: its score and the keys that hold it."""

    note_id: int
    score: int
    keys: list[str] = field(default_factory=list)


@dataclass
class Window:
    """One round of Redis reads: complete ``items`` in feed order, whether ``more`` follow
    above the horizon, and the ``horizon`` (None: every source is empty)."""

    items: list[Candidate]
    more: bool
    horizon: int | None


def _parse(reply: Sequence[tuple[Any, float]]) -> list[tuple[int, int]]:
    return [(int(member), int(score)) for member, score in reply]


def redis_window(client: redis.Redis, keys: Sequence[str], after: Position | None, n: int) -> Window:
    """Read up to about ``n`` ids per key strictly after ``after`` and merge them.

    One round trip per key set (plus one when a read stopped inside a run of
    equal scores: that whole run is re-read, because Redis orders a run by
    member bytes and the feed by id). The merged list is cut where it stops
    being complete: above the horizon, and at or above the highest score at
    which a key's read was cut.
    """
    pipe = pipeline(client)
    for key in keys:
        pipe.zrange(key, 0, 0, withscores=True)
        if after is None:
            pipe.zrevrange(key, 0, n - 1, withscores=True)
        else:
            pipe.zrangebyscore(key, after.score, after.score, withscores=True)
            pipe.zrevrangebyscore(key, f"({after.score}", "-inf", start=0, num=n, withscores=True)
    replies = pipe.execute()
    per_key: dict[str, list[tuple[int, int]]] = {}
    cuts: dict[str, int] = {}
    tails: list[int] = []
    step = 2 if after is None else 3
    for index, key in enumerate(keys):
        group = replies[index * step : (index + 1) * step]
        tail = _parse(group[0])
        if tail:
            tails.append(tail[0][1])
        if after is None:
            read = _parse(group[1])
            items = list(read)
        else:
            ties = [(m, s) for m, s in _parse(group[1]) if after.precedes(s, m)]
            read = _parse(group[2])
            items = ties + read
        if len(read) == n:
            cuts[key] = read[-1][1]
        per_key[key] = items
    if cuts:
        pipe = pipeline(client)
        for key, cut in cuts.items():
            pipe.zrangebyscore(key, cut, cut, withscores=True)
        for (key, cut), run in zip(cuts.items(), pipe.execute()):
            whole = [(m, s) for m, s in _parse(run) if after is None or after.precedes(s, m)]
            per_key[key] = [(m, s) for m, s in per_key[key] if s != cut] + whole
    horizon = max(tails) if tails else None
    floor = max(cuts.values()) if cuts else None
    merged: dict[int, Candidate] = {}
    for key, items in per_key.items():
        for member, score in items:
            if horizon is not None and score <= horizon:
                continue
            if floor is not None and score < floor:
                continue
            candidate = merged.setdefault(member, Candidate(note_id=member, score=score))
            candidate.keys.append(key)
    ordered = sorted(merged.values(), key=lambda c: order_key(c.score, c.note_id))
    more = floor is not None and (horizon is None or floor > horizon + 1)
    return Window(items=ordered, more=more, horizon=horizon)


def load_notes(note_ids: Collection[int]) -> dict[int, Note]:
    """Notes with these ids and their authors, in one query: ``{id: Note}``."""
    if not note_ids:
        return {}
    return {note.pk: note for note in Note.objects.filter(pk__in=list(note_ids)).select_related("author")}


def visible_notes() -> QuerySet[Note]:
    """Notes that may be shown: not hidden, not deleted, author active."""
    return Note.objects.filter(is_hidden=False, deleted_at__isnull=True, author__is_active=True)


def after_filter(after: Position) -> Q:
    """Database filter for the notes strictly after ``after`` in feed order."""
    at = from_ms(after.score)
    # The bounded range (created_at <= at) lets MariaDB use the index; the
    # OR then splits the millisecond run by id.
    return Q(created_at__lte=at) & (Q(created_at__lt=at) | Q(created_at=at, id__gt=after.note_id))


def database_after(followees: Collection[int] | QuerySet[Any], after: Position | None, n: int) -> list[Note]:
    """Up to ``n`` visible notes of ``followees`` strictly after ``after``, in feed order.

    :param followees: author ids, or a ``values("followee_id")`` queryset
        (then one query does both).
    """
    if not isinstance(followees, QuerySet) and not followees:
        return []
    rows = visible_notes().filter(author_id__in=followees if isinstance(followees, QuerySet) else list(followees))
    if after is not None:
        rows = rows.filter(after_filter(after))
    return list(rows.select_related("author").order_by("-created_at", "id")[:n])


def database_run(followees: Collection[int] | QuerySet[Any], score: int) -> list[int]:
    """Ids of the visible notes of ``followees`` published at exactly ``score`` (ms), ascending."""
    if not isinstance(followees, QuerySet) and not followees:
        return []
    rows = visible_notes().filter(
        author_id__in=followees if isinstance(followees, QuerySet) else list(followees), created_at=from_ms(score)
    )
    return list(rows.order_by("id").values_list("id", flat=True))


@dataclass
class Feed:
    """Where one reader's feed comes from.

    ``followees``: the accounts the reader follows (ids from Redis, or a
    queryset on the database path). ``keys``: the inbox and the pulled
    outboxes (empty on the database path). ``client``: redis-py, or None.
    """

    reader_id: int
    followees: Collection[int] | QuerySet[Any]
    keys: list[str]
    client: redis.Redis | None = None

    def shows(self, note: Note | None) -> bool:
        """Whether ``note`` belongs in this reader's feed now."""
        if note is None or not note.is_visible:
            return False
        if isinstance(self.followees, QuerySet):
            return True  # the database query already filtered by author
        return note.author_id in self.followees and note.author_id != self.reader_id


@dataclass
class Page:
    """A page in feed order; ``has_more`` when another note follows the last one."""

    notes: list[Note]
    has_more: bool
    redis_notes: int = 0
    stale_removed: int = 0

    @property
    def last(self) -> Position | None:
        """Position of the last note shown (the next page continues after it)."""
        if not self.notes:
            return None
        return Position(self.notes[-1].published_ms, self.notes[-1].pk)


def _remove_stale(client: redis.Redis, stale: list[Candidate]) -> int:
    if not stale:
        return 0
    pipe = pipeline(client)
    for candidate in stale:
        for key in candidate.keys:
            pipe.zrem(key, redis_keys.note_member(candidate.note_id))
    return int(sum(pipe.execute()))


def _is_stale(note: Note | None) -> bool:
    return note is None or not note.is_visible


def read_page(feed: Feed, after: Position | None, limit: int) -> Page:
    """The ``limit`` notes of ``feed`` strictly after ``after`` (None: from the top).

    Reads Redis rounds until ``limit + 1`` notes are found or the sources
    are exhausted down to their horizon, then the database. One note query
    per Redis round plus at most one database page query.
    """
    want = limit + 1
    shown: list[Note] = []
    raw = after
    redis_notes = removed = 0
    if feed.client is not None and feed.keys:
        while len(shown) < want:
            window = redis_window(feed.client, feed.keys, raw, max(want - len(shown), MIN_WINDOW))
            if not window.items:
                break
            notes = load_notes([c.note_id for c in window.items])
            unseen = [c.note_id for c in window.items if _is_stale(notes.get(c.note_id))]
            if unseen:
                # Removing an id is a write, so the primary confirms it: a page
                # may read a lagging replica, which lacks a note published a
                # moment ago that fan-out already put in the inbox.
                with primary_reads():
                    notes.update(load_notes(unseen))
            stale: list[Candidate] = []
            for candidate in window.items:
                note = notes.get(candidate.note_id)
                if _is_stale(note):
                    stale.append(candidate)
                elif feed.shows(note):
                    assert note is not None
                    shown.append(note)
                raw = Position(candidate.score, candidate.note_id)
                if len(shown) == want:
                    break
            removed += _remove_stale(feed.client, stale)
            if len(shown) == want or not window.more:
                break
        redis_notes = len(shown)
    if len(shown) < want:
        shown.extend(database_after(feed.followees, raw, want - len(shown)))
    return Page(notes=shown[:limit], has_more=len(shown) > limit, redis_notes=min(redis_notes, limit), stale_removed=removed)


def visible_run(feed: Feed, score: int) -> list[int]:
    """Ids of the notes ``feed`` shows at exactly ``score`` (ms), ascending.

    From the sorted sets when ``score`` is above their horizon (one round
    trip and one note query), else from the database.
    """
    if feed.client is None or not feed.keys:
        return database_run(feed.followees, score)
    pipe = pipeline(feed.client)
    for key in feed.keys:
        pipe.zrange(key, 0, 0, withscores=True)
        pipe.zrangebyscore(key, score, score)
    replies = pipe.execute()
    tails = [int(reply[0][1]) for reply in replies[0::2] if reply]
    if not tails or score <= max(tails):
        return database_run(feed.followees, score)
    ids = {int(member) for reply in replies[1::2] for member in reply}
    notes = load_notes(ids)
    return sorted(note_id for note_id in ids if feed.shows(notes.get(note_id)))


def position_from_scroll(feed: Feed, last_id: int, offset: int) -> tuple[Position, int]:
    """Translate the scroll contract ``(lastId, offset)`` to a position.

    ``offset`` counts the notes at score ``last_id`` the client has already
    seen, in feed order; 0 means none (the first page passes the current
    time and 0).

    :returns: ``(position, seen)`` where ``seen`` is ``offset`` capped at
        the length of that run.
    """
    if offset == 0:
        return Position(last_id, 0), 0
    run = visible_run(feed, last_id)
    if offset >= len(run):
        return Position(last_id, MAX_NOTE_ID), len(run)
    return Position(last_id, run[offset - 1]), offset


def scroll_state(page: Page, last_id: int | None, seen: int) -> tuple[int | None, int]:
    """``(minTime, offset)`` to send back after ``page`` (the scroll contract).

    The offset is the number of notes at ``minTime`` the client has now
    seen. When the whole page shares the previous page's minimum, the notes
    seen before are added (resetting the count to the ones
    on this page would repeat notes).
    """
    if not page.notes:
        return last_id, seen
    min_time = page.notes[-1].published_ms
    here = sum(1 for note in page.notes if note.published_ms == min_time)
    if min_time == last_id:
        here += seen
    return min_time, here

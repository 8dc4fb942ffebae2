"""Reading a page of the home timeline: merge the inbox and pulled outboxes, fill from the database past the horizon.

Order and positions are ``feed.paging``'s, notes come from ``feed.note_cache``, the
database part from ``feed.fallback``. Every page passes ``Feed.visible``. Design:
docs/architecture.md#notes-and-the-home-feed (Reading), docs/behaviours.md#visibility-at-read-time.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis
from django.db.models import QuerySet

from core.cluster import Pipe, is_cluster, lua, node_client, pipeline
from social import redis_keys as social_keys
from social.selectors import active_follows
from social.visibility import hidden_authors, now_ms
from users.redis_keys import account_key_parts

from . import note_cache, redis_keys
from .fallback import database_after, database_run
from .paging import MAX_NOTE_ID, FeedNote, Page, Position, feed_order

# Ids read per sorted set per round at least (stale ids make rounds repeat).
MIN_WINDOW = 10
# Ids read per sorted set per round at least when many sets share a page (a
# list's members' outboxes): fewer ids per set outweigh the rounds they add.
SHARED_MIN_WINDOW = 4
# Ids read per sorted set beyond what a round needs: the lowest score a full
# read returns may continue past it (ids at one millisecond), so the run at
# that score is left to the next round instead of re-read in this one.
WINDOW_SLACK = 3


@dataclass(slots=True)
class Candidate:
    """A note id read from Redis: its score and the keys that hold it."""

    note_id: int
    score: int
    keys: tuple[str, ...] = ()


@dataclass
class Window:
    """One round of Redis reads: complete ``items`` in feed order, whether ``more`` follow above the
    horizon, and the ``horizon`` (None: no read reached a set's lowest entry, or all are empty).
    """

    items: list[Candidate]
    more: bool
    horizon: int | None


@dataclass(slots=True)
class KeyRead:
    """One round's read of one sorted set: ``items`` ``[(note_id, score_ms)]`` strictly after the
    position; ``cut``, the lowest score read when the read was full; ``tail``, the set's lowest
    score when the read reached it (None: the read was full, or found nothing below the position).
    """

    items: list[tuple[int, int]]
    cut: int | None
    tail: int | None


def _parse(reply: Sequence[tuple[Any, float]]) -> list[tuple[int, int]]:
    return [(int(member), int(score)) for member, score in reply]


# Fewer sets than this are read by a pipeline: one command per set costs about what one script does.
BATCH_MIN_KEYS = 3

# One round's reads of many sorted sets in one command (a list's members' outboxes), replying
# with each set's flat [member, score, ...] as ``queue_key_read``'s command reads it.
# ARGV: n, then "top" or a score to read from (included).
READ_WINDOWS_LUA = """
local n = tonumber(ARGV[1])
local out = {}
for i, key in ipairs(KEYS) do
  if ARGV[2] == 'top' then
    out[i] = redis.call('ZREVRANGE', key, 0, n - 1, 'WITHSCORES')
  else
    out[i] = redis.call('ZREVRANGEBYSCORE', key, ARGV[2], '-inf', 'WITHSCORES', 'LIMIT', 0, n)
  end
end
return out
"""

# The runs at the cut scores and each set's lowest entry, in one command: ARGV[i] is KEYS[i]'s
# cut; replies alternate run, tail, each flat [member, score, ...].
READ_RUNS_LUA = """
local out = {}
for i, key in ipairs(KEYS) do
  out[2 * i - 1] = redis.call('ZRANGEBYSCORE', key, ARGV[i], ARGV[i], 'WITHSCORES')
  out[2 * i] = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
end
return out
"""


def _parse_flat(reply: Sequence[Any]) -> list[tuple[int, int]]:
    # A script's reply: member, score, member, score...; a score of an integer within 2^53 is its digits.
    return [(int(reply[index]), int(reply[index + 1])) for index in range(0, len(reply), 2)]


def _batched(client: redis.Redis, keys: Sequence[str]) -> bool:
    # A script may read several keys of one server only outside a cluster (keys of one slot within).
    return len(keys) >= BATCH_MIN_KEYS and not is_cluster(client)


def _read_windows(client: redis.Redis, keys: Sequence[str], after: Position | None, n: int) -> list[KeyRead]:
    """``queue_key_read``'s read of each of ``keys``, in their order: one script outside a cluster
    (from ``BATCH_MIN_KEYS`` keys), else one pipeline."""
    if _batched(client, keys):
        replies = lua(READ_WINDOWS_LUA)(keys=list(keys), args=[n, "top" if after is None else after.score], client=client)
        return [key_read(_parse_flat(reply), after, n) for reply in replies]
    pipe = pipeline(client)
    counts = [queue_key_read(pipe, key, after, n) for key in keys]
    replies = pipe.execute()
    reads = []
    start = 0
    for count in counts:
        reads.append(parse_key_read(replies[start : start + count], after, n))
        start += count
    return reads


def _read_runs(client: redis.Redis, cuts: dict[str, int]) -> list[tuple[list[tuple[int, int]], list[tuple[int, int]]]]:
    """Each set's whole run at its cut score and its lowest entry, ``[(run, tail)]`` in ``cuts``' order."""
    keys = list(cuts)
    if _batched(client, keys):
        replies = lua(READ_RUNS_LUA)(keys=keys, args=list(cuts.values()), client=client)
        return [(_parse_flat(run), _parse_flat(tail)) for run, tail in zip(replies[0::2], replies[1::2])]
    pipe = pipeline(client)
    for key, cut in cuts.items():
        pipe.zrangebyscore(key, cut, cut, withscores=True)
        pipe.zrange(key, 0, 0, withscores=True)
    replies = pipe.execute()
    return [(_parse(run), _parse(tail)) for run, tail in zip(replies[0::2], replies[1::2])]


def queue_key_read(pipe: Pipe, key: str, after: Position | None, n: int) -> int:
    """Queue a read of up to ``n`` ids of ``key`` from ``after``'s score down (included) on ``pipe``;
    returns how many replies it takes (``parse_key_read``).
    """
    if after is None:
        pipe.zrevrange(key, 0, n - 1, withscores=True)
    else:
        pipe.zrevrangebyscore(key, after.score, "-inf", start=0, num=n, withscores=True)
    return 1


def key_read(read: list[tuple[int, int]], after: Position | None, n: int) -> KeyRead:
    """The ``KeyRead`` of up to ``n`` entries of a sorted set read from ``after``'s score down
    (``read``, newest first): the ones strictly after ``after``."""
    items = read
    if after is not None:
        # Only the run at the position's own score comes first and needs its ids compared.
        ties = 0
        while ties < len(read) and read[ties][1] >= after.score:
            ties += 1
        items = [(m, s) for m, s in read[:ties] if after.precedes(s, m)] + read[ties:]
    full = len(read) == n
    return KeyRead(items=items, cut=read[-1][1] if full else None, tail=read[-1][1] if read and not full else None)


def parse_key_read(replies: Sequence[Any], after: Position | None, n: int) -> KeyRead:
    """The ``KeyRead`` of the replies of ``queue_key_read(pipe, key, after, n)``."""
    return key_read(_parse(replies[0]), after, n)


def redis_window(
    client: redis.Redis,
    keys: Sequence[str],
    after: Position | None,
    n: int,
    *,
    need: int | None = None,
    reads: dict[str, KeyRead] | None = None,
) -> Window:
    """Read up to ``n`` ids per key strictly after ``after`` and merge them, cut where the merge stops being complete.

    One round trip for the keys not in ``reads`` (one command for many keys outside a cluster:
    ``READ_WINDOWS_LUA``). When fewer than ``need`` (default ``n``) ids
    are left, the runs at the cut scores are re-read whole and kept (a second round trip:
    Redis orders a run by member bytes, the feed by id).
    """
    found = dict(reads or {})
    todo = [key for key in keys if key not in found]
    if todo:
        found.update(zip(todo, _read_windows(client, todo, after, n)))
    per_key = {key: found[key].items for key in keys}
    cuts = {key: cut for key in keys if (cut := found[key].cut) is not None}
    tails = [tail for key in keys if (tail := found[key].tail) is not None]
    horizon = max(tails) if tails else None
    floor = max(cuts.values()) if cuts else None
    whole_runs = False
    if floor is not None:
        above = {m for items in per_key.values() for m, s in items if s > floor and (horizon is None or s > horizon)}
        if len(above) < (need or n):
            # The runs at the cuts are kept whole: their sets' tails are needed now (a run at a
            # set's tail may have been trimmed in part).
            whole_runs = True
            for (key, cut), (run, lowest) in zip(cuts.items(), _read_runs(client, cuts)):
                whole = [(m, s) for m, s in run if after is None or after.precedes(s, m)]
                per_key[key] = [(m, s) for m, s in per_key[key] if s != cut] + whole
                tails += [score for _, score in lowest]
            horizon = max(tails) if tails else None
    # Left to the next round: below the floor, or the floor's own run when it was not re-read.
    left = None if floor is None else floor - 1 if whole_runs else floor
    # Kept: strictly above the horizon and above what is left (scores are integers).
    minimum = max(bound for bound in (horizon, left) if bound is not None) if horizon is not None or left is not None else None
    if len(keys) == 1:
        shared = (keys[0],)
        picked = [item for item in per_key[keys[0]] if minimum is None or item[1] > minimum]
        # Nearly sorted already (Redis orders by score too), so this is about one pass.
        picked.sort(key=feed_order)
        ordered = [Candidate(member, score, shared) for member, score in picked]
    else:
        holders: dict[tuple[int, int], list[str]] = {}
        for key, items in per_key.items():
            for member, score in items:
                if minimum is None or score > minimum:
                    holders.setdefault((member, score), []).append(key)
        ordered = [Candidate(member, score, tuple(holders[(member, score)])) for member, score in sorted(holders, key=feed_order)]
    more = left is not None and (horizon is None or left > horizon)
    return Window(items=ordered, more=more, horizon=horizon)


@dataclass(slots=True)
class InboxRound:
    """A page's first round: ``synced`` and ``rebuilding`` (the inbox's markers), ``pulled`` (the
    pull authors the reader follows), ``read`` (the inbox's first window, or None), ``notes`` (the
    note cache's reads of the window's first ids, on one server).
    """

    synced: bool
    rebuilding: bool
    pulled: list[int]
    read: KeyRead | None
    muted: frozenset[int] = frozenset()
    notes: note_cache.NoteReads | None = None


def scored(reply: Sequence[Any]) -> list[tuple[int, int]]:
    """``[(member, score)]`` of a raw WITHSCORES reply: ``[[member, score], ...]`` on RESP3, flat
    ``[member, score, ...]`` on RESP2 (members and scores integers)."""
    if reply and isinstance(reply[0], (list, tuple)):
        return [(int(member), int(score)) for member, score in reply]
    members = iter(reply)
    return [(int(member), int(score)) for member, score in zip(members, members)]


# The first round on one server, as one script: the commands of ``inbox_round``'s pipeline, then
# the note cache's entries of the window's first ids, their authors' entries and whether the reader
# follows those authors (``note_cache.NoteReads``), so a page whose notes are all cached needs no
# second round. The keys of the entries are built from the ids read, which one server allows.
# KEYS: synced, rebuilding, mutes, excluded, following set, inbox. ARGV: now (ms), the window's
# upper score ('' for the top), n, ids to look up, the note keys' head, the account keys' head and
# tail, the pull authors.
INBOX_ROUND_LUA = """
local replies = {redis.call('MGET', KEYS[1], KEYS[2]), redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. ARGV[1], '+inf'),
    redis.call('SMEMBERS', KEYS[4])}
-- In parts: unpack takes a few thousand values at most.
local pulled = {}
for first = 8, #ARGV, 1000 do
    for _, flag in ipairs(redis.call('SMISMEMBER', KEYS[5], unpack(ARGV, first, math.min(first + 999, #ARGV)))) do
        pulled[#pulled + 1] = flag
    end
end
replies[4] = pulled
local n, window = tonumber(ARGV[3]), {}
if n > 0 then
    if ARGV[2] == '' then window = redis.call('ZREVRANGE', KEYS[6], 0, n - 1, 'WITHSCORES')
    else window = redis.call('ZREVRANGEBYSCORE', KEYS[6], ARGV[2], '-inf', 'WITHSCORES', 'LIMIT', 0, n) end
end
replies[5] = window
local notes, values, authors, seen, entries, followed = {}, {}, {}, {}, {}, {}
for index = 1, math.min(tonumber(ARGV[4]), #window / 2) do notes[index] = ARGV[5] .. window[2 * index - 1] end
if #notes > 0 then values = redis.call('MGET', unpack(notes)) end
for _, value in ipairs(values) do
    local author = value and string.match(value, '^(%d+) ')
    if author and not seen[author] then
        seen[author] = true
        authors[#authors + 1] = author
    end
end
if #authors > 0 then
    local keys = {}
    for index, author in ipairs(authors) do keys[index] = ARGV[6] .. author .. ARGV[7] end
    entries = redis.call('MGET', unpack(keys))
    followed = redis.call('SMISMEMBER', KEYS[5], unpack(authors))
end
replies[6], replies[7], replies[8], replies[9] = values, authors, entries, followed
return replies
"""


def inbox_round(
    client: redis.Redis, *, reader_id: int, pull: Sequence[int], after: Position | None, n: int, notes: int = 0
) -> InboxRound:
    """The inbox's markers, the authors skipped (muted, or in an exclusive list), which of ``pull`` the
    reader follows (``SMISMEMBER``), and the inbox's first window (``n`` ids after ``after``; 0:
    none), in one round trip to the reader's slot's master. On one server, also the note cache's
    reads of the window's first ``notes`` ids (``INBOX_ROUND_LUA``); on a cluster a pipeline.

    Commands go raw (``execute_command``): redis-py's reply callbacks cost more than the commands on a cached page.

    :raises: ``REDIS_ERRORS``; a moved slot is one.
    """
    inbox = redis_keys.inbox_key(reader_id)
    synced_key, rebuilding_key = redis_keys.inbox_synced_key(reader_id), redis_keys.inbox_rebuilding_key(reader_id)
    mutes_key, excluded_key = social_keys.mutes_key(reader_id), redis_keys.excluded_key(reader_id)
    following_key = social_keys.following_set_key(reader_id)
    reads: note_cache.NoteReads | None = None
    if not is_cluster(client):
        head, tail = account_key_parts()
        replies = lua(INBOX_ROUND_LUA)(
            keys=[synced_key, rebuilding_key, mutes_key, excluded_key, following_key, inbox],
            args=[now_ms(), "" if after is None else after.score, n, notes, redis_keys.note_cache_key_head(), head, tail, *pull],
            client=client,
        )
        window = replies[4]
        looked_up = [member for member, _ in scored(window)[: len(replies[5])]]
        reads = note_cache.NoteReads.of(looked_up, replies[5], replies[6], replies[7], replies[8])
    else:
        pipe: Pipe = node_client(client, inbox).pipeline(transaction=False)
        pipe.execute_command("MGET", synced_key, rebuilding_key)
        # The accounts the reader mutes now (O(mutes)): their notes are skipped.
        pipe.execute_command("ZRANGEBYSCORE", mutes_key, f"({now_ms()}", "+inf")
        # The members of the reader's exclusive lists: skipped as muted ones are.
        pipe.execute_command("SMEMBERS", excluded_key)
        if pull:
            pipe.execute_command("SMISMEMBER", following_key, *pull)
        if n:
            if after is None:
                pipe.execute_command("ZREVRANGE", inbox, 0, n - 1, "WITHSCORES")
            else:
                pipe.execute_command("ZREVRANGEBYSCORE", inbox, after.score, "-inf", "WITHSCORES", "LIMIT", 0, n)
        replies = pipe.execute()
        if not pull:
            replies.insert(3, [])
        window = replies[4] if n else []
    synced, rebuilding = replies[0]
    muted = frozenset(int(member) for member in replies[1]).union(int(member) for member in replies[2])
    pulled = [author for author, member in zip(pull, replies[3]) if member and author not in muted] if pull else []
    read = key_read(scored(window), after, n) if n else None
    return InboxRound(
        synced=synced is not None, rebuilding=rebuilding is not None, pulled=pulled, read=read, muted=muted, notes=reads
    )


# --- pages ------------------------------------------------------------------------


@dataclass
class Feed:
    """Where one reader's feed comes from.

    ``keys``: the inbox and pulled outboxes (empty on the database path); ``client``: redis-py
    or None; ``following_key``: the reader's following set; ``followees_key``: the set the
    database part's authors come from when not ``following_key`` (a list's members); ``first``: prefetched first-round
    reads; ``followees``: author ids the database reads are limited to (None: the following set
    or follow rows); ``window``: ids read per key in the first round (None: ``first_window``);
    ``checked``/``hidden``: authors ``visible`` asked about / found hidden.
    """

    reader_id: int
    keys: list[str]
    client: redis.Redis | None = None
    following_key: str = ""
    followees_key: str = ""
    first: Prefetch | None = None
    followees: Collection[int] | None = None
    muted: Collection[int] = frozenset()
    window: int | None = None
    notes: note_cache.NoteReads | None = None
    checked: set[int] = field(default_factory=set)
    hidden: set[int] = field(default_factory=set)

    def skipped(self) -> Collection[int]:
        """The authors whose notes this feed skips: muted, or found hidden by ``visible``."""
        return self.muted if not self.hidden else self.hidden.union(self.muted)

    def check(self, author_ids: Collection[int]) -> set[int]:
        """Ask the database (``social.visibility.hidden_authors``) about the authors among ``author_ids``
        not checked yet (one query, none when all are known); returns every author found hidden so far.
        """
        todo = set(author_ids) - self.checked
        if todo:
            self.hidden |= hidden_authors(reader_id=self.reader_id, author_ids=todo)
            self.checked |= todo
        return self.hidden

    def visible(self, notes: list[FeedNote]) -> list[FeedNote]:
        """``notes`` without those the reader may not see now, decided by the database
        (``check``), whatever the follow, block and note-cache mirrors in Redis still hold."""
        hidden = self.check({note.author_id for note in notes})
        if not hidden:
            return notes
        return [note for note in notes if note.author_id not in hidden]

    def database_followees(self) -> Collection[int] | QuerySet[Any]:
        """The authors of the database part of the feed: ``followees``; on the Redis path the following
        set (read once, only past the horizon); else the active follow rows as a
        ``values("followee_id")`` queryset. Muted and hidden authors are left out.

        :raises: ``REDIS_ERRORS`` on the Redis path.
        """
        source = self.followees_key or self.following_key
        if self.followees is None and self.client is not None and source:
            self.followees = {int(member) for member in self.client.smembers(source)} - set(self.muted)
        if self.followees is not None:
            return self.followees if not self.hidden else set(self.followees) - self.hidden
        rows = active_follows().filter(follower_id=self.reader_id)
        if skipped := self.skipped():
            rows = rows.exclude(followee_id__in=sorted(skipped))
        return rows.values("followee_id")

    def take_reads(self, after: Position | None, n: int) -> dict[str, KeyRead] | None:
        """The prefetched reads when they are for exactly ``(after, n)``, once."""
        first, self.first = self.first, None
        if first is None or first.after != after or first.n != n:
            return None
        return first.reads


@dataclass(slots=True)
class Prefetch:
    """Reads of the first round (``KeyRead`` per key) made for ``after`` and ``n``."""

    after: Position | None
    n: int
    reads: dict[str, KeyRead]


def _remove_stale(client: redis.Redis, stale: list[Candidate]) -> int:
    if not stale:
        return 0
    pipe = pipeline(client)
    for candidate in stale:
        for key in candidate.keys:
            pipe.zrem(key, redis_keys.note_member(candidate.note_id))
    return int(sum(pipe.execute()))


def first_window(limit: int) -> int:
    """Ids the first round of a page of ``limit`` notes reads per sorted set."""
    return max(limit + 1 + WINDOW_SLACK, MIN_WINDOW)


def shared_window(limit: int, keys: int) -> int:
    """Ids the first round reads per sorted set when ``keys`` sets of like size share a page of
    ``limit`` notes (a list's members' outboxes): twice each one's share plus ``WINDOW_SLACK``, at
    least ``SHARED_MIN_WINDOW``, at most ``first_window``."""
    return min(first_window(limit), max(SHARED_MIN_WINDOW, -(-2 * (limit + 1) // max(keys, 1)) + WINDOW_SLACK))


def read_page(feed: Feed, after: Position | None, limit: int) -> Page:
    """The ``limit`` notes of ``feed`` strictly after ``after`` (None: from the top).

    Redis rounds (``redis_window`` and ``note_cache.resolve_notes``) until ``limit + 1`` notes
    or the horizon, then at most one database query; notes ``Feed.visible`` drops are replaced
    from further down.
    """
    want = limit + 1
    shown: list[FeedNote] = []
    raw = after
    redis_notes = removed = 0
    if feed.client is not None and feed.keys:
        n = feed.window or first_window(limit)
        while len(shown) < want:
            need = want - len(shown)
            window = redis_window(feed.client, feed.keys, raw, n, need=need, reads=feed.take_reads(raw, n))
            if not window.items:
                break
            items = window.items
            if skipped := feed.skipped():
                # Ids whose author this process knows to be muted (or found hidden) are skipped
                # before the note cache is asked, so such a note costs no second round.
                known = note_cache._note_authors
                items = [c for c in items if known.get(c.note_id) not in skipped]
                if not items:
                    raw = Position(window.items[-1].score, window.items[-1].note_id)
                    if not window.more:
                        break
                    continue
            # The ids the page still needs first; the rest of the window only
            # when some of those are not shown (stale, not followed, or hidden).
            start = 0
            while start < len(items) and len(shown) < want:
                end = len(items) if start else want - len(shown)
                chunk = items[start:end]
                resolved = note_cache.resolve_notes(
                    feed.client,
                    [c.note_id for c in chunk],
                    reader_id=feed.reader_id,
                    following_key=feed.following_key,
                    muted=feed.skipped(),
                    reads=feed.notes,
                )
                stale: list[Candidate] = []
                for candidate in chunk:
                    start += 1
                    if (note := resolved.shown.get(candidate.note_id)) is not None:
                        shown.append(note)
                        if len(shown) == want:
                            break
                    elif candidate.note_id in resolved.stale:
                        stale.append(candidate)
                raw = Position(items[start - 1].score, items[start - 1].note_id)
                removed += _remove_stale(feed.client, stale)
                if len(shown) == want:
                    # A full page: the Redis mirrors may lag a block or a removal, the database
                    # decides. The ids of hidden authors stay for their unfollow job, as ids of
                    # unfollowed authors do; the page goes on after them, in this window first.
                    shown = feed.visible(shown)
            if len(shown) == want or not window.more:
                break
            n = max(want - len(shown) + WINDOW_SLACK, MIN_WINDOW)
        shown = feed.visible(shown)
        redis_notes = len(shown)
    while len(shown) < want:
        n = want - len(shown)
        rows = database_after(feed.database_followees(), raw, n)
        kept = feed.visible([FeedNote.of(note) for note in rows])
        shown.extend(kept)
        if len(kept) == len(rows) or len(rows) < n:
            break
        # Some authors were hidden (the follow set this read came from lags): the next read
        # leaves them out (``database_followees``) and goes on after the last row read.
        raw = Position(rows[-1].published_ms, rows[-1].pk)
    return Page(notes=shown[:limit], has_more=len(shown) > limit, redis_notes=min(redis_notes, limit), stale_removed=removed)


def visible_run(feed: Feed, score: int) -> list[int]:
    """Ids of the notes ``feed`` shows at exactly ``score`` (ms), ascending, from Redis above the
    horizon else the database; through ``Feed.visible`` so an offset counts what pages showed.
    """
    if feed.client is None or not feed.keys:
        return _visible_ids(feed, database_run(feed.database_followees(), score))
    pipe = pipeline(feed.client)
    for key in feed.keys:
        pipe.zrange(key, 0, 0, withscores=True)
        pipe.zrangebyscore(key, score, score)
    replies = pipe.execute()
    tails = [int(reply[0][1]) for reply in replies[0::2] if reply]
    if not tails or score <= max(tails):
        return _visible_ids(feed, database_run(feed.database_followees(), score))
    ids = sorted({int(member) for reply in replies[1::2] for member in reply})
    resolved = note_cache.resolve_notes(
        feed.client, ids, reader_id=feed.reader_id, following_key=feed.following_key, muted=feed.skipped()
    )
    return [note.pk for note in feed.visible([resolved.shown[note_id] for note_id in ids if note_id in resolved.shown])]


def _visible_ids(feed: Feed, run: list[tuple[int, int]]) -> list[int]:
    # ``run``: (note id, author id) pairs; the ids of the ones ``Feed.visible`` would keep.
    hidden = feed.check({author_id for _, author_id in run})
    return [note_id for note_id, author_id in run if author_id not in hidden]


def position_from_scroll(feed: Feed, last_id: int, offset: int) -> tuple[Position, int]:
    """Translate the scroll contract ``(lastId, offset)`` to a position.

    ``offset`` counts the notes at score ``last_id`` already seen, in feed order (0: none).

    :returns: ``(position, seen)``, ``seen`` being ``offset`` capped at the length of that run.
    """
    if offset == 0:
        return Position(last_id, 0), 0
    run = visible_run(feed, last_id)
    if offset >= len(run):
        return Position(last_id, MAX_NOTE_ID), len(run)
    return Position(last_id, run[offset - 1]), offset

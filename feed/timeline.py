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

**Visibility.** The Redis mirrors (the following set, the inbox, the note
cache) may lag a committed block, a removed follower, an unfollow of a
private account or an account turning private, by a frozen moment or an
after-commit job not applied yet. So every page, on every path, passes its
notes through ``Feed.visible``: one query for the page's authors
(``social.visibility.hidden_authors``: whether the reader follows each of
them in the database now, on the primary; a block either way and a removal
delete the follow rows in their own transaction). Notes it drops are
replaced from further down as stale ids are (no short page that stops the
client) but left in Redis for their own jobs; the authors it found hidden
are skipped for the rest of the page (its later rounds and database part).

**Following.** On the Redis path the reader's following set is asked only
about the authors of the ids a round read (``SMISMEMBER``, O(page)); only
a page that goes past the horizon reads the whole set, for its database
part (a page from Redis reads no follow row).

**Note cache.** What a page shows of a note (author id, publish time, body)
and of its author (username, display name) is read from the note cache
(``feed.redis_keys.note_cache_key``, ``author_cache_key``), so a page reads
no note or account row in the common case: one round trip for the inbox
(with its markers), one for the notes, their authors and the following
check (the authors of ids this process met before are known: a note's
author never changes), and a page shows ``FeedNote``s built from it, not
model instances; its one query is the visibility check of its authors
("Visibility"). Only visible notes and active accounts are cached, so a
cached note of a cached author is shown without reading its rows. An
entry is written by the fan-out (``SET``, fresh from the primary after
commit, before any inbox holds the id) and by a reader that missed it
(``SET NX``, from a primary read: a lagging replica must not write an older
state). It is *forgotten* when the note is hidden, unhidden or deleted or
the account is deactivated, renamed or deleted: at commit (``feed.receivers``)
and again by that change's outbox job, which is retried until it succeeds.
Forgetting writes a tombstone that refuses ``NX`` fills for
``CACHE_TOMBSTONE_SECONDS``, so a reader whose database read came before
the change cannot write the old state back after it. A miss or a tombstone
reads the database (the note and its author, on the primary), as a page
did before the cache.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

import redis
from django.db.models import Q, QuerySet

from core.cluster import Pipe, is_cluster, node_client, pipeline
from core.redis import REDIS_ERRORS, breaker_node, get_redis, redis_available, redis_failed
from core.replica import primary_reads
from social import redis_keys as social_keys
from social.selectors import active_follows
from social.visibility import hidden_authors, now_ms
from users.models import User

from . import redis_keys
from .models import FEED_VISIBILITIES, Note, from_ms

# The largest note id a position can name: "after every note at this score".
MAX_NOTE_ID = 2**63 - 1
# Ids read per sorted set per round at least (stale ids make rounds repeat).
MIN_WINDOW = 10
# Ids read per sorted set beyond what a round needs: the lowest score a full
# read returns may continue past it (ids at one millisecond), so the run at
# that score is left to the next round instead of re-read in this one.
WINDOW_SLACK = 3


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


@dataclass(slots=True)
class Candidate:
    """A note id read from Redis: its score and the keys that hold it."""

    note_id: int
    score: int
    keys: tuple[str, ...] = ()


@dataclass
class Window:
    """One round of Redis reads: complete ``items`` in feed order, whether ``more`` follow
    above the horizon, and the ``horizon`` as far as the round saw it (None: no read reached
    a set's lowest entry, or every set is empty)."""

    items: list[Candidate]
    more: bool
    horizon: int | None


@dataclass(slots=True)
class KeyRead:
    """What one round read of one sorted set: ``items`` ``[(note_id, score_ms)]`` strictly
    after the round's position; ``cut``, the lowest score read when the read was full (the run
    at that score may go on unread); ``tail``, the lowest score the set holds when the read
    reached it (None: the read was full, so the tail lies at or below ``cut``, or found nothing
    at all below the position).

    A horizon at or below ``cut`` changes nothing above it, so a full read needs no tail
    (``redis_window`` asks for it only when it keeps the run at ``cut``), and a short read
    ends at the set's lowest entry.
    """

    items: list[tuple[int, int]]
    cut: int | None
    tail: int | None


def _parse(reply: Sequence[tuple[Any, float]]) -> list[tuple[int, int]]:
    return [(int(member), int(score)) for member, score in reply]


def queue_key_read(pipe: Pipe, key: str, after: Position | None, n: int) -> int:
    """Queue one round's read of sorted set ``key`` on ``pipe``: up to ``n`` ids from ``after``'s
    score down (that score included: its run is split by id here); returns how many replies it
    takes (``parse_key_read``)."""
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
    """Read up to ``n`` ids per key strictly after ``after`` and merge them.

    One round trip for the keys not in ``reads`` (reads already made, e.g.
    in the pipeline that checked the inbox's markers). The merged list is
    cut where it stops being complete: above the horizon, and above the
    highest score at which a key's read was cut. When fewer than ``need``
    (default ``n``) ids are left above that score, the runs at the cut
    scores are re-read whole (one more round trip, because Redis orders a
    run by member bytes and the feed by id) and kept.
    """
    found = dict(reads or {})
    todo = [key for key in keys if key not in found]
    if todo:
        pipe = pipeline(client)
        counts = [queue_key_read(pipe, key, after, n) for key in todo]
        replies = pipe.execute()
        start = 0
        for key, count in zip(todo, counts):
            found[key] = parse_key_read(replies[start : start + count], after, n)
            start += count
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
            pipe = pipeline(client)
            for key, cut in cuts.items():
                pipe.zrangebyscore(key, cut, cut, withscores=True)
                pipe.zrange(key, 0, 0, withscores=True)
            replies = pipe.execute()
            for (key, cut), run, tail in zip(cuts.items(), replies[0::2], replies[1::2]):
                whole = [(m, s) for m, s in _parse(run) if after is None or after.precedes(s, m)]
                per_key[key] = [(m, s) for m, s in per_key[key] if s != cut] + whole
                tails += [score for _, score in _parse(tail)]
            horizon = max(tails) if tails else None
    # Left to the next round: below the floor, or the floor's own run when it was not re-read.
    left = None if floor is None else floor - 1 if whole_runs else floor
    # Kept: strictly above the horizon and above what is left (scores are integers).
    minimum = max(bound for bound in (horizon, left) if bound is not None) if horizon is not None or left is not None else None
    if len(keys) == 1:
        shared = (keys[0],)
        picked = [item for item in per_key[keys[0]] if minimum is None or item[1] > minimum]
        # Nearly sorted already (Redis orders by score too), so this is about one pass.
        picked.sort(key=_feed_order)
        ordered = [Candidate(member, score, shared) for member, score in picked]
    else:
        holders: dict[tuple[int, int], list[str]] = {}
        for key, items in per_key.items():
            for member, score in items:
                if minimum is None or score > minimum:
                    holders.setdefault((member, score), []).append(key)
        ordered = [Candidate(member, score, tuple(holders[(member, score)])) for member, score in sorted(holders, key=_feed_order)]
    more = left is not None and (horizon is None or left > horizon)
    return Window(items=ordered, more=more, horizon=horizon)


def _feed_order(item: tuple[int, int]) -> tuple[int, int]:
    """Sort key of the feed order for ``(note_id, score)``: newest first, ties by id ascending."""
    return (-item[1], item[0])


@dataclass(slots=True)
class InboxRound:
    """The first round of a page (``inbox_round``): ``synced`` and ``rebuilding`` (the inbox's
    markers), ``pulled`` (the pull authors the reader follows) and ``read``, the inbox's first
    window (None when not asked for)."""

    synced: bool
    rebuilding: bool
    pulled: list[int]
    read: KeyRead | None
    muted: frozenset[int] = frozenset()


def _scored(reply: Sequence[Any]) -> list[tuple[int, int]]:
    # A raw WITHSCORES reply: [[member, score], ...] on RESP3, flat
    # [member, score, ...] on RESP2.
    if reply and isinstance(reply[0], (list, tuple)):
        return [(int(member), int(score)) for member, score in reply]
    members = iter(reply)
    return [(int(member), int(score)) for member, score in zip(members, members)]


def inbox_round(client: redis.Redis, *, reader_id: int, pull: Sequence[int], after: Position | None, n: int) -> InboxRound:
    """The inbox's markers, which of ``pull`` (the pull set) the reader follows, and the inbox's
    first window (``queue_key_read`` of ``n`` ids after ``after``; 0: none): one pipeline to the
    master of the reader's slot (the inbox, its markers and the following set all carry the
    reader's hash tag).

    The commands go raw (``execute_command``), their replies as the server sends them: on a
    cached page redis-py's reply callbacks (scores re-encoded, then parsed) cost more than the
    commands. ``SMISMEMBER`` asks about the pull set only, never for the whole following set.

    :raises: Redis errors (``REDIS_ERRORS``); a slot that moved is one (the page reads the
        database and the next finds the new master).
    """
    inbox = redis_keys.inbox_key(reader_id)
    pipe: Pipe = (node_client(client, inbox) if is_cluster(client) else client).pipeline(transaction=False)
    pipe.execute_command("MGET", redis_keys.inbox_synced_key(reader_id), redis_keys.inbox_rebuilding_key(reader_id))
    # The accounts the reader mutes now (O(mutes)): their notes are skipped.
    pipe.execute_command("ZRANGEBYSCORE", social_keys.mutes_key(reader_id), f"({now_ms()}", "+inf")
    if pull:
        pipe.execute_command("SMISMEMBER", social_keys.following_set_key(reader_id), *pull)
    if n:
        if after is None:
            pipe.execute_command("ZREVRANGE", inbox, 0, n - 1, "WITHSCORES")
        else:
            pipe.execute_command("ZREVRANGEBYSCORE", inbox, after.score, "-inf", "WITHSCORES", "LIMIT", 0, n)
    replies = pipe.execute()
    synced, rebuilding = replies[0]
    muted = frozenset(int(member) for member in replies[1])
    pulled = [author for author, member in zip(pull, replies[2]) if member and author not in muted] if pull else []
    read = key_read(_scored(replies[-1]), after, n) if n else None
    return InboxRound(synced=synced is not None, rebuilding=rebuilding is not None, pulled=pulled, read=read, muted=muted)


def load_notes(note_ids: Collection[int]) -> dict[int, Note]:
    """Notes with these ids and their authors, in one query: ``{id: Note}``."""
    if not note_ids:
        return {}
    return {note.pk: note for note in Note.objects.filter(pk__in=list(note_ids)).select_related("author")}


def visible_notes() -> QuerySet[Note]:
    """Notes that may be shown in feeds: not hidden, not deleted, author active, not direct."""
    return Note.objects.filter(is_hidden=False, deleted_at__isnull=True, author__is_active=True, visibility__in=FEED_VISIBILITIES)


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


def database_run(followees: Collection[int] | QuerySet[Any], score: int) -> list[tuple[int, int]]:
    """``(id, author id)`` of the visible notes of ``followees`` published at exactly ``score`` (ms),
    ids ascending."""
    if not isinstance(followees, QuerySet) and not followees:
        return []
    rows = visible_notes().filter(
        author_id__in=followees if isinstance(followees, QuerySet) else list(followees), created_at=from_ms(score)
    )
    return list(rows.order_by("id").values_list("id", "author_id"))


# --- the note cache ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FeedAuthor:
    """A note's author as a page shows it: ``id`` (also ``pk``), ``username``, ``display_name``
    and ``shown_name``; an active account (``is_active``). Immutable, so one instance serves
    every page of a process that shows this author with these names."""

    id: int
    username: str
    display_name: str
    is_active: ClassVar[bool] = True

    @property
    def pk(self) -> int:
        """The account's id (as on a model)."""
        return self.id

    @property
    def shown_name(self) -> str:
        """The display name, or the username when there is none (``User.shown_name``)."""
        return self.display_name or self.username

    @classmethod
    def of(cls, user: User) -> FeedAuthor:
        """The ``FeedAuthor`` of ``user``."""
        return cls(user.pk, user.username, user.display_name)

    def as_user(self) -> User:
        """A ``User`` with these fields loaded, the others deferred (for code that takes a model,
        e.g. ``users.serializers``)."""
        known = {"id": self.id, "username": self.username, "display_name": self.display_name, "is_active": True}
        # from_db takes the values in the model's field order, whatever order the names are in.
        names = [field.attname for field in User._meta.concrete_fields if field.attname in known]
        return User.from_db(None, names, [known[name] for name in names])


@dataclass(slots=True, eq=False)
class FeedNote:
    """A note as the home timeline shows it: ``id`` (also ``pk``), ``author_id``, ``author``
    (a ``FeedAuthor``), ``body``, ``created_at`` and ``published_ms`` (its score).

    Not a model instance: a page builds twenty of them and the templates read each field
    several times, which through a model's descriptors cost more than reading the cache. It
    holds everything ``feed/_note.html`` and ``feed.api.note_json`` use, so rendering a page
    makes no query (there is nothing to load lazily).
    """

    id: int
    author_id: int
    author: FeedAuthor
    body: str
    created_at: datetime
    published_ms: int
    spoiler_text: str = ""  # the content warning (empty: none)

    @property
    def pk(self) -> int:
        """The note's id (as on a model)."""
        return self.id

    @classmethod
    def of(cls, note: Note) -> FeedNote:
        """The ``FeedNote`` of ``note`` (its author loaded)."""
        return cls(note.pk, note.author_id, FeedAuthor.of(note.author), note.body, note.created_at, note.published_ms, note.spoiler_text)


# Values are plain UTF-8, not JSON: parsing is most of what a cached page
# costs per note. A note is "<author id> <publish ms> <body>" (the body is the
# rest, spaces and all); an author "<username bytes> <username><display name>".
# A note with a content warning stores "\x1f<warning>\x1f<body>" as its body: a
# control character neither a body nor a warning may hold (``core.parsing.parse_text``).
WARNING_MARK = "\x1f"


def note_value(note: Note) -> bytes:
    """The note cache's value for ``note``: ``b"<author id> <publish ms> <body>"``."""
    text = f"{WARNING_MARK}{note.spoiler_text}{WARNING_MARK}{note.body}" if note.spoiler_text else note.body
    return b"%d %d %s" % (note.author_id, note.published_ms, text.encode())


def split_warning(text: str) -> tuple[str, str]:
    """``(content warning, body)`` of a cached note's body text (no warning: ``""``)."""
    if not text.startswith(WARNING_MARK):
        return "", text
    warning, _, body = text[1:].partition(WARNING_MARK)
    return warning, body


def parse_note_value(value: bytes) -> tuple[int, int, str]:
    """``(author_id, published_ms, body)`` of a ``note_value``.

    :raises ValueError: not a note value.
    """
    author_id, published_ms, body = value.split(b" ", 2)
    return int(author_id), int(published_ms), body.decode()


# Parsed values by their bytes, per process: a value's bytes are its content,
# so one parse (and one datetime, one FeedAuthor) serves every page that
# meets the same note or author, as the pages of its followers do. Bounded:
# emptied when full.
PARSED_MAX = 20_000
_parsed_notes: dict[bytes, tuple[int, datetime, str, int, str]] = {}
_parsed_authors: dict[tuple[int, bytes], FeedAuthor] = {}


def _parsed_note(value: bytes) -> tuple[int, datetime, str, int, str]:
    found = _parsed_notes.get(value)
    if found is None:
        if len(_parsed_notes) >= PARSED_MAX:
            _parsed_notes.clear()
        author_id, published_ms, text = parse_note_value(value)
        warning, body = split_warning(text)
        found = _parsed_notes[value] = (author_id, from_ms(published_ms), body, published_ms, warning)
    return found


def _parsed_author(user_id: int, value: bytes) -> FeedAuthor:
    found = _parsed_authors.get((user_id, value))
    if found is None:
        if len(_parsed_authors) >= PARSED_MAX:
            _parsed_authors.clear()
        found = _parsed_authors[(user_id, value)] = FeedAuthor(user_id, *parse_author_value(value))
    return found


def author_value(user: User | FeedAuthor) -> bytes:
    """The note cache's value for author ``user``: the username's length in bytes, a space, the
    username and the display name."""
    username = user.username.encode()
    return b"%d %s%s" % (len(username), username, user.display_name.encode())


def parse_author_value(value: bytes) -> tuple[str, str]:
    """``(username, display_name)`` of an ``author_value``.

    :raises ValueError: not an author value.
    """
    length, _, rest = value.partition(b" ")
    size = int(length)
    return rest[:size].decode(), rest[size:].decode()


def queue_cache_fill(pipe: Pipe, notes: Iterable[Note], *, replace: bool) -> int:
    """Queue writes of the cache entries of ``notes`` and their authors (loaded) on ``pipe``.

    Notes that are not visible and inactive authors are left out.

    :param replace: overwrite the notes' entries and tombstones (``SET``:
        the fan-out, which read the note on the primary after its commit and
        checks it again afterwards); False writes only where no entry and no
        tombstone is (``SET NX``: a reader's fill). Authors are always ``NX``.
    :returns: the number of commands queued.
    """
    queued = 0
    authors: dict[int, User] = {}
    for note in notes:
        if not note.is_visible:
            continue
        key = redis_keys.note_cache_key(note.pk)
        pipe.set(key, note_value(note), ex=redis_keys.NOTE_CACHE_TTL_SECONDS, nx=not replace)
        authors[note.author_id] = note.author
        queued += 1
    for author in authors.values():
        pipe.set(redis_keys.author_cache_key(author.pk), author_value(author), ex=redis_keys.AUTHOR_CACHE_TTL_SECONDS, nx=True)
        queued += 1
    return queued


def queue_cache_forget(pipe: Pipe, *, note_ids: Iterable[int] = (), author_ids: Iterable[int] = ()) -> int:
    """Queue the tombstones of notes ``note_ids`` and accounts ``author_ids`` on ``pipe`` (see the
    module docstring, "Note cache"); returns the number of commands queued."""
    keys = [redis_keys.note_cache_key(note_id) for note_id in note_ids]
    keys += [redis_keys.author_cache_key(user_id) for user_id in author_ids]
    for key in keys:
        pipe.set(key, redis_keys.CACHE_TOMBSTONE, ex=redis_keys.CACHE_TOMBSTONE_SECONDS)
    return len(keys)


def cache_forget(client: redis.Redis, *, note_ids: Iterable[int] = (), author_ids: Iterable[int] = ()) -> int:
    """Forget the cached notes ``note_ids`` and accounts ``author_ids`` (tombstones, one round trip).

    :returns: the number of entries forgotten.
    :raises: Redis errors (``REDIS_ERRORS``).
    """
    pipe = pipeline(client)
    count = queue_cache_forget(pipe, note_ids=note_ids, author_ids=author_ids)
    if count:
        pipe.execute()
    return count


def cache_forget_now(*, note_ids: Sequence[int]) -> bool:
    """Forget the cached notes ``note_ids`` right after a commit, best effort: nothing is tried
    while the breaker is open (a write never waits for a dead Redis), a Redis failure opens it
    (readers use the database meanwhile), and either way the note's ``feed.note`` job forgets
    again.

    :returns: True when the tombstones were written.
    """
    if not note_ids:
        return True
    node = breaker_node(redis_keys.note_cache_key(note_ids[0]))
    if not redis_available(node):
        return False
    try:
        cache_forget(get_redis(), note_ids=note_ids)
    except REDIS_ERRORS as exc:
        redis_failed(exc, node)
        return False
    return True


def lookup(client: redis.Redis, keys: Sequence[str], set_key: str, members: Sequence[int]) -> tuple[list[Any], list[bool]]:
    """The values of the string ``keys`` (None where missing) and whether each of ``members`` is in
    the set ``set_key``, in one round trip.

    On one server one raw ``MGET`` and one raw ``SMISMEMBER`` (see ``inbox_round``); on a
    cluster the keys live on many slots, so one ``GET`` each through the routed pipeline.

    :raises: Redis errors (``REDIS_ERRORS``).
    """
    if not keys and not members:
        return [], []
    if is_cluster(client):
        pipe = pipeline(client)
        for key in keys:
            pipe.get(key)
        if members:
            pipe.smismember(set_key, list(members))
        replies = pipe.execute()
        values = replies[: len(keys)]
    else:
        raw: Pipe = client.pipeline(transaction=False)
        if keys:
            raw.execute_command("MGET", *keys)
        if members:
            raw.execute_command("SMISMEMBER", set_key, *members)
        replies = raw.execute()
        values = list(replies[0]) if keys else []
    return values, [bool(member) for member in replies[-1]] if members else []


@dataclass
class Resolved:
    """The notes behind some ids for one reader: ``shown`` the ones the reader's feed shows
    (visible, by an author the reader follows, not the reader's own) with their authors,
    ``stale`` the ids whose note is gone or not visible (confirmed on the primary)."""

    shown: dict[int, FeedNote]
    stale: set[int]


# Note id -> author id, per process: a note's author never changes, so a
# round can ask for the authors' entries and the following check together
# with the notes' entries (one round trip instead of two) for every id this
# process has met. Bounded: emptied when full.
NOTE_AUTHORS_MAX = 200_000
_note_authors: dict[int, int] = {}


def forget_note_authors() -> None:
    """Empty this process's note -> author table (tests)."""
    _note_authors.clear()


def resolve_notes(
    client: redis.Redis, note_ids: Sequence[int], *, reader_id: int, following_key: str, muted: Collection[int] = ()
) -> Resolved:
    """Look up ``note_ids`` in the note cache, their authors too, and whether reader
    ``reader_id`` (whose following set is ``following_key``) follows those authors.

    One round trip when this process met every id before (the notes' and
    their authors' entries and one ``SMISMEMBER``), else two (the authors
    after the notes); on misses one query for the missing notes and one for
    the missing authors, on the primary, and a round trip filling the cache
    (``SET NX``).

    :raises: Redis errors (``REDIS_ERRORS``).
    """
    if not note_ids:
        return Resolved(shown={}, stale=set())
    known = _note_authors
    if len(known) > NOTE_AUTHORS_MAX:
        known.clear()
    guessed = [author_id for author_id in dict.fromkeys(map(known.get, note_ids)) if author_id is not None]
    values, flags = lookup(client, redis_keys.note_cache_keys(note_ids) + redis_keys.author_cache_keys(guessed), following_key, guessed)
    tombstone = redis_keys.CACHE_TOMBSTONE
    followed = {user_id for user_id, member in zip(guessed, flags) if member}
    followed.discard(reader_id)  # a reader's own notes are not in its feed
    followed.difference_update(muted)  # nor the notes of accounts it mutes
    authors: dict[int, FeedAuthor] = {}
    author_values: dict[int, Any] = {}  # the entries found missing or tombstoned
    parsed_authors = _parsed_authors
    for user_id, value in zip(guessed, values[len(note_ids) :]):
        if value is None or value == tombstone:
            author_values[user_id] = value
        else:
            authors[user_id] = parsed_authors.get((user_id, value)) or _parsed_author(user_id, value)
    shown: dict[int, FeedNote] = {}
    missing: list[int] = []
    tombstoned: set[int] = set()
    waiting: list[tuple[int, tuple[int, datetime, str, int, str]]] = []  # cached notes whose author is not known yet
    parsed_notes = _parsed_notes
    for note_id, value in zip(note_ids, values):
        if value is None or value == tombstone:
            missing.append(note_id)
            if value is not None:
                tombstoned.add(note_id)
            continue
        parsed = parsed_notes.get(value) or _parsed_note(value)
        author_id = known[note_id] = parsed[0]
        author = authors.get(author_id)
        if author is None:
            waiting.append((note_id, parsed))
        elif author_id in followed:
            shown[note_id] = FeedNote(note_id, author_id, author, parsed[2], parsed[1], parsed[3], parsed[4])
    stale: set[int] = set()
    if missing or waiting or author_values:
        _resolve_rest(client, following_key, reader_id, set(guessed), missing, tombstoned, waiting, authors, author_values, followed, shown, stale, muted)
    return Resolved(shown=shown, stale=stale)


def _resolve_rest(
    client: redis.Redis,
    following_key: str,
    reader_id: int,
    asked: set[int],
    missing: list[int],
    tombstoned: set[int],
    waiting: list[tuple[int, tuple[int, datetime, str, int, str]]],
    authors: dict[int, FeedAuthor],
    author_values: dict[int, Any],
    followed: set[int],
    shown: dict[int, FeedNote],
    stale: set[int],
    muted: Collection[int],
) -> None:
    # What the first round trip left open: notes not cached, authors not
    # guessed (``asked``: those whose membership is known) or not cached.
    # Fills ``shown`` and ``stale`` in place.
    loaded: dict[int, Note] = {}
    fill: list[Note] = []
    if missing:
        # The primary: a fill must not write a lagging replica's older state,
        # and removing an id (a write) needs the note confirmed gone there.
        with primary_reads():
            rows = load_notes(missing)
        for note_id in missing:
            row = rows.get(note_id)
            if row is None or not row.is_visible:
                stale.add(note_id)
                continue
            loaded[note_id] = row
            _note_authors[note_id] = row.author_id
            if row.author_id not in authors:
                authors[row.author_id] = FeedAuthor.of(row.author)
            if note_id not in tombstoned:
                fill.append(row)
    waiting_authors = {parsed[0] for _, parsed in waiting}
    entries = sorted(waiting_authors - authors.keys() - author_values.keys())
    members = sorted((waiting_authors | {row.author_id for row in loaded.values()}) - asked)
    if entries or members:
        values, flags = lookup(client, redis_keys.author_cache_keys(entries), following_key, members)
        followed.update(user_id for user_id, member in zip(members, flags) if member and user_id != reader_id and user_id not in muted)
        for user_id, value in zip(entries, values):
            if value is None or value == redis_keys.CACHE_TOMBSTONE:
                author_values[user_id] = value
            else:
                authors[user_id] = _parsed_author(user_id, value)
    fill_authors: list[User] = []
    unknown = [user_id for user_id in author_values if user_id not in authors]
    if unknown:
        with primary_reads():
            found = User.objects.only("id", "username", "display_name", "is_active").in_bulk(unknown)
        for user_id, user in found.items():
            if user.is_active:
                authors[user_id] = FeedAuthor.of(user)
                if author_values[user_id] is None:  # a miss, not a tombstone
                    fill_authors.append(user)
    for note_id, (author_id, created_at, body, published_ms, warning) in waiting:
        author = authors.get(author_id)
        if author is None:
            stale.add(note_id)  # the author is deactivated or gone: so is the note
        elif author_id in followed:
            shown[note_id] = FeedNote(note_id, author_id, author, body, created_at, published_ms, warning)
    for note_id, row in loaded.items():
        if row.author_id in followed:
            shown[note_id] = FeedNote(row.pk, row.author_id, authors[row.author_id], row.body, row.created_at, row.published_ms, row.spoiler_text)
    if fill or fill_authors:
        pipe = pipeline(client)
        queue_cache_fill(pipe, fill, replace=False)
        for user in fill_authors:
            pipe.set(redis_keys.author_cache_key(user.pk), author_value(user), ex=redis_keys.AUTHOR_CACHE_TTL_SECONDS, nx=True)
        pipe.execute()


# --- pages ------------------------------------------------------------------------


@dataclass
class Feed:
    """Where one reader's feed comes from.

    ``keys``: the inbox and the pulled outboxes (empty on the database
    path). ``client``: redis-py, or None. ``following_key``: the reader's
    following set in Redis (asked about each round's authors). ``first``:
    reads of the first round made already (``Prefetch``). ``followees``:
    author ids the database reads are limited to; None (the default) means
    the following set, or the follow rows (``database_followees``).
    ``checked`` and ``hidden``: the authors this feed asked the database
    about (``visible``) and those of them the reader may not see now.
    """

    reader_id: int
    keys: list[str]
    client: redis.Redis | None = None
    following_key: str = ""
    first: Prefetch | None = None
    followees: Collection[int] | None = None
    muted: Collection[int] = frozenset()
    checked: set[int] = field(default_factory=set)
    hidden: set[int] = field(default_factory=set)

    def skipped(self) -> Collection[int]:
        """The authors whose notes this feed skips: muted, or found hidden by ``visible``."""
        return self.muted if not self.hidden else self.hidden.union(self.muted)

    def check(self, author_ids: Collection[int]) -> set[int]:
        """Ask the database (``social.visibility.hidden_authors``) about the authors among
        ``author_ids`` this feed has not checked yet; returns every author found hidden so far.

        One query when some author is new (a page is one ``Feed``, so its authors cost one
        query however many rounds found them), none otherwise.
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
        """The authors of the database's part of the feed: ``followees``; on the Redis path the
        reader's following set (read here, once, only when the page goes past the horizon: a
        page from Redis reads no follow row, and a page within the inbox never the whole set);
        else the reader's active follow rows as a ``values("followee_id")`` queryset. Muted
        authors and those ``visible`` found hidden are left out.

        :raises: Redis errors (``REDIS_ERRORS``) on the Redis path.
        """
        if self.followees is None and self.client is not None and self.following_key:
            self.followees = {int(member) for member in self.client.smembers(self.following_key)} - set(self.muted)
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


@dataclass
class Page:
    """A page in feed order; ``has_more`` when another note follows the last one."""

    notes: list[FeedNote]
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


def first_window(limit: int) -> int:
    """Ids the first round of a page of ``limit`` notes reads per sorted set."""
    return max(limit + 1 + WINDOW_SLACK, MIN_WINDOW)


def read_page(feed: Feed, after: Position | None, limit: int) -> Page:
    """The ``limit`` notes of ``feed`` strictly after ``after`` (None: from the top).

    Reads Redis rounds until ``limit + 1`` notes are found or the sources
    are exhausted down to their horizon, then the database. A round is one
    window read (``redis_window``) and the note cache (``resolve_notes``:
    no query when every note and author is cached); at most one database
    page query follows. The page's notes pass ``Feed.visible`` (one query
    for the page's authors: the reader's follow rows in the database, which a
    block either way or a removal has ended even where Redis lags); the notes
    it drops are replaced from further down, as stale ids are, so the page is
    as full as the feed allows.
    """
    want = limit + 1
    shown: list[FeedNote] = []
    raw = after
    redis_notes = removed = 0
    if feed.client is not None and feed.keys:
        n = first_window(limit)
        while len(shown) < want:
            need = want - len(shown)
            window = redis_window(feed.client, feed.keys, raw, n, need=need, reads=feed.take_reads(raw, n))
            if not window.items:
                break
            items = window.items
            if skipped := feed.skipped():
                # Ids whose author this process knows to be muted (or found hidden) are skipped
                # before the note cache is asked, so such a note costs no second round.
                known = _note_authors
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
                resolved = resolve_notes(
                    feed.client, [c.note_id for c in chunk], reader_id=feed.reader_id, following_key=feed.following_key, muted=feed.skipped()
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
    """Ids of the notes ``feed`` shows at exactly ``score`` (ms), ascending.

    From the sorted sets when ``score`` is above their horizon (one round
    trip and the note cache), else from the database; either way through
    ``Feed.visible``, as a page is, so an offset counts what pages showed.
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
    resolved = resolve_notes(feed.client, ids, reader_id=feed.reader_id, following_key=feed.following_key, muted=feed.skipped())
    return [note.pk for note in feed.visible([resolved.shown[note_id] for note_id in ids if note_id in resolved.shown])]


def _visible_ids(feed: Feed, run: list[tuple[int, int]]) -> list[int]:
    # ``run``: (note id, author id) pairs; the ids of the ones ``Feed.visible`` would keep.
    hidden = feed.check({author_id for _, author_id in run})
    return [note_id for note_id, author_id in run if author_id not in hidden]


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

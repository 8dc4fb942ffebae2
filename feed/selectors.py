"""Every read of notes and feeds.

The home timeline comes from Redis while the reader's inbox is complete (``feed.page_reader``),
else from the database (breaker open, mirror not built, inbox missing or rebuilding: "catching
up"); both give the same notes in the same order. Its notes are ``feed.paging.FeedNote``s that
render with no query. Design: docs/architecture.md#notes-and-the-home-feed.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import redis
from django.db import connections, router
from django.db.models import Exists, OuterRef
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from core.cluster import Pipe, is_cluster, node_client, pipeline, refresh
from core.paging import Cursor
from core.redis import (
    REDIS_ERRORS,
    breaker_node,
    get_redis,
    mirror_ready,
    redis_available,
    redis_failed,
    redis_succeeded,
)
from social import redis_keys as social_keys
from social.models import Mute, live_mutes
from social.selectors import active_follows
from social.visibility import muted_ids_database, now_ms
from users.models import User

from . import redis_keys
from .models import DIRECT, FEED_VISIBILITIES, PRIVATE, PUBLIC, UNLISTED, List, ListMember, Note, from_ms, to_ms
from .page_reader import (
    Feed,
    Prefetch,
    first_window,
    inbox_round,
    key_read,
    position_from_scroll,
    read_page,
    scored,
    shared_window,
)
from .paging import FeedAuthor, FeedNote, Page, Position, scroll_state


@dataclass(frozen=True)
class InboxState:
    """What Redis knows about a reader's inbox: ``synced`` (complete) and ``rebuilding``."""

    synced: bool
    rebuilding: bool


@dataclass
class TimelinePage:
    """A timeline page, newest first: ``notes`` (``FeedNote``s, or ``Note``s with authors for an author's
    timeline); ``next_cursor`` (None at the end); ``catching_up`` (inbox being rebuilt, notes from
    the database); ``source`` (``"redis"`` or ``"database"``); ``kept`` (a list timeline read from
    Redis: whether from its kept timeline; False asks for its build, ``feed.services.list_timeline_keep``).
    """

    notes: Sequence[Note | FeedNote]
    next_cursor: Cursor | None
    catching_up: bool = False
    source: str = "redis"
    kept: bool | None = None

    @property
    def inbox_synced(self) -> bool | None:
        """Whether this home timeline read found the reader's inbox synced (None: Redis answered no read of it)."""
        if self.catching_up:
            return False
        return True if self.source == "redis" else None


@dataclass
class ScrollPage:
    """A page of the scroll contract: ``notes`` and the ``min_time``/``offset`` to send next."""

    notes: list[FeedNote]
    min_time: int | None
    offset: int
    has_more: bool
    catching_up: bool = False


# How long (seconds) one process trusts its copy of the pull set: every feed
# page needs it, and on a cluster one key read by every request would put
# all the traffic on one node. A newly pulled author's notes can thus reach
# a reader's page this much later.
PULL_AUTHORS_TTL_SECONDS = 5.0
_pull_authors_seen: dict[str, tuple[float, tuple[int, ...], bytes]] = {}


def _pull_state_cached(client: redis.Redis) -> tuple[tuple[int, ...], bytes]:
    key = redis_keys.pull_authors_key()
    now = time.monotonic()
    seen = _pull_authors_seen.get(key)
    if seen is not None and seen[0] > now:
        return seen[1], seen[2]
    # One slot ({pull_authors}): one round trip on a cluster too.
    pipe = node_client(client, key).pipeline(transaction=False) if is_cluster(client) else client.pipeline(transaction=False)
    pipe.smembers(key)
    pipe.get(redis_keys.pull_generation_key())
    members, generation = pipe.execute()
    authors = tuple(sorted(int(member) for member in members))
    _pull_authors_seen[key] = (now + PULL_AUTHORS_TTL_SECONDS, authors, generation or b"0")
    return authors, generation or b"0"


def pull_authors_cached(client: redis.Redis) -> tuple[int, ...]:
    """The pull set (author ids, ascending), read at most once per ``PULL_AUTHORS_TTL_SECONDS`` per process.

    :raises: Redis errors (REDIS_ERRORS) when it has to be read and cannot be.
    """
    return _pull_state_cached(client)[0]


def pull_generation_cached(client: redis.Redis) -> bytes:
    """The pull set's generation (``redis_keys.pull_generation_key``, ``b"0"`` before any), cached with it."""
    return _pull_state_cached(client)[1]


def forget_pull_authors() -> None:
    """Drop the cached pull set (after it changed here, and in tests)."""
    _pull_authors_seen.clear()


def _database_feed(user_id: int) -> Feed:
    return Feed(reader_id=user_id, keys=[], muted=frozenset(skipped_ids_database(user_id=user_id)))


def _redis_feed(client: redis.Redis, user_id: int, start: Start | None) -> tuple[Feed | None, bool]:
    """The Redis feed of ``user_id`` and whether it is catching up; None when Redis can't serve it
    (one round trip: ``feed.page_reader.inbox_round``).
    """
    inbox = redis_keys.inbox_key(user_id)
    if not mirror_ready(client, [inbox]):
        return None, False
    after, n, notes = (start.after, start.n, start.notes) if start is not None else (None, 0, 0)
    found = inbox_round(client, reader_id=user_id, pull=pull_authors_cached(client), after=after, n=n, notes=notes)
    if not found.synced or found.rebuilding:
        return None, True
    keys = [inbox] + [redis_keys.outbox_key(author) for author in found.pulled]
    first = Prefetch(after=after, n=n, reads={inbox: found.read}) if found.read is not None else None
    feed = Feed(
        reader_id=user_id,
        keys=keys,
        client=client,
        following_key=social_keys.following_set_key(user_id),
        first=first,
        muted=found.muted,
        notes=found.notes,
    )
    return feed, False


@dataclass(slots=True)
class Start:
    """Where a page starts (``after``), how many ids its first round reads per key (``n``) and
    how many of the inbox's it looks up in the note cache with them (``notes``)."""

    after: Position | None
    n: int
    notes: int = 0

    @classmethod
    def page(cls, after: Position | None, limit: int) -> Start:
        """The start of a page of ``limit`` notes after ``after``: ``first_window(limit)`` ids per
        key, and the note cache of the ``limit + 1`` the page may show."""
        return cls(after, first_window(limit), limit + 1)


def _with_feed(user_id: int, read: Any, *, database_only: bool = False, start: Start | None = None) -> tuple[Any, bool, str]:
    """Run ``read(feed)`` on the Redis feed, or on the database feed when Redis can't serve it
    (or ``database_only``). ``start``: the page's first window, read with the inbox's markers."""
    catching_up = False
    # On a cluster, the breaker of the master holding the reader's inbox.
    node = breaker_node(redis_keys.inbox_key(user_id))
    client: redis.Redis | None = None
    if not database_only and redis_available(node):
        try:
            client = get_redis()
            feed, catching_up = _redis_feed(client, user_id, start)
            if feed is not None:
                answer = read(feed)
                redis_succeeded(node)
                return answer, False, "redis"
        except REDIS_ERRORS as exc:
            refresh(client)
            redis_failed(exc, node)
    return read(_database_feed(user_id)), catching_up, "database"


def home_timeline(*, user_id: int, cursor: Cursor | None, limit: int, database_only: bool = False) -> TimelinePage:
    """The home timeline of ``user_id``: notes of the accounts it follows, newest first.

    :param cursor: opaque position from a previous page's ``next_cursor``
        (None or "" for the first page).
    :param limit: notes per page (1..100).
    :param database_only: read the database's feed even when Redis could
        serve it (the truth reconcile and the tests compare Redis with).
    """
    after = Position(cursor.score, cursor.member) if cursor is not None else None
    page, catching_up, source = _with_feed(
        user_id,
        lambda feed: read_page(feed, after, limit),
        database_only=database_only,
        start=Start.page(after, limit),
    )
    last = page.last
    next_cursor = Cursor(score=last.score, member=last.note_id) if page.has_more and last is not None else None
    return TimelinePage(notes=page.notes, next_cursor=next_cursor, catching_up=catching_up, source=source)


def home_timeline_scroll(*, user_id: int, last_id: int | None, offset: int, limit: int) -> ScrollPage:
    """The home timeline in the scroll contract (``lastId`` = a publish time in ms): first ``lastId``
    absent (or now) and ``offset`` 0, then the previous answer's ``minTime`` and ``offset``.
    """

    def read(feed: Feed) -> tuple[Page, int]:
        if last_id is None:
            return read_page(feed, None, limit), 0
        position, seen = position_from_scroll(feed, last_id, offset)
        return read_page(feed, position, limit), seen

    start: Start | None = None  # with an offset the position comes from the run at lastId, read first
    if last_id is None:
        start = Start.page(None, limit)
    elif offset == 0:
        start = Start.page(Position(last_id, 0), limit)
    (page, seen), catching_up, _ = _with_feed(user_id, read, start=start)
    min_time, next_offset = scroll_state(page, last_id, seen)
    return ScrollPage(notes=page.notes, min_time=min_time, offset=next_offset, has_more=page.has_more, catching_up=catching_up)


def shown_visibilities(*, viewer_id: int | None, author_id: int, viewer_follows: bool | None = None) -> tuple[str, ...]:
    """The visibilities of ``author_id``'s notes that ``viewer_id`` (None: signed out) may see:
    all to the author, followers-only ones to its followers, public and unlisted to anyone.
    ``viewer_follows``: whether the viewer follows the author, when the caller read it from the
    database in this request (``visibility.access``); None reads it here."""
    if viewer_id == author_id:
        return (PUBLIC, UNLISTED, PRIVATE, DIRECT)
    if viewer_follows is None and viewer_id is not None:
        # The database, not the mirror: a removed follower loses them on its very next request.
        viewer_follows = active_follows().filter(follower_id=viewer_id, followee_id=author_id).exists()
    if viewer_follows:
        return (PUBLIC, UNLISTED, PRIVATE)
    return (PUBLIC, UNLISTED)


def user_timeline(
    *, author: User, cursor: Cursor | None, limit: int, viewer_id: int | None = None, viewer_follows: bool | None = None
) -> TimelinePage:
    """``author``'s own visible notes that ``viewer_id`` may see (None: signed out), newest first,
    as ``FeedNote``s with their visibility (one query on the ``(author, created_at, id)`` index, no
    join: ``author`` is the active account the caller loaded); ``viewer_follows`` as ``shown_visibilities``.
    """
    visibilities = shown_visibilities(viewer_id=viewer_id, author_id=author.pk, viewer_follows=viewer_follows)
    sql, params = timeline_rows_query(author_id=author.pk, visibilities=visibilities, cursor=cursor, count=limit + 1)
    with connections[router.db_for_read(Note)].cursor() as rows:
        rows.execute(sql, params)
        found = rows.fetchall()
    return timeline_page_of(author, found, limit)


def timeline_rows_query(
    *,
    author_id: int,
    visibilities: Sequence[str],
    cursor: Cursor | None,
    count: int,
    since_ms: int | None = None,
    around: tuple[str, str] = ("", ""),
) -> tuple[str, list[Any]]:
    """The query, and its parameters, of up to ``count`` visible notes of ``author_id`` in
    ``visibilities``, strictly after ``cursor`` in feed order (None: from the newest) and published
    at ``since_ms`` (unix ms) or later (None: however old), on the database notes are read from:
    rows ``(id, created_at, body, spoiler_text, visibility)``, for ``timeline_page_of``. Raw SQL:
    the ORM builds and compiles a queryset on every call, which costs more than this query; a
    caller may run it inside a query of its own, with the constant columns ``around`` (SQL, e.g.
    ``("2, ", ", 0")``) before and after those five."""
    alias = router.db_for_read(Note)
    adapt = connections[alias].ops.adapt_datetimefield_value
    params: list[Any] = [author_id, False, *visibilities]
    if cursor is not None:
        at = adapt(from_ms(cursor.score))
        params += [at, at, at, cursor.member]
    if since_ms is not None:
        params.append(adapt(from_ms(since_ms)))
    params.append(count)
    return _timeline_sql(alias, len(visibilities), cursor is not None, since_ms is not None, around), params


def timeline_page_of(author: User, rows: Sequence[tuple[int, datetime | str, str, str, str]], limit: int) -> TimelinePage:
    """The page of ``limit`` notes of ``author`` from the rows of a ``timeline_rows_query`` (up to
    ``limit + 1``, in any order: one more than ``limit`` says that older ones follow).

    :raises ValueError: a row's ``created_at`` is not a time.
    """
    # As the ORM's converter: the database's datetimes are naive, in the connection's time zone
    # (SQLite's raw cursor gives a union's times as text).
    zone = connections[router.db_for_read(Note)].timezone
    shown_author = FeedAuthor.of(author)
    notes = []
    for pk, created_at, body, spoiler, shown in rows:
        moment = created_at if isinstance(created_at, datetime) else parse_datetime(created_at)
        if moment is None:
            raise ValueError(f"not a time: {created_at!r}")
        if timezone.is_naive(moment):
            moment = timezone.make_aware(moment, zone)
        notes.append(FeedNote(pk, author.pk, shown_author, body, moment, to_ms(moment), spoiler, shown))
    # A caller's query may give the rows in another order than this feed's.
    notes.sort(key=lambda note: (-note.published_ms, note.pk))
    page = notes[:limit]
    next_cursor = Cursor(score=page[-1].published_ms, member=page[-1].pk) if len(notes) > limit else None
    return TimelinePage(notes=page, next_cursor=next_cursor, source="database")


@functools.cache
def _timeline_sql(alias: str, visibilities: int, after: bool, since: bool = False, around: tuple[str, str] = ("", "")) -> str:
    """The query of ``timeline_rows_query`` for the database ``alias``, ``visibilities`` placeholders of
    visibility, the bounds of ``after_filter`` when ``after``, a lower bound of the time when ``since``,
    and the columns ``around`` the row's."""
    quote = connections[alias].ops.quote_name
    column = {field.attname: quote(str(field.column)) for field in Note._meta.concrete_fields}
    where = [
        f"{column['author_id']} = %s",
        f"{column['is_hidden']} = %s",
        f"{column['deleted_at']} IS NULL",
        f"{column['visibility']} IN ({', '.join(['%s'] * visibilities)})",
    ]
    if after:
        # after_filter's bounds: the range on created_at lets MariaDB use the index.
        created, pk = column["created_at"], column["id"]
        where.append(f"{created} <= %s AND ({created} < %s OR ({created} = %s AND {pk} > %s))")
    if since:
        where.append(f"{column['created_at']} >= %s")
    shown = ", ".join(column[name] for name in ("id", "created_at", "body", "spoiler_text", "visibility"))
    return (
        f"SELECT {around[0]}{shown}{around[1]} FROM {quote(Note._meta.db_table)} WHERE {' AND '.join(where)}"
        f" ORDER BY {column['created_at']} DESC, {column['id']} ASC LIMIT %s"
    )


def shown_note_count(*, author_id: int) -> int:
    """The notes of ``author_id`` others may be shown, counted: the truth ``AuthorNoteCount`` keeps."""
    return Note.objects.filter(
        author_id=author_id, is_hidden=False, deleted_at__isnull=True, visibility__in=FEED_VISIBILITIES
    ).count()


def note_detail(*, note_id: int, viewer_id: int | None = None) -> Note | None:
    """The note ``note_id`` with its author if ``viewer_id`` (None: signed out) may see it, or None
    (missing, hidden, deleted, author inactive, or a visibility that leaves the viewer out)."""
    note = (
        Note.objects.filter(is_hidden=False, deleted_at__isnull=True, author__is_active=True)
        .select_related("author")
        .filter(pk=note_id)
        .first()
    )
    if note is None or note.visibility not in shown_visibilities(viewer_id=viewer_id, author_id=note.author_id):
        return None
    return note


def inbox_state(*, user_id: int) -> InboxState:
    """Whether ``user_id``'s inbox is synced and whether a rebuild is queued or running.

    :raises: Redis errors (REDIS_ERRORS) propagate.
    """
    pipe = pipeline(get_redis())
    pipe.exists(redis_keys.inbox_synced_key(user_id))
    pipe.exists(redis_keys.inbox_rebuilding_key(user_id))
    synced, rebuilding = pipe.execute()
    return InboxState(synced=bool(synced), rebuilding=bool(rebuilding))


# --- lists ----------------------------------------------------------------------------


def lists_of(*, owner_id: int) -> list[List]:
    """``owner_id``'s lists, oldest first (Mastodon's order)."""
    return list(List.objects.filter(owner_id=owner_id).order_by("id"))


def list_of(*, owner_id: int, list_id: int) -> List | None:
    """List ``list_id`` if ``owner_id`` owns it, else None (another reader's list is not found)."""
    return List.objects.filter(owner_id=owner_id, pk=list_id).first()


def lists_marked_holding(*, owner_id: int, account_id: int) -> list[tuple[List, bool]]:
    """``owner_id``'s lists, oldest first, each with whether it holds ``account_id`` (one query)."""
    rows = List.objects.filter(owner_id=owner_id).annotate(
        holds=Exists(ListMember.objects.filter(list_id=OuterRef("pk"), account_id=account_id))
    )
    return [(row, bool(row.holds)) for row in rows.order_by("id")]


def lists_holding(*, owner_id: int, account_id: int) -> list[List]:
    """``owner_id``'s lists that hold ``account_id``, oldest first."""
    return list(List.objects.filter(owner_id=owner_id, members__account_id=account_id).order_by("id"))


def shown_members() -> Any:
    """``ListMember`` rows whose account a list timeline shows: active, followed by the list's owner."""
    follows = active_follows().filter(follower_id=OuterRef("list__owner_id"), followee_id=OuterRef("account_id"))
    return ListMember.objects.filter(account__is_active=True).filter(Exists(follows))


def list_member_ids_database(*, list_id: int) -> set[int]:
    """The account ids list ``list_id``'s timeline shows, from the database (``shown_members``)."""
    return set(shown_members().filter(list_id=list_id).values_list("account_id", flat=True))


def skipped_ids_database(*, user_id: int) -> set[int]:
    """The accounts whose notes ``user_id``'s home feed skips, from the database, in one query: those
    it mutes now and the members of its exclusive lists."""
    muted = Mute.objects.filter(live_mutes(), muter_id=user_id).values_list("muted_id", flat=True)
    excluded = ListMember.objects.filter(list__owner_id=user_id, list__exclusive=True).values_list("account_id", flat=True)
    return set(muted.union(excluded))


@dataclass
class MemberPage:
    """A page of a list's members, highest account id first; ``next_cursor``/``prev_cursor`` are the
    account ids to page older (``max_id``) and newer (``min_id``) from, None at an end."""

    entries: list[User]
    next_cursor: int | None
    prev_cursor: int | None


def list_members_page(
    *, list_id: int, max_id: int | None, min_id: int | None, limit: int | None, since_id: int | None = None
) -> MemberPage:
    """Active members of list ``list_id`` as Mastodon pages them (by account id, newest first):
    below ``max_id``; the ``limit`` just above ``min_id``, or the newest ``limit`` above ``since_id``.

    :param limit: accounts per page; None: all of them (no cursors).
    """
    members = User.objects.filter(is_active=True, list_memberships__list_id=list_id)
    rows = members
    if max_id is not None:
        rows = rows.filter(pk__lt=max_id)
    if since_id is not None:
        rows = rows.filter(pk__gt=since_id)
    if min_id is not None:
        rows = rows.filter(pk__gt=min_id)
    if limit is None:
        return MemberPage(entries=list(rows.order_by("-pk")), next_cursor=None, prev_cursor=None)
    if min_id is not None:
        # The ``limit`` just above ``min_id``: read upwards, shown newest first.
        found = list(rows.order_by("pk")[: limit + 1])
        users = list(reversed(found[:limit]))
        more_above = len(found) > limit
        # Older members than this page's last (``min_id``'s own, if still a member): a next page.
        older = bool(users) and members.filter(pk__lt=users[-1].pk).exists()
        return MemberPage(
            entries=users,
            next_cursor=users[-1].pk if older else None,
            prev_cursor=users[0].pk if users and more_above else None,
        )
    found = list(rows.order_by("-pk")[: limit + 1])
    users = found[:limit]
    return MemberPage(
        entries=users,
        next_cursor=users[-1].pk if len(found) > limit else None,
        prev_cursor=users[0].pk if users and max_id is not None else None,
    )


def _list_database_feed(reader_id: int, list_id: int) -> Feed:
    muted = frozenset(muted_ids_database(user_id=reader_id))
    return Feed(reader_id=reader_id, keys=[], muted=muted, followees=list_member_ids_database(list_id=list_id) - muted)


@dataclass(slots=True)
class ListFeed:
    """A list's Redis feed and whether it reads the list's kept timeline (else every member's outbox)."""

    feed: Feed
    kept: bool


def _list_redis_feed(client: redis.Redis, reader_id: int, list_id: int, after: Position | None, limit: int) -> ListFeed | None:
    """The Redis feed of list ``list_id``: its kept timeline and the outboxes of its pulled members
    while the timeline is kept under the current pull set (one round trip to the reader's slot,
    the kept timeline's first window read with the markers), else every member's outbox (a
    second one, for the members); None when its membership is not mirrored."""
    index = redis_keys.list_index_key(reader_id)
    if not mirror_ready(client, [index]):
        return None
    inbox = redis_keys.list_inbox_key(reader_id, list_id)
    members_key = redis_keys.list_members_key(reader_id, list_id)
    pull = pull_authors_cached(client)
    n = first_window(limit)
    pipe: Pipe = (node_client(client, index) if is_cluster(client) else client).pipeline(transaction=False)
    pipe.execute_command("SISMEMBER", index, str(list_id))
    pipe.execute_command("ZRANGEBYSCORE", social_keys.mutes_key(reader_id), f"({now_ms()}", "+inf")
    pipe.execute_command("GET", redis_keys.list_synced_key(reader_id, list_id))
    if after is None:
        pipe.execute_command("ZREVRANGE", inbox, 0, n - 1, "WITHSCORES")
    else:
        pipe.execute_command("ZREVRANGEBYSCORE", inbox, after.score, "-inf", "WITHSCORES", "LIMIT", 0, n)
    if pull:
        # Which pulled authors are members: their notes reach no kept timeline.
        pipe.execute_command("SMISMEMBER", members_key, *pull)
    built, muted_reply, synced, first, *pulled_reply = pipe.execute()
    if not built:
        return None
    muted = frozenset(int(member) for member in muted_reply)
    following_key = social_keys.following_set_key(reader_id)
    if synced is not None and synced == pull_generation_cached(client):
        pulled = [author for author, member in zip(pull, pulled_reply[0]) if member and author not in muted] if pull else []
        keys = [inbox] + [redis_keys.outbox_key(author) for author in pulled]
        prefetch = Prefetch(after=after, n=n, reads={inbox: key_read(scored(first), after, n)})
        feed = Feed(
            reader_id=reader_id,
            keys=keys,
            client=client,
            following_key=following_key,
            followees_key=members_key,
            first=prefetch,
            muted=muted,
        )
        return ListFeed(feed=feed, kept=True)
    shown = sorted({int(member) for member in client.smembers(members_key)} - muted)
    feed = Feed(
        reader_id=reader_id,
        keys=[redis_keys.outbox_key(member) for member in shown],
        client=client,
        following_key=following_key,
        followees=shown,
        muted=muted,
        window=shared_window(limit, len(shown)),
    )
    return ListFeed(feed=feed, kept=False)


def list_timeline(
    *, reader_id: int, list_id: int, cursor: Cursor | None, limit: int, database_only: bool = False
) -> TimelinePage:
    """The timeline of list ``list_id`` (owned by ``reader_id``: the caller checked): its members'
    notes, newest first, in the home timeline's order and cursor contract, with its mutes, blocks
    and privacy; from the members' outboxes in Redis, past their horizon (or Redis down) the database.

    :param cursor: a previous page's ``next_cursor`` (None: the first page).
    :param limit: notes per page (1..100).
    """
    after = Position(cursor.score, cursor.member) if cursor is not None else None
    node = breaker_node(redis_keys.list_index_key(reader_id))
    page: Page | None = None
    source = "database"
    kept: bool | None = None
    if not database_only and redis_available(node):
        client: redis.Redis | None = None
        try:
            client = get_redis()
            found = _list_redis_feed(client, reader_id, list_id, after, limit)
            if found is not None:
                page = read_page(found.feed, after, limit)
                source = "redis"
                kept = found.kept
            redis_succeeded(node)
        except REDIS_ERRORS as exc:
            refresh(client)
            redis_failed(exc, node)
    if page is None:
        page = read_page(_list_database_feed(reader_id, list_id), after, limit)
    last = page.last
    next_cursor = Cursor(score=last.score, member=last.note_id) if page.has_more and last is not None else None
    return TimelinePage(notes=page.notes, next_cursor=next_cursor, source=source, kept=kept)

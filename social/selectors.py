"""Every read of the follow graph: from Redis, or from the database when Redis can't answer.

Each selector's two paths give the same answer (``core.redis.redis_or_database``); only edges
whose two accounts are active count.
"""

from __future__ import annotations

import secrets
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any, Generic, TypeVar

import redis
from django.core.cache import cache
from django.db.models import Count, Q, QuerySet

from core.cluster import is_cluster, lua, pipeline
from core.paging import (
    PAGE_LUA,
    Cursor,
    Item,
    db_page,
    db_page_above,
    decode_page,
    page_arguments,
    queue_redis_page,
    redis_page,
    redis_page_above,
)
from core.parsing import id_or_none
from core.redis import REDIS_ERRORS, intersect_sets, redis_or_database
from users.account_cache import accounts_from_values
from users.models import User
from users.redis_keys import account_key_parts
from users.selectors import users_by_id
from users.serializers import ShownAccount

from . import layout, redis_keys
from .models import Block, Follow, FollowImport, FollowRequest, Mute, live_mutes
from .visibility import hidden_and_muted_ids, hidden_ids, now_ms


def followers_layouts(client: redis.Redis, user_ids: Iterable[int]) -> dict[int, bytes]:
    """The followers layout of each user as its marker says (``layout.LAYOUT_*``).

    :returns: ``{user_id: layout}`` read in one round trip.
    :raises: ``REDIS_ERRORS``.
    """
    ids = list(dict.fromkeys(int(u) for u in user_ids))
    if not ids:
        return {}
    pipe = pipeline(client)
    for user_id in ids:
        pipe.get(redis_keys.followers_layout_key(user_id))
    return {user_id: layout.marker_layout(value) for user_id, value in zip(ids, pipe.execute())}


# The followers layout last seen per account (only those not single): the
# first guess of a followers page and of a mirror write, whose own
# pipeline reads the marker; a wrong guess costs one more round trip.
# Bounded: cleared when full.
_layout_seen: dict[int, bytes] = {}
LAYOUT_SEEN_MAX = 10_000


def layout_seen(user_id: int) -> bytes:
    """The followers layout this process last saw for ``user_id`` (single when never seen)."""
    return _layout_seen.get(user_id, layout.LAYOUT_SINGLE)


def layout_remember(user_id: int, seen: bytes) -> None:
    """Remember that ``user_id``'s marker said ``seen`` (see ``layout_seen``)."""
    if seen == layout.LAYOUT_SINGLE:
        _layout_seen.pop(user_id, None)
        return
    if len(_layout_seen) >= LAYOUT_SEEN_MAX:
        _layout_seen.clear()
    _layout_seen[user_id] = seen


def active_follows() -> QuerySet[Follow]:
    """Follow rows whose two accounts are active."""
    return Follow.objects.filter(follower__is_active=True, followee__is_active=True)


# --- relationship ---------------------------------------------------------


def is_following(*, follower_id: int, followee_id: int) -> bool:
    """Whether ``follower_id`` follows ``followee_id`` (SISMEMBER on the follower's set)."""
    return redis_or_database(
        lambda client: bool(client.sismember(redis_keys.following_set_key(follower_id), str(followee_id))),
        lambda: active_follows().filter(follower_id=follower_id, followee_id=followee_id).exists(),
        keys=[redis_keys.following_set_key(follower_id)],
    )


def follow_requested(*, requester_id: int, target_id: int) -> bool:
    """Whether ``requester_id`` has a pending follow request to ``target_id`` (database)."""
    return FollowRequest.objects.filter(requester_id=requester_id, target_id=target_id).exists()


@dataclass(frozen=True)
class RequestEntry:
    """One pending follow request: who asked (``user``), when, and its cursor position."""

    user: User
    requested_at: datetime
    request_id: int


@dataclass(frozen=True)
class RequestPage:
    """A page of follow requests newest first; ``next_cursor`` continues after the last (None: the end)."""

    entries: list[RequestEntry]
    next_cursor: Cursor | None
    prev_cursor: Cursor | None = None  # the first entry's position, for the page above (None: empty)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

Row = TypeVar("Row", FollowRequest, Block, Mute)
Entry = TypeVar("Entry")
# A follow list row's account: a ``User``, or as the account cache shows it (a page that prints names only).
Account = TypeVar("Account", User, ShownAccount)


def _newest_first(
    rows: QuerySet[Row], cursor: Cursor | None, limit: int, *, unit: timedelta, above: Cursor | None = None
) -> tuple[list[Row], Cursor | None, Cursor | None]:
    """A page of ``rows`` newest first, keyset-paged on ``(created_at, id)`` after ``cursor``, or the
    ``limit`` rows just above ``above`` (Mastodon's ``min_id``); scores in integer ``unit``s.

    :returns: the page's rows, the cursor after its last (None: the end) and its first's position.
    """

    def position(row: Row) -> Cursor:
        return Cursor(score=(row.created_at - EPOCH) // unit, member=row.pk)

    if above is not None:
        at = EPOCH + above.score * unit
        newer = rows.filter(Q(created_at__gt=at) | Q(created_at=at, pk__gt=above.member)).order_by("created_at", "pk")
        page = list(newer[:limit])[::-1]
        # Older rows follow a page above a position: at least the row the position names.
        return page, position(page[-1]) if page else None, position(page[0]) if page else None
    if cursor is not None:
        at = EPOCH + cursor.score * unit
        rows = rows.filter(Q(created_at__lt=at) | Q(created_at=at, pk__lt=cursor.member))
    found = list(rows.order_by("-created_at", "-pk")[: limit + 1])
    page = found[:limit]
    more = len(found) > limit and bool(page)
    return page, position(page[-1]) if more else None, position(page[0]) if page else None


def follow_requests_page(*, target_id: int, cursor: Cursor | None, limit: int, above: Cursor | None = None) -> RequestPage:
    """The pending requests to ``target_id`` from active accounts, newest first (cursor scores in
    ms), after ``cursor`` or just above ``above``."""
    rows = FollowRequest.objects.filter(target_id=target_id, requester__is_active=True).select_related("requester")
    page, next_cursor, prev_cursor = _newest_first(rows, cursor, limit, unit=timedelta(milliseconds=1), above=above)
    entries = [RequestEntry(user=row.requester, requested_at=row.created_at, request_id=row.pk) for row in page]
    return RequestPage(entries=entries, next_cursor=next_cursor, prev_cursor=prev_cursor)


def follow_requests_count(*, target_id: int) -> int:
    """How many follow requests to ``target_id`` are pending."""
    return FollowRequest.objects.filter(target_id=target_id, requester__is_active=True).count()


@dataclass(frozen=True)
class ControlPage(Generic[Entry]):
    """A page of blocked or muted accounts newest first: ``entries``, ``total``, ``next_cursor`` (None: the end)."""

    entries: list[Entry]
    total: int
    next_cursor: Cursor | None
    prev_cursor: Cursor | None = None  # the first entry's position, for the page above (None: empty)


def blocked_by(*, user_id: int, cursor: Cursor | None = None, limit: int = 50, above: Cursor | None = None) -> ControlPage[User]:
    """The accounts ``user_id`` blocks, newest first (cursor scores in microseconds), after
    ``cursor`` or just above ``above``."""
    rows = Block.objects.filter(blocker_id=user_id)
    page, next_cursor, prev_cursor = _newest_first(
        rows.select_related("blocked"), cursor, limit, unit=timedelta(microseconds=1), above=above
    )
    return ControlPage(
        entries=[block.blocked for block in page], total=rows.count(), next_cursor=next_cursor, prev_cursor=prev_cursor
    )


@dataclass(frozen=True)
class MuteEntry:
    """An account muted, and until when (None: until unmuted)."""

    user: User
    expires_at: datetime | None


def muted_by(
    *, user_id: int, cursor: Cursor | None = None, limit: int = 50, above: Cursor | None = None
) -> ControlPage[MuteEntry]:
    """The accounts ``user_id`` mutes now, newest first (cursor scores in microseconds), after
    ``cursor`` or just above ``above``."""
    rows = Mute.objects.filter(live_mutes(), muter_id=user_id)
    page, next_cursor, prev_cursor = _newest_first(
        rows.select_related("muted"), cursor, limit, unit=timedelta(microseconds=1), above=above
    )
    entries = [MuteEntry(user=row.muted, expires_at=row.expires_at) for row in page]
    return ControlPage(entries=entries, total=rows.count(), next_cursor=next_cursor, prev_cursor=prev_cursor)


@dataclass(frozen=True)
class Relationship:
    """How ``viewer`` and ``user`` relate: ``is_following`` (viewer → user),
    ``follows_you`` (user → viewer), ``is_mutual`` (both)."""

    is_following: bool
    follows_you: bool

    @property
    def is_mutual(self) -> bool:
        return self.is_following and self.follows_you


def relationship(*, viewer_id: int, user_id: int) -> Relationship:
    """Both directions between ``viewer_id`` and ``user_id`` in one round trip."""

    def from_redis(client: redis.Redis) -> Relationship:
        pipe = pipeline(client)
        pipe.sismember(redis_keys.following_set_key(viewer_id), str(user_id))
        pipe.sismember(redis_keys.following_set_key(user_id), str(viewer_id))
        forward, backward = pipe.execute()
        return Relationship(is_following=bool(forward), follows_you=bool(backward))

    def from_database() -> Relationship:
        pairs = set(
            active_follows()
            .filter(follower_id__in=[viewer_id, user_id], followee_id__in=[viewer_id, user_id])
            .values_list("follower_id", "followee_id")
        )
        return Relationship(is_following=(viewer_id, user_id) in pairs, follows_you=(user_id, viewer_id) in pairs)

    return redis_or_database(
        from_redis, from_database, keys=[redis_keys.following_set_key(viewer_id), redis_keys.following_set_key(user_id)]
    )


# --- counts ---------------------------------------------------------------


@dataclass(frozen=True)
class Counts:
    """Follower and following counts of one account (never negative)."""

    followers: int
    following: int


def follow_counts(*, user_id: int) -> Counts:
    """Followers and following of ``user_id``: SCARD, one round trip (a sharded account: a second, summing its shards)."""

    def from_redis(client: redis.Redis) -> Counts:
        pipe = pipeline(client)
        pipe.get(redis_keys.followers_layout_key(user_id))
        pipe.scard(redis_keys.followers_set_key(user_id))
        pipe.scard(redis_keys.following_set_key(user_id))
        marker, followers, following = pipe.execute()
        live = layout.marker_layout(marker)
        if layout.reads_shards(live):
            pipe = pipeline(client)
            for set_key, _ in layout.read_keys(user_id, live):
                pipe.scard(set_key)
            followers = sum(int(n) for n in pipe.execute())
        return Counts(followers=int(followers), following=int(following))

    def from_database() -> Counts:
        return Counts(
            followers=active_follows().filter(followee_id=user_id).count(),
            following=active_follows().filter(follower_id=user_id).count(),
        )

    return redis_or_database(from_redis, from_database, keys=[redis_keys.followers_set_key(user_id)])


# KEYS: (layout marker, followers set, following set) per account; replies the same three per
# account: the marker (nil when none) and the two set sizes.
COUNTS_LUA = """
local replies = {}
for index = 1, #KEYS, 3 do
    replies[index] = redis.call('GET', KEYS[index]) or false
    replies[index + 1] = redis.call('SCARD', KEYS[index + 1])
    replies[index + 2] = redis.call('SCARD', KEYS[index + 2])
end
return replies
"""


def follow_counts_many(*, user_ids: Sequence[int]) -> dict[int, Counts]:
    """``follow_counts`` of several accounts: one round trip (sharded accounts one more each), or two grouped queries."""
    ids = list(dict.fromkeys(int(user_id) for user_id in user_ids))
    if not ids:
        return {}

    def from_redis(client: redis.Redis) -> dict[int, Counts]:
        keys = [
            key
            for user_id in ids
            for key in (
                redis_keys.followers_layout_key(user_id),
                redis_keys.followers_set_key(user_id),
                redis_keys.following_set_key(user_id),
            )
        ]
        if is_cluster(client):
            pipe = pipeline(client)  # the accounts' keys are in different slots
            for index in range(0, len(keys), 3):
                pipe.get(keys[index])
                pipe.scard(keys[index + 1])
                pipe.scard(keys[index + 2])
            replies = pipe.execute()
        else:
            # One command for a page of accounts: three commands each cost more to send and parse.
            replies = lua(COUNTS_LUA)(keys=keys, client=client)
        found = {}
        for index, user_id in enumerate(ids):
            marker, followers, following = replies[3 * index : 3 * index + 3]
            if layout.reads_shards(layout.marker_layout(marker)):
                found[user_id] = follow_counts(user_id=user_id)
            else:
                found[user_id] = Counts(followers=int(followers), following=int(following))
        return found

    def from_database() -> dict[int, Counts]:
        followers = dict(active_follows().filter(followee_id__in=ids).values_list("followee_id").annotate(n=Count("id")))
        following = dict(active_follows().filter(follower_id__in=ids).values_list("follower_id").annotate(n=Count("id")))
        return {user_id: Counts(followers=followers.get(user_id, 0), following=following.get(user_id, 0)) for user_id in ids}

    return redis_or_database(from_redis, from_database, keys=[redis_keys.followers_set_key(ids[0])])


# --- lists ----------------------------------------------------------------


@dataclass(frozen=True)
class FollowEntry(Generic[Account]):
    """One row of a followers/following list: the account and when the follow began (unix seconds)."""

    user: Account
    followed_at_seconds: float

    @cached_property
    def followed_at(self) -> datetime:
        """When the follow began, aware (UTC); made when asked: the JSON list answers the seconds."""
        return datetime.fromtimestamp(self.followed_at_seconds, tz=UTC)


@dataclass(frozen=True)
class FollowPage(Generic[Account]):
    """A page of a followers/following list, newest first; ``next_cursor`` None at the end."""

    entries: list[FollowEntry[Account]]
    next_cursor: Cursor | None = None
    prev_cursor: Cursor | None = None  # the first entry's position, for the page above (None: empty)


def _page(items: list[Item], limit: int, *, older: bool = False) -> FollowPage[User]:
    """The page of the first ``limit`` of ``items`` (``older``: older items follow it whatever
    ``items`` holds, as after a page read above a position), its accounts read as ``User``s."""
    return _page_of(items, limit, users_by_id([member for member, _ in items[:limit]]), older=older)


def _page_of(items: list[Item], limit: int, users: Mapping[int, Account], *, older: bool = False) -> FollowPage[Account]:
    """``_page`` with the accounts ``users`` (``{id: account}``); an id it lacks (not an active
    account) is left out."""
    shown = items[:limit]
    entries = [FollowEntry(user=users[member], followed_at_seconds=score) for member, score in shown if member in users]
    next_cursor = Cursor(score=shown[-1][1], member=shown[-1][0]) if (older or len(items) > limit) and shown else None
    prev_cursor = Cursor(score=shown[0][1], member=shown[0][0]) if shown else None
    return FollowPage(entries=entries, next_cursor=next_cursor, prev_cursor=prev_cursor)


# One server: the marker, the choice of layout, each shard's head past the cursor and the merge
# in one script (the shard keys' hash tags differ: outside a cluster a script may take them all).
FOLLOWERS_PAGE_LUA = (
    PAGE_LUA
    + """
local marker = redis.call('GET', KEYS[1]) or ''
local keys = {KEYS[2]}
for i = 4, #ARGV do
  if marker == ARGV[i] then keys = {unpack(KEYS, 3)} break end
end
return {marker, merged_page(keys, tonumber(ARGV[1]), ARGV[2], ARGV[3])}
"""
)


def followers_items(*, user_id: int, cursor: Cursor | None, limit: int) -> list[Item]:
    """``[(follower_id, score_seconds)]`` of ``user_id`` after ``cursor``, newest first, at most ``limit``."""

    def from_redis(client: redis.Redis) -> list[Item]:
        if not is_cluster(client):
            shards = [zset_key for _, zset_key in layout.all_shard_keys(user_id)]
            keys = [redis_keys.followers_layout_key(user_id), redis_keys.followers_zset_key(user_id), *shards]
            arguments = [*page_arguments(cursor, limit), *layout.SHARD_READING_LAYOUTS]
            marker, rows = lua(FOLLOWERS_PAGE_LUA)(keys=keys, args=arguments, client=client)
            layout_remember(user_id, layout.marker_layout(marker or None))
            return decode_page(rows)
        # A cluster: the shards live on several masters. One round trip (per master) at any
        # depth: the marker and the page of the keys this process last saw the account read
        # from; a marker that says otherwise (an account that crossed a threshold) costs a second.
        guess = layout_seen(user_id)
        pipe = pipeline(client)
        pipe.get(redis_keys.followers_layout_key(user_id))
        keys = [zset_key for _, zset_key in layout.read_keys(user_id, guess)]
        decode = queue_redis_page(pipe, keys, cursor=cursor, limit=limit)
        marker, *replies = pipe.execute()
        live = layout.marker_layout(marker)
        layout_remember(user_id, live)
        if layout.reads_shards(live) == layout.reads_shards(guess):
            return decode(replies)
        keys = [zset_key for _, zset_key in layout.read_keys(user_id, live)]
        return redis_page(client, keys, cursor=cursor, limit=limit)

    def from_database() -> list[Item]:
        rows = active_follows().filter(followee_id=user_id)
        return db_page(rows, member_field="follower_id", cursor=cursor, limit=limit)

    return redis_or_database(from_redis, from_database, keys=[redis_keys.followers_zset_key(user_id)])


def followers_page(*, user_id: int, cursor: Cursor | None, limit: int) -> FollowPage[User]:
    """Followers of ``user_id`` newest first, ``limit`` per page, after ``cursor``."""
    return _page(followers_items(user_id=user_id, cursor=cursor, limit=limit + 1), limit)


def following_page(*, user_id: int, cursor: Cursor | None, limit: int) -> FollowPage[User]:
    """Accounts ``user_id`` follows, newest first, ``limit`` per page, after ``cursor``."""

    def from_redis(client: redis.Redis) -> list[Item]:
        return redis_page(client, [redis_keys.following_zset_key(user_id)], cursor=cursor, limit=limit + 1)

    def from_database() -> list[Item]:
        rows = active_follows().filter(follower_id=user_id)
        return db_page(rows, member_field="followee_id", cursor=cursor, limit=limit + 1)

    return _page(redis_or_database(from_redis, from_database, keys=[redis_keys.following_zset_key(user_id)]), limit)


# One server: a follow list's page, both counts of its account and the viewer's block set in one
# script. KEYS: the followers layout marker, the account's followers sorted set and set, its
# following sorted set and set, the viewer's block set (signed out: any key, not read), then each
# follower shard's sorted set, then each one's set. ARGV: PAGE_LUA's limit, score and member;
# "followers" or "following"; "1" to read the block set; the layouts whose readers read the
# shards (two); the head and tail of an account cache key (``account_key_parts``) and how many
# rows are shown. Replies {marker ("" for none), the page, followers, following, blocked ids,
# the shown rows' account cache entries}.
FOLLOW_LIST_LUA = (
    PAGE_LUA
    + """
local marker = redis.call('GET', KEYS[1]) or ''
local zsets, sets = {KEYS[2]}, {KEYS[3]}
if marker == ARGV[6] or marker == ARGV[7] then
  local shards = (#KEYS - 6) / 2
  zsets, sets = {}, {}
  for i = 1, shards do
    zsets[i], sets[i] = KEYS[6 + i], KEYS[6 + shards + i]
  end
end
if ARGV[4] ~= 'followers' then zsets = {KEYS[4]} end
local page = merged_page(zsets, tonumber(ARGV[1]), ARGV[2], ARGV[3])
local followers = 0
for _, key in ipairs(sets) do followers = followers + redis.call('SCARD', key) end
local blocked = {}
if ARGV[5] == '1' then blocked = redis.call('SMEMBERS', KEYS[6]) end
-- The account cache's entries of the rows shown (keys built from the ids read: one server only).
local accounts = {}
local shown = math.min(tonumber(ARGV[10]), #page / 2)
if shown > 0 then
  local names = {}
  for i = 1, shown do names[i] = ARGV[8] .. page[2 * i - 1] .. ARGV[9] end
  accounts = redis.call('MGET', unpack(names))
end
return {marker, page, followers, redis.call('SCARD', KEYS[5]), blocked, accounts}
"""
)


@dataclass(frozen=True)
class FollowList:
    """What a followers or following page shows: its ``page``, its account's ``counts``, and the
    accounts ``hidden`` from the viewer by a block either way (none signed out)."""

    page: FollowPage[Any]
    counts: Counts | None
    hidden: set[int]

    @property
    def shown(self) -> list[FollowEntry[Any]]:
        """The page's entries without the accounts hidden from the viewer."""
        return [entry for entry in self.page.entries if entry.user.pk not in self.hidden]


def follow_list(
    *, kind: str, user_id: int, cursor: Cursor | None, limit: int, viewer_id: int | None, counts: bool = True
) -> FollowList:
    """``followers_page`` (``kind`` "followers") or ``following_page``, with the viewer's
    ``hidden_ids`` and (``counts``) ``follow_counts``: on one Redis server one script; otherwise
    (a cluster, the database) those reads. Without ``counts`` its ``counts`` is None."""

    def from_redis(client: redis.Redis) -> FollowList | None:
        if is_cluster(client):
            return None  # the viewer's and the shards' keys are on other slots
        shards = layout.all_shard_keys(user_id)
        following_set = redis_keys.following_set_key(user_id)
        keys = [
            redis_keys.followers_layout_key(user_id),
            redis_keys.followers_zset_key(user_id),
            redis_keys.followers_set_key(user_id),
            redis_keys.following_zset_key(user_id),
            following_set,
            following_set if viewer_id is None else redis_keys.blocks_key(viewer_id),
            *(zset_key for _, zset_key in shards),
            *(set_key for set_key, _ in shards),
        ]
        arguments = [
            *page_arguments(cursor, limit + 1),
            kind,
            0 if viewer_id is None else 1,
            *layout.SHARD_READING_LAYOUTS,
            *account_key_parts(),
            limit,
        ]
        marker, rows, followers, following, blocked, values = lua(FOLLOW_LIST_LUA)(keys=keys, args=arguments, client=client)
        layout_remember(user_id, layout.marker_layout(marker or None))
        items = decode_page(rows)
        return FollowList(
            page=_page_of(items, limit, accounts_from_values(client, [member for member, _ in items[:limit]], values)),
            # Two SCARDs or so in the script either way; only the database's counts cost.
            counts=Counts(followers=int(followers), following=int(following)) if counts else None,
            hidden={int(member) for member in blocked},
        )

    found = redis_or_database(from_redis, lambda: None, keys=[redis_keys.followers_zset_key(user_id)])
    if found is not None:
        return found
    read = followers_page if kind == "followers" else following_page
    return FollowList(
        page=read(user_id=user_id, cursor=cursor, limit=limit),
        counts=follow_counts(user_id=user_id) if counts else None,
        hidden=set() if viewer_id is None else hidden_ids(viewer_id=viewer_id),
    )


def followers_page_above(*, user_id: int, above: Cursor, limit: int) -> FollowPage[User]:
    """The ``limit`` followers of ``user_id`` just above ``above`` (newer: Mastodon's ``min_id``),
    newest first; its ``next_cursor`` continues below them."""

    def from_redis(client: redis.Redis) -> list[Item]:
        live = followers_layouts(client, [user_id])[user_id]
        keys = [zset_key for _, zset_key in layout.read_keys(user_id, live)]
        return redis_page_above(client, keys, cursor=above, limit=limit)

    def from_database() -> list[Item]:
        return db_page_above(active_follows().filter(followee_id=user_id), member_field="follower_id", cursor=above, limit=limit)

    return _page(redis_or_database(from_redis, from_database, keys=[redis_keys.followers_zset_key(user_id)]), limit, older=True)


def following_page_above(*, user_id: int, above: Cursor, limit: int) -> FollowPage[User]:
    """The ``limit`` accounts ``user_id`` follows just above ``above``, newest first (as ``followers_page_above``)."""

    def from_redis(client: redis.Redis) -> list[Item]:
        return redis_page_above(client, [redis_keys.following_zset_key(user_id)], cursor=above, limit=limit)

    def from_database() -> list[Item]:
        return db_page_above(active_follows().filter(follower_id=user_id), member_field="followee_id", cursor=above, limit=limit)

    return _page(redis_or_database(from_redis, from_database, keys=[redis_keys.following_zset_key(user_id)]), limit, older=True)


# --- intersections --------------------------------------------------------


@dataclass(frozen=True)
class UserSample(Generic[Account]):
    """A set of accounts given as its size and a few of them (lowest ids first)."""

    count: int
    users: list[Account] = field(default_factory=list)


def _samples(wanted: Sequence[tuple[set[int], int, Collection[int]]]) -> list[UserSample[User]]:
    """A ``UserSample`` of each ``(ids, limit, exclude)``, the accounts of all of them read in one query."""
    return _samples_chosen([lowest_shown(ids, limit, exclude) for ids, limit, exclude in wanted])


def lowest_shown(ids: set[int], limit: int, exclude: Collection[int] = ()) -> tuple[int, list[int]]:
    """``(count, shown)`` of a sample of ``ids`` without ``exclude``: how many there are, and the
    ``limit`` lowest ids, ascending (what ``PROFILE_GRAPH_LUA`` computes in Redis)."""
    kept = ids - set(exclude)
    return len(kept), sorted(kept)[:limit]


def _samples_chosen(chosen: Sequence[tuple[int, Sequence[int]]]) -> list[UserSample[User]]:
    """A ``UserSample`` of each ``(count, ids shown)``, the accounts of all of them read in one query."""
    return _samples_of(chosen, users_by_id([user_id for _, shown in chosen for user_id in shown]))


def _samples_of(chosen: Sequence[tuple[int, Sequence[int]]], users: Mapping[int, Account]) -> list[UserSample[Account]]:
    """A ``UserSample`` of each ``(count, ids shown)`` with the accounts ``users`` (``{id: account}``;
    an id it lacks, not an active account, is left out)."""
    return [UserSample(count=count, users=[users[i] for i in shown if i in users]) for count, shown in chosen]


def _sample(ids: set[int], limit: int, exclude: Sequence[int] = ()) -> UserSample[User]:
    return _samples([(ids, limit, exclude)])[0]


def _members(reply: Iterable[bytes | str]) -> set[int]:
    """The ids among a set's members; one that is not an id as the writers write it (``id_or_none``,
    as the reconcile judges them; written around the writers, it removes them) is left out."""
    found = (id_or_none(member) for member in reply)
    return {member for member in found if member is not None}


def _followers_among(client: redis.Redis, user_id: int, candidates: set[int]) -> set[int]:
    """Which ``candidates`` follow ``user_id`` (SMISMEMBER on the key or each candidate's shard; one round trip)."""
    if not candidates:
        return set()
    live = followers_layouts(client, [user_id])[user_id]
    by_key: dict[str, list[int]] = {}
    for candidate in sorted(candidates):
        if layout.reads_shards(live):
            key = layout.home_keys(user_id, candidate)[layout.LAYOUT_SHARDED][0]
        else:
            key = layout.single_keys(user_id)[0]
        by_key.setdefault(key, []).append(candidate)
    pipe = pipeline(client)
    for key, members in by_key.items():
        pipe.smismember(key, [str(member) for member in members])
    found: set[int] = set()
    for members, flags in zip(by_key.values(), pipe.execute()):
        found |= {member for member, flag in zip(members, flags) if flag}
    return found


def _followed_followers(client: redis.Redis, *, user_id: int, follower_of: int) -> set[int]:
    """Followers of ``follower_of`` that ``user_id`` follows (SINTER, or checked per shard)."""
    live = followers_layouts(client, [follower_of])[follower_of]
    if not layout.reads_shards(live):
        keys = [layout.single_keys(follower_of)[0], redis_keys.following_set_key(user_id)]
        return _members(intersect_sets(client, keys))
    followed = _members(client.smembers(redis_keys.following_set_key(user_id)))
    return _followers_among(client, follower_of, followed)


def common_following_ids(*, user_id: int, other_id: int) -> set[int]:
    """Ids of the accounts both ``user_id`` and ``other_id`` follow: SINTER, or one query."""

    def from_redis(client: redis.Redis) -> set[int]:
        keys = [redis_keys.following_set_key(user_id), redis_keys.following_set_key(other_id)]
        return _members(intersect_sets(client, keys))

    def from_database() -> set[int]:
        mine = active_follows().filter(follower_id=user_id).values_list("followee_id", flat=True)
        return set(active_follows().filter(follower_id=other_id, followee_id__in=mine).values_list("followee_id", flat=True))

    return redis_or_database(
        from_redis, from_database, keys=[redis_keys.following_set_key(user_id), redis_keys.following_set_key(other_id)]
    )


def common_following(*, user_id: int, other_id: int, limit: int = 12, hidden: Collection[int] = ()) -> UserSample[User]:
    """Accounts both ``user_id`` and ``other_id`` follow ("you both follow"), without the two and ``hidden``."""
    return _sample(common_following_ids(user_id=user_id, other_id=other_id), limit, exclude=(user_id, other_id, *hidden))


def familiar_follower_ids(*, viewer_id: int, user_id: int) -> set[int]:
    """Ids of the followers of ``user_id`` whom ``viewer_id`` follows: SINTER (or per shard), or one query."""

    def from_database() -> set[int]:
        mine = active_follows().filter(follower_id=viewer_id).values_list("followee_id", flat=True)
        return set(active_follows().filter(followee_id=user_id, follower_id__in=mine).values_list("follower_id", flat=True))

    return redis_or_database(
        lambda client: _followed_followers(client, user_id=viewer_id, follower_of=user_id),
        from_database,
        keys=[redis_keys.following_set_key(viewer_id), redis_keys.followers_set_key(user_id)],
    )


def familiar_followers(*, viewer_id: int, user_id: int, limit: int = 3, hidden: Collection[int] = ()) -> UserSample[User]:
    """Followers of ``user_id`` whom ``viewer_id`` follows ("followed by N people you follow"), without ``hidden``."""
    found = familiar_follower_ids(viewer_id=viewer_id, user_id=user_id)
    return _sample(found, limit, exclude=(viewer_id, user_id, *hidden))


def mutual_follow_ids(*, user_id: int) -> set[int]:
    """Ids of the accounts that follow ``user_id`` and that ``user_id`` follows back: SINTER (or per shard), or one query."""

    def from_database() -> set[int]:
        followed = active_follows().filter(follower_id=user_id).values_list("followee_id", flat=True)
        return set(active_follows().filter(followee_id=user_id, follower_id__in=followed).values_list("follower_id", flat=True))

    return redis_or_database(
        lambda client: _followed_followers(client, user_id=user_id, follower_of=user_id),
        from_database,
        keys=[redis_keys.following_set_key(user_id)],
    )


def mutual_follows(*, user_id: int, limit: int = 12, hidden: Collection[int] = ()) -> UserSample[User]:
    """Accounts that follow ``user_id`` and that ``user_id`` follows back (friends), without ``hidden``."""
    return _sample(mutual_follow_ids(user_id=user_id), limit, exclude=(user_id, *hidden))


@dataclass(frozen=True)
class ProfileSamples:
    """The account lists of a profile: ``mutual`` (its friends), and for a signed-in viewer other
    than the account ``common`` ("you both follow") and ``familiar`` ("followed by N people you
    follow"; None for no such viewer)."""

    mutual: UserSample[Any]
    common: UserSample[Any] | None = None
    familiar: UserSample[Any] | None = None


def profile_samples(
    *, user_id: int, viewer_id: int | None, hidden: Collection[int] = (), limit: int = 8, familiar_limit: int = 3
) -> ProfileSamples:
    """``mutual_follows``, ``common_following`` and ``familiar_followers`` of a profile (without
    ``hidden``), their accounts read in one query instead of three."""
    wanted: list[tuple[set[int], int, Collection[int]]] = [(mutual_follow_ids(user_id=user_id), limit, (user_id, *hidden))]
    if viewer_id is not None and viewer_id != user_id:
        wanted.append((common_following_ids(user_id=viewer_id, other_id=user_id), limit, (viewer_id, user_id, *hidden)))
        familiar = familiar_follower_ids(viewer_id=viewer_id, user_id=user_id)
        wanted.append((familiar, familiar_limit, (viewer_id, user_id, *hidden)))
    samples = _samples(wanted)
    if len(samples) == 1:
        return ProfileSamples(mutual=samples[0])
    return ProfileSamples(mutual=samples[0], common=samples[1], familiar=samples[2])


# KEYS: the account's followers layout marker, its followers set, its following set, its graph
# version token (``redis_keys.graph_version_key``), the blocks set and mutes of the reader of
# controls (the signed-in viewer, the account itself included; read only when ARGV[11] is set),
# and for a viewer other than the account the viewer's following set and graph version token.
# ARGV: the layouts whose readers read follower shards (two), the sample sizes (mutual and common;
# familiar), the viewer's id ("" for none: left out of common and familiar), the head and tail of
# an account cache key (``account_key_parts``), the head of a cached sample's key, a fresh random
# token, the cached sample's time to live in seconds, the current time in unix ms when the
# controls are read ("" otherwise), then the ids left out of every sample (the account's, then
# the hidden ones, sorted; the blocked ones read from KEYS[5] are added).
# Replies {marker} alone when the followers are in shards; else the marker (nil when none), the
# followers and following counts, then per intersection (mutual; with a viewer common, familiar)
# the count of its members not left out and the lowest of those ids, ascending; with a viewer
# whether the viewer follows the account and whether the account follows the viewer; with the
# controls read whether the reader of controls mutes the account now; last the account cache
# entries of the sampled ids, in the order they came.
#
# The intersections are most of a profile's cost in Redis, so their samples are kept under a key
# holding both accounts' graph version tokens: every writer of those accounts' follow keys deletes
# its token (``mirror.queue_graph_version_change``), so a sample computed before a change is never
# read after it. The sets' sizes are kept beside the sample and compared, a second guard.
PROFILE_GRAPH_LUA = """
local marker = redis.call('GET', KEYS[1])
if marker and (marker == ARGV[1] or marker == ARGV[2]) then return {marker} end
local replies = {marker or false, redis.call('SCARD', KEYS[2]), redis.call('SCARD', KEYS[3])}
local viewer = ARGV[5]
local with_viewer = KEYS[7] ~= nil
local sizes = {replies[2], replies[3], with_viewer and redis.call('SCARD', KEYS[7]) or 0}
local left = {}
for index = 12, #ARGV do left[#left + 1] = ARGV[index] end
local given = #left
local muting, blocked_digest = false, ''
if ARGV[11] ~= '' then
    local blocked = redis.call('SMEMBERS', KEYS[5])
    table.sort(blocked)  -- the digests name them in one order
    blocked_digest = redis.sha1hex(table.concat(blocked, ','))
    for _, member in ipairs(blocked) do left[#left + 1] = member end
    local until_ms = redis.call('ZSCORE', KEYS[6], ARGV[12])
    muting = until_ms ~= false and tonumber(until_ms) > tonumber(ARGV[11])
end
local function token(key, suffix)
    local value = redis.call('GET', key)
    if value then return value end
    -- A token is never reused: a new one is random. (pcall: out of memory, nothing is kept.)
    value = ARGV[9] .. suffix
    redis.pcall('SET', key, value)
    return value
end
local cache_key = ARGV[8] .. ARGV[12] .. ':' .. viewer .. ':' .. token(KEYS[4], 'a') .. ':'
    .. (with_viewer and token(KEYS[8], 'b') or '') .. ':'
    .. redis.sha1hex(table.concat(ARGV, ',', 3, 7) .. ',' .. table.concat(left, ','))
local samples
local kept = redis.call('GET', cache_key)
if kept then
    local entry = cmsgpack.unpack(kept)
    if entry[1] == sizes[1] and entry[2] == sizes[2] and entry[3] == sizes[3] then samples = entry[4] end
end
if not samples then
    samples = {}
    local left_out = {}
    for _, member in ipairs(left) do left_out[member] = true end
    local function sample(members, limit, skip)
        local count, lowest = 0, {}
        -- Ids are written without leading zeros, so a member longer than the highest id kept is
        -- higher: most members are passed over without tonumber, the loop's costliest step.
        local longest = limit > 0 and math.huge or -1
        for index = 1, #members do
            local member = members[index]
            if not left_out[member] and member ~= skip then
                count = count + 1
                if #member <= longest then
                    -- An id as the writers write it (no sign, point, space or leading zero), else
                    -- not counted, as _members leaves it out: the reconcile removes it. (One longer
                    -- than the highest id kept is passed over unread, so counted until then.)
                    local id = string.find(member, '^[1-9]%d*$') and tonumber(member)
                    if not id then
                        count = count - 1
                    elseif #lowest < limit or id < lowest[#lowest] then
                        local position = #lowest + 1
                        while position > 1 and lowest[position - 1] > id do
                            lowest[position] = lowest[position - 1]
                            position = position - 1
                        end
                        lowest[position] = id
                        if #lowest > limit then lowest[#lowest] = nil end
                        if #lowest == limit then longest = #string.format('%d', lowest[limit]) end
                    end
                end
            end
        end
        samples[#samples + 1] = count
        samples[#samples + 1] = lowest
    end
    sample(redis.call('SINTER', KEYS[2], KEYS[3]), tonumber(ARGV[3]), false)
    if with_viewer then
        sample(redis.call('SINTER', KEYS[7], KEYS[3]), tonumber(ARGV[3]), viewer)
        sample(redis.call('SINTER', KEYS[2], KEYS[7]), tonumber(ARGV[4]), viewer)
    end
    -- With the sizes and the samples, what they were computed for (for the reconcile): the
    -- sample sizes, the digest of the blocked ids ('' when not read: a viewer may block many,
    -- so they are not kept) and the ids given to leave out.
    local asked = {tonumber(ARGV[3]), tonumber(ARGV[4]), blocked_digest}
    for index = 1, given do asked[#asked + 1] = tonumber(left[index]) end
    redis.pcall('SET', cache_key, cmsgpack.pack({sizes[1], sizes[2], sizes[3], samples, asked}), 'EX', ARGV[10])
end
local names = {}
for index = 1, #samples, 2 do
    replies[#replies + 1] = samples[index]
    replies[#replies + 1] = samples[index + 1]
    -- %d: Lua prints a number past 14 digits in exponent form.
    for _, id in ipairs(samples[index + 1]) do names[#names + 1] = ARGV[6] .. string.format('%d', id) .. ARGV[7] end
end
if with_viewer then
    replies[#replies + 1] = redis.call('SISMEMBER', KEYS[7], ARGV[12])
    replies[#replies + 1] = redis.call('SISMEMBER', KEYS[3], viewer)
end
if ARGV[11] ~= '' then replies[#replies + 1] = muting and 1 or 0 end
-- The keys are built from the ids sampled: one server only.
if #names > 0 then replies[#replies + 1] = redis.call('MGET', unpack(names)) else replies[#replies + 1] = {} end
return replies
"""


@dataclass(frozen=True)
class ProfileGraph:
    """What a profile shows of the graph: its ``counts``, its ``samples``, for a viewer other than
    the account the ``relationship`` between them (None otherwise), and when the viewer's controls
    were read whether the viewer mutes the account (``muting``; None otherwise)."""

    counts: Counts
    samples: ProfileSamples
    relationship: Relationship | None = None
    muting: bool | None = None


def profile_graph(
    *,
    user_id: int,
    viewer_id: int | None,
    hidden: Collection[int] = (),
    limit: int = 8,
    familiar_limit: int = 3,
    read_controls: bool = False,
) -> ProfileGraph:
    """``follow_counts``, ``profile_samples`` and (for a viewer other than the account)
    ``relationship`` of a profile together. On one Redis server, for an account whose followers
    are in one key, one script: the counts, the three intersections sampled in Redis (no
    intersection crosses the wire; kept, see ``PROFILE_GRAPH_LUA``) and both directions of the
    pair. Otherwise (shards, a cluster, the database) the same as those calls.

    :param hidden: ids left out of every sample.
    :param read_controls: with a signed-in ``viewer_id``, also leave out the accounts hidden from
        the viewer by a block (``visibility.hidden_and_muted_ids``) and answer ``muting``, read in
        the same script on one server.
    """
    viewer = viewer_id if viewer_id is not None and viewer_id != user_id else None
    controls_of = viewer_id if read_controls else None

    def from_redis(client: redis.Redis) -> list[Any] | None:
        if is_cluster(client):
            return None  # the viewer's keys are on another slot
        reader = user_id if controls_of is None else controls_of
        keys = [
            redis_keys.followers_layout_key(user_id),
            redis_keys.followers_set_key(user_id),
            redis_keys.following_set_key(user_id),
            redis_keys.graph_version_key(user_id),
            redis_keys.blocks_key(reader),
            redis_keys.mutes_key(reader),
        ]
        if viewer is not None:
            keys += [redis_keys.following_set_key(viewer), redis_keys.graph_version_key(viewer)]
        args = [
            *layout.SHARD_READING_LAYOUTS,
            limit,
            familiar_limit,
            "" if viewer is None else viewer,
            *account_key_parts(),
            redis_keys.profile_samples_key_head(),
            secrets.token_hex(8),
            redis_keys.PROFILE_SAMPLES_TTL_SECONDS,
            "" if controls_of is None else now_ms(),
            user_id,
            *sorted(hidden),
        ]
        reply = lua(PROFILE_GRAPH_LUA)(keys=keys, args=args, client=client)
        if len(reply) == 1:
            return None  # the followers are in shards
        *replies, values = reply
        tail = (0 if viewer is None else 2) + (0 if controls_of is None else 1)
        sampled = [int(member) for index in range(4, len(replies) - tail, 2) for member in replies[index]]
        return [*replies, accounts_from_values(client, sampled, values)]

    reply = redis_or_database(from_redis, lambda: None, keys=[redis_keys.followers_set_key(user_id)])
    if reply is None:
        muting = None
        if controls_of is not None:
            blocked, muted = hidden_and_muted_ids(viewer_id=controls_of)
            hidden, muting = {*hidden, *blocked}, user_id in muted
        return ProfileGraph(
            counts=follow_counts(user_id=user_id),
            samples=profile_samples(
                user_id=user_id, viewer_id=viewer_id, hidden=hidden, limit=limit, familiar_limit=familiar_limit
            ),
            relationship=None if viewer is None else relationship(viewer_id=viewer, user_id=user_id),
            muting=muting,
        )
    *reply, accounts = reply
    muting = None
    if controls_of is not None:
        *reply, muted_flag = reply
        muting = bool(muted_flag)
    counts = Counts(followers=int(reply[1]), following=int(reply[2]))
    sampled = reply[3:] if viewer is None else reply[3:-2]
    shown = _samples_of([(int(sampled[i]), [int(m) for m in sampled[i + 1]]) for i in range(0, len(sampled), 2)], accounts)
    if viewer is None:
        return ProfileGraph(counts=counts, samples=ProfileSamples(mutual=shown[0]), muting=muting)
    return ProfileGraph(
        counts=counts,
        samples=ProfileSamples(mutual=shown[0], common=shown[1], familiar=shown[2]),
        relationship=Relationship(is_following=bool(reply[-2]), follows_you=bool(reply[-1])),
        muting=muting,
    )


# --- directory ------------------------------------------------------------

# The most-followed ranking is one aggregate over the follow table, so it is
# cached this long (seconds): follows move it within this time. A change of an
# account's activity (deactivation, reactivation, deletion) starts a new
# generation of the cache at once (``social.rankings``).
MOST_FOLLOWED_CACHE_SECONDS = 600


def most_followed_compute(*, limit: int) -> list[tuple[int, int]]:
    """The database's ranking ``[(user_id, followers)]``, most followed first, ties by id; active accounts only."""
    # The follows of the (few) inactive accounts left out by a subquery
    # instead of joining every follow to both accounts' rows: one scan
    # of the followee index.
    inactive = User.objects.filter(is_active=False).values("pk")
    rows = (
        Follow.objects.exclude(follower_id__in=inactive)
        .exclude(followee_id__in=inactive)
        .values("followee_id")
        .annotate(n=Count("pk"))
        .order_by("-n", "followee_id")[:limit]
    )
    return [(int(row["followee_id"]), int(row["n"])) for row in rows]


def most_followed_cache_key(*, limit: int) -> str:
    """The cache key of the ranking of ``limit`` in the current generation.

    :raises: ``REDIS_ERRORS`` (the generation is read from the cache).
    """
    generation = cache.get(redis_keys.most_followed_generation_key(), 0)
    return redis_keys.most_followed_cache_key(limit=limit, generation=int(generation))


def users_most_followed(*, limit: int = 12) -> list[tuple[User, int]]:
    """The most followed accounts ``[(user, followers)]``, cached ``MOST_FOLLOWED_CACHE_SECONDS``; deactivated ones dropped on read."""
    try:
        key = most_followed_cache_key(limit=limit)
        cached = cache.get_or_set(key, lambda: most_followed_compute(limit=limit), timeout=MOST_FOLLOWED_CACHE_SECONDS)
        top: list[tuple[int, int]] = cached if cached is not None else most_followed_compute(limit=limit)
    except REDIS_ERRORS:
        top = most_followed_compute(limit=limit)
    users = User.objects.in_bulk([user_id for user_id, _ in top])
    return [(users[user_id], n) for user_id, n in top if user_id in users and users[user_id].is_active]


def follows_import_of(*, user_id: int, import_id: int) -> FollowImport | None:
    """Import ``import_id`` when it is ``user_id``'s, else None."""
    return FollowImport.objects.filter(pk=import_id, user_id=user_id).first()


def follows_import_latest(*, user_id: int) -> FollowImport | None:
    """``user_id``'s newest import, or None."""
    return FollowImport.objects.filter(user_id=user_id).order_by("-created_at", "-pk").first()


# --- who to follow --------------------------------------------------------


@dataclass(frozen=True)
class Suggestion:
    """A suggested account with its reason: ``via`` followees follow it, ``names`` some of them; ``via`` 0: most followed."""

    user: User
    via: int
    names: list[User]

    @property
    def reason(self) -> str:
        """ "followed by @b, @c and 12 others you follow", or "popular" for a most-followed account."""
        if not self.via:
            return "one of the most followed accounts"
        shown = [f"@{user.username}" for user in self.names][: self.via]
        others = self.via - len(shown)
        if others > 0:
            return f"followed by {', '.join(shown)} and {others:,} other{'s' if others != 1 else ''} you follow"
        return f"followed by {' and '.join(shown)} you follow"


@dataclass(frozen=True)
class Suggestions:
    """``items`` best first; ``computed`` False when nothing is stored yet (most followed shown meanwhile)."""

    items: list[Suggestion]
    computed: bool


def suggestions_for(*, user_id: int, limit: int = 10) -> Suggestions:
    """``user_id``'s stored suggestions, best first; while nothing is stored (or Redis is down) the
    most followed accounts the reader may see and does not follow (``computed`` False).

    Redis gives the order (``limit * 3`` candidates); whether each is shown and its reason are
    decided against the database now (``suggestion_links``).
    """

    def from_redis(client: redis.Redis) -> tuple[list[int], dict[int, int]] | None:
        key = redis_keys.suggestions_key(user_id)
        pipe = pipeline(client)
        pipe.zrevrange(key, 0, limit * 3 - 1, withscores=True)
        pipe.exists(redis_keys.suggestions_empty_key(user_id))
        ranked, empty = pipe.execute()
        # Ties by id ascending, as they were ranked (ZREVRANGE gives them descending).
        ids = [int(member) for member, _ in sorted(ranked, key=lambda pair: (-float(pair[1]), int(pair[0])))]
        if not ids:
            return ([], {}) if empty else None
        reasons = client.hmget(redis_keys.suggestions_why_key(user_id), [str(i) for i in ids])
        return ids, {candidate: parse_suggestion_reason(reason)[0] for candidate, reason in zip(ids, reasons)}

    found = redis_or_database(from_redis, lambda: None, keys=[redis_keys.suggestions_key(user_id)])
    if found is None:
        return Suggestions(items=suggestions_fallback(user_id=user_id, limit=limit), computed=False)
    ids, stored_via = found
    if ids and not any(stored_via.values()):
        # Stored for a reader who followed nobody: the most followed accounts, read live (an
        # account deactivated or reactivated since is left out or back at once).
        return Suggestions(items=suggestions_fallback(user_id=user_id, limit=limit), computed=True)
    skip = suggestion_exclusions(user_id) | {user_id}
    skip |= set(active_follows().filter(follower_id=user_id, followee_id__in=ids).values_list("followee_id", flat=True))
    candidates = [candidate for candidate in ids if candidate not in skip]
    links = suggestion_links(reader_id=user_id, candidate_ids=candidates)
    # A stored "most followed" entry (via 0: the reader followed nobody then) needs no link;
    # any other is shown only while a link the reader may see is left.
    shown = [candidate for candidate in candidates if links.get(candidate) or not stored_via.get(candidate)]
    users = users_by_id(shown + [name for candidate in shown for name in links.get(candidate, [])[:WHY_NAMES]])
    items: list[Suggestion] = []
    for candidate in shown:
        linked = links.get(candidate, [])
        named = [users[name] for name in linked[:WHY_NAMES] if name in users]
        # A link deactivated between the two reads is neither named nor counted.
        via = len(linked) - (min(len(linked), WHY_NAMES) - len(named))
        if candidate not in users or (stored_via.get(candidate) and not via):
            continue
        items.append(Suggestion(user=users[candidate], via=via, names=named))
    return Suggestions(items=items[:limit], computed=True)


# Followees named in a reason.
WHY_NAMES = 2


def suggestion_links(*, reader_id: int, candidate_ids: Collection[int]) -> dict[int, list[int]]:
    """For each candidate, the accounts linking it to ``reader_id`` that the reader may see now
    (database): active followees with no block either way that follow the candidate.

    :returns: ``{candidate: [link ids ascending]}``; a candidate without links is absent.
    """
    if not candidate_ids:
        return {}
    followed = active_follows().filter(follower_id=reader_id).values("followee_id")
    blocked = Block.objects.filter(Q(blocker_id=reader_id) | Q(blocked_id=reader_id))
    rows = (
        active_follows()
        .filter(followee_id__in=sorted(set(candidate_ids)), follower_id__in=followed)
        .exclude(follower_id__in=blocked.values("blocked_id"))
        .exclude(follower_id__in=blocked.values("blocker_id"))
        .order_by("followee_id", "follower_id")
        .values_list("followee_id", "follower_id")
    )
    links: dict[int, list[int]] = {}
    for candidate, link in rows:
        links.setdefault(int(candidate), []).append(int(link))
    return links


def suggestions_fallback(*, user_id: int, limit: int) -> list[Suggestion]:
    """The most followed accounts ``user_id`` does not follow or exclude, as suggestions without links."""
    skip = (
        set(active_follows().filter(follower_id=user_id).values_list("followee_id", flat=True))
        | suggestion_exclusions(user_id)
        | {user_id}
    )
    popular = [user for user, _ in users_most_followed(limit=POPULAR_POOL) if user.pk not in skip]
    return [Suggestion(user=user, via=0, names=[]) for user in popular[:limit]]


# The most followed accounts read (one cached ranking for everyone) when a reader has no
# suggestions of its own: the ones it follows or excludes are taken out of these.
POPULAR_POOL = 200


def blocks_either_way(user_id: int) -> set[int]:
    """The accounts a block separates from ``user_id``, either way (database read)."""
    return {
        blocked if blocker == user_id else blocker
        for blocker, blocked in Block.objects.filter(Q(blocker_id=user_id) | Q(blocked_id=user_id)).values_list(
            "blocker_id", "blocked_id"
        )
    }


def suggestion_exclusions(user_id: int) -> set[int]:
    """Accounts never suggested to ``user_id`` besides itself and its followees: requested, blocked either way, muted."""
    found: set[int] = set(FollowRequest.objects.filter(requester_id=user_id).values_list("target_id", flat=True))
    found |= blocks_either_way(user_id)
    found.update(Mute.objects.filter(live_mutes(), muter_id=user_id).values_list("muted_id", flat=True))
    return found


def parse_suggestion_reason(value: object) -> tuple[int, list[int]]:
    """``(via, names)`` of a stored reason (``b"12,5,9"``); ``(0, [])`` for none or garbage."""
    if not isinstance(value, (bytes, str)):
        return 0, []
    parts = (value.decode() if isinstance(value, bytes) else value).split(",")
    if not all(part.isdigit() for part in parts):
        return 0, []
    return int(parts[0]), [int(part) for part in parts[1:]]

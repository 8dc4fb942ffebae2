"""Every read of the follow graph: from Redis, or from the database when Redis can't answer.

Each selector has a Redis path and a database path with the same answer.
The database path is used while the circuit breaker is open (Redis down or
slow), while the mirror is known to be empty (sentinel key missing after a
Redis restart without persistence), and when a Redis call fails. Only
edges whose two accounts are active count.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from datetime import timezone as dt_timezone
from typing import Any, TypeVar

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connections, router

from . import redis_keys
from .mirror import followers_layouts
from .models import Follow
from .paging import Item, db_page, decode_cursor, encode_cursor, redis_page
from .redis_client import REDIS_ERRORS, get_redis, intersect_sets, redis_available, redis_failed, redis_succeeded

User = get_user_model()
T = TypeVar("T")

# How long (seconds) one process trusts its last look at the sentinel key.
SENTINEL_TTL_SECONDS = 2.0
_sentinel_seen: dict[str, float] = {}


def mirror_ready(client: Any) -> bool:
    """Whether the Redis mirror is populated (its sentinel key exists), cached per process."""
    key = redis_keys.social_sentinel_key()
    now = time.monotonic()
    if _sentinel_seen.get(key, 0.0) > now:
        return True
    if client.exists(key):
        _sentinel_seen[key] = now + SENTINEL_TTL_SECONDS
        return True
    return False


def forget_sentinel() -> None:
    """Drop the cached sentinel look (tests, and after a flush)."""
    _sentinel_seen.clear()


def redis_or_database(redis_read: Callable[[Any], T], database_read: Callable[[], T]) -> T:
    """Run ``redis_read(client)``, or ``database_read()`` if Redis can't answer.

    :returns: whichever answered; Redis errors open the breaker, never raise.
    """
    if redis_available():
        try:
            client = get_redis()
            if mirror_ready(client):
                answer = redis_read(client)
                redis_succeeded()  # closes a half-open breaker
                return answer
            redis_succeeded()  # Redis answered; the mirror is just not built yet
        except REDIS_ERRORS as exc:
            redis_failed(exc)
    return database_read()


def active_follows() -> Any:
    """Follow rows whose two accounts are active."""
    return Follow.objects.filter(follower__is_active=True, followee__is_active=True)


# --- relationship ---------------------------------------------------------


def is_following(*, follower_id: int, followee_id: int) -> bool:
    """Whether ``follower_id`` follows ``followee_id`` (SISMEMBER on the follower's set)."""
    return redis_or_database(
        lambda client: bool(client.sismember(redis_keys.following_set_key(follower_id), followee_id)),
        lambda: active_follows().filter(follower_id=follower_id, followee_id=followee_id).exists(),
    )


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

    def from_redis(client: Any) -> Relationship:
        pipe = client.pipeline(transaction=False)
        pipe.sismember(redis_keys.following_set_key(viewer_id), user_id)
        pipe.sismember(redis_keys.following_set_key(user_id), viewer_id)
        forward, backward = pipe.execute()
        return Relationship(is_following=bool(forward), follows_you=bool(backward))

    def from_database() -> Relationship:
        pairs = set(
            active_follows()
            .filter(follower_id__in=[viewer_id, user_id], followee_id__in=[viewer_id, user_id])
            .values_list("follower_id", "followee_id")
        )
        return Relationship(is_following=(viewer_id, user_id) in pairs, follows_you=(user_id, viewer_id) in pairs)

    return redis_or_database(from_redis, from_database)


# --- counts ---------------------------------------------------------------


@dataclass(frozen=True)
class Counts:
    """Follower and following counts of one account (never negative)."""

    followers: int
    following: int


def _follower_set_keys(user_id: int, layout: bytes) -> list[str]:
    return [set_key for set_key, _ in redis_keys.followers_read_keys(user_id, layout)]


def _follower_zset_keys(user_id: int, layout: bytes) -> list[str]:
    return [zset_key for _, zset_key in redis_keys.followers_read_keys(user_id, layout)]


def follow_counts(*, user_id: int) -> Counts:
    """Followers and following of ``user_id``: SCARD, one round trip for a single-key account.

    A sharded account sums its FOLLOWERS_SHARDS shard cardinalities (a
    second round trip, still O(1) per shard).
    """

    def from_redis(client: Any) -> Counts:
        pipe = client.pipeline(transaction=False)
        pipe.get(redis_keys.followers_layout_key(user_id))
        pipe.scard(redis_keys.followers_set_key(user_id))
        pipe.scard(redis_keys.following_set_key(user_id))
        layout, followers, following = pipe.execute()
        if redis_keys.reads_shards(layout):
            pipe = client.pipeline(transaction=False)
            for key in _follower_set_keys(user_id, layout):
                pipe.scard(key)
            followers = sum(pipe.execute())
        return Counts(followers=int(followers), following=int(following))

    def from_database() -> Counts:
        return Counts(
            followers=active_follows().filter(followee_id=user_id).count(),
            following=active_follows().filter(follower_id=user_id).count(),
        )

    return redis_or_database(from_redis, from_database)


# --- lists ----------------------------------------------------------------


@dataclass(frozen=True)
class FollowEntry:
    """One row of a followers/following list: the account and when the follow began."""

    user: Any
    followed_at: datetime


@dataclass(frozen=True)
class FollowPage:
    """A page of a followers/following list, newest first; ``next_cursor`` None at the end."""

    entries: list[FollowEntry]
    next_cursor: str | None = None


# The fields a list row shows; the others load on access, as with ``.only()``.
LIST_FIELDS = ("id", "username", "display_name", "is_active")


def users_by_id(ids: Sequence[int]) -> dict[int, Any]:
    """Active users with these ids, in one query: ``{id: User}`` with ``LIST_FIELDS`` loaded.

    The same instances ``User.objects.filter(pk__in=ids, is_active=True)
    .only(*LIST_FIELDS)`` gives, built with ``Model.from_db`` from one
    statement run through the cursor: the ORM's query compilation and row
    iteration took two thirds of every list page (bench/run.py on Slashdot,
    50 rows: about 600 µs through the ORM, 250 µs this way, of which the
    database's answer is about 100 µs).
    """
    wanted = sorted({int(i) for i in ids})
    if not wanted:
        return {}
    meta = User._meta
    alias = router.db_for_read(User)
    connection = connections[alias]
    quote = connection.ops.quote_name
    # from_db wants the values in the model's field order.
    fields = [f for f in meta.concrete_fields if f.attname in LIST_FIELDS]
    names = [f.attname for f in fields]
    active = names.index("is_active")
    sql = (
        f"SELECT {', '.join(quote(str(f.column)) for f in fields)} FROM {quote(meta.db_table)} "
        f"WHERE {quote(str(meta.pk.column))} IN ({', '.join(['%s'] * len(wanted))}) "
        f"AND {quote(str(meta.get_field('is_active').column))} = %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*wanted, True])
        rows = cursor.fetchall()
    users: dict[int, Any] = {}
    for row in rows:
        values = list(row)
        values[active] = bool(values[active])  # 1 from MySQL and SQLite
        user = User.from_db(alias, names, values)
        users[int(user.pk)] = user
    return users


def _page(items: list[Item], limit: int) -> FollowPage:
    shown = items[:limit]
    users = users_by_id([member for member, _ in shown])
    entries = [
        FollowEntry(user=users[member], followed_at=datetime.fromtimestamp(score, tz=dt_timezone.utc))
        for member, score in shown
        if member in users
    ]
    next_cursor = encode_cursor(shown[-1][1], shown[-1][0]) if len(items) > limit and shown else None
    return FollowPage(entries=entries, next_cursor=next_cursor)


def followers_items(*, user_id: int, cursor: str | None, limit: int) -> list[Item]:
    """The followers of ``user_id`` after ``cursor`` as ``[(follower_id, score_seconds)]``, newest
    first, at most ``limit``: the ids of a followers page without the user rows.

    :raises InvalidCursorError: malformed cursor (400).
    """
    position = decode_cursor(cursor)

    def from_redis(client: Any) -> list[Item]:
        if position is None:
            # The first page in one round trip: the layout marker and the
            # single key's top together (a sharded account, rare, costs a
            # second trip). Measured on Slashdot: 2 round trips were 5x a
            # PING, this is about 2x.
            pipe = client.pipeline(transaction=False)
            pipe.get(redis_keys.followers_layout_key(user_id))
            pipe.zrevrange(redis_keys.followers_zset_key(user_id), 0, limit - 1, withscores=True)
            layout, rows = pipe.execute()
            if not redis_keys.reads_shards(layout or redis_keys.LAYOUT_SINGLE):
                return [(int(member), int(score)) for member, score in rows]
        layout = followers_layouts(client, [user_id])[user_id]
        return redis_page(client, _follower_zset_keys(user_id, layout), cursor=position, limit=limit)

    def from_database() -> list[Item]:
        rows = active_follows().filter(followee_id=user_id)
        return db_page(rows, member_field="follower_id", cursor=position, limit=limit)

    return redis_or_database(from_redis, from_database)


def followers_page(*, user_id: int, cursor: str | None, limit: int) -> FollowPage:
    """Followers of ``user_id`` newest first, ``limit`` per page, after ``cursor``.

    :raises InvalidCursorError: malformed cursor (400).
    """
    return _page(followers_items(user_id=user_id, cursor=cursor, limit=limit + 1), limit)


def following_page(*, user_id: int, cursor: str | None, limit: int) -> FollowPage:
    """Accounts ``user_id`` follows, newest first, ``limit`` per page, after ``cursor``.

    :raises InvalidCursorError: malformed cursor (400).
    """
    position = decode_cursor(cursor)

    def from_redis(client: Any) -> list[Item]:
        return redis_page(client, [redis_keys.following_zset_key(user_id)], cursor=position, limit=limit + 1)

    def from_database() -> list[Item]:
        rows = active_follows().filter(follower_id=user_id)
        return db_page(rows, member_field="followee_id", cursor=position, limit=limit + 1)

    return _page(redis_or_database(from_redis, from_database), limit)


# --- intersections --------------------------------------------------------


@dataclass(frozen=True)
class UserSample:
    """A set of accounts given as its size and a few of them (lowest ids first)."""

    count: int
    users: list[Any] = field(default_factory=list)


def _sample(ids: set[int], limit: int, exclude: Sequence[int] = ()) -> UserSample:
    ids = ids - set(exclude)
    chosen = sorted(ids)[:limit]
    users = users_by_id(chosen)
    return UserSample(count=len(ids), users=[users[i] for i in chosen if i in users])


def _members(reply: Any) -> set[int]:
    return {int(member) for member in reply}


def _followers_among(client: Any, user_id: int, candidates: set[int]) -> set[int]:
    """Which ``candidates`` follow ``user_id``: SMISMEMBER against the one key, or per shard
    against the one shard that can hold each candidate (one round trip)."""
    if not candidates:
        return set()
    layout = followers_layouts(client, [user_id])[user_id]
    by_key: dict[str, list[int]] = {}
    for candidate in sorted(candidates):
        if redis_keys.reads_shards(layout):
            key = redis_keys.followers_set_shard_key(user_id, redis_keys.follower_shard(candidate))
        else:
            key = redis_keys.followers_set_key(user_id)
        by_key.setdefault(key, []).append(candidate)
    pipe = client.pipeline(transaction=False)
    for key, members in by_key.items():
        pipe.smismember(key, members)
    found: set[int] = set()
    for members, flags in zip(by_key.values(), pipe.execute()):
        found |= {member for member, flag in zip(members, flags) if flag}
    return found


def common_following_ids(*, user_id: int, other_id: int) -> set[int]:
    """Ids of the accounts both ``user_id`` and ``other_id`` follow: SINTER, or one query."""

    def from_redis(client: Any) -> set[int]:
        keys = [redis_keys.following_set_key(user_id), redis_keys.following_set_key(other_id)]
        return _members(intersect_sets(client, keys))

    def from_database() -> set[int]:
        mine = active_follows().filter(follower_id=user_id).values_list("followee_id", flat=True)
        return set(active_follows().filter(follower_id=other_id, followee_id__in=mine).values_list("followee_id", flat=True))

    return redis_or_database(from_redis, from_database)


def common_following(*, user_id: int, other_id: int, limit: int = 12) -> UserSample:
    """Accounts both ``user_id`` and ``other_id`` follow ("you both follow"): SINTER.

    Neither account itself is listed.
    """
    return _sample(common_following_ids(user_id=user_id, other_id=other_id), limit, exclude=(user_id, other_id))


def familiar_followers(*, viewer_id: int, user_id: int, limit: int = 3) -> UserSample:
    """Followers of ``user_id`` whom ``viewer_id`` follows ("followed by N people you follow")."""

    def from_redis(client: Any) -> set[int]:
        layout = followers_layouts(client, [user_id])[user_id]
        if not redis_keys.reads_shards(layout):
            keys = [redis_keys.followers_set_key(user_id), redis_keys.following_set_key(viewer_id)]
            return _members(intersect_sets(client, keys))
        followed = _members(client.smembers(redis_keys.following_set_key(viewer_id)))
        return _followers_among(client, user_id, followed)

    def from_database() -> set[int]:
        mine = active_follows().filter(follower_id=viewer_id).values_list("followee_id", flat=True)
        return set(active_follows().filter(followee_id=user_id, follower_id__in=mine).values_list("follower_id", flat=True))

    return _sample(redis_or_database(from_redis, from_database), limit, exclude=(viewer_id, user_id))


def mutual_follows(*, user_id: int, limit: int = 12) -> UserSample:
    """Accounts that follow ``user_id`` and that ``user_id`` follows back (friends)."""

    def from_redis(client: Any) -> set[int]:
        layout = followers_layouts(client, [user_id])[user_id]
        if not redis_keys.reads_shards(layout):
            keys = [redis_keys.following_set_key(user_id), redis_keys.followers_set_key(user_id)]
            return _members(intersect_sets(client, keys))
        followed = _members(client.smembers(redis_keys.following_set_key(user_id)))
        return _followers_among(client, user_id, followed)

    def from_database() -> set[int]:
        followed = active_follows().filter(follower_id=user_id).values_list("followee_id", flat=True)
        return set(active_follows().filter(followee_id=user_id, follower_id__in=followed).values_list("follower_id", flat=True))

    return _sample(redis_or_database(from_redis, from_database), limit, exclude=(user_id,))

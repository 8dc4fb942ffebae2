"""Writes of the follow graph's Redis mirror, always from the database's truth.

A verified write re-reads the database after writing and writes again if the state moved, so
racing, repeated or late applications converge; a commit's first write (``verify=False``) is
versioned by its outbox entry and fenced instead. Edges count only while both accounts are
active. Design: docs/architecture.md#the-follow-graph and #the-outbox-and-its-kinds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import connection
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from core.cluster import Pipe, pipeline, queue_eval
from core.errors import EntryNotApplied
from core.redis import REDIS_ERRORS, get_redis, redis_failed
from core.replica import primary_reads
from users.models import User

from . import layout, redis_keys
from .models import Follow, follow_score
from .selectors import layout_remember, layout_seen

logger = logging.getLogger(__name__)

Pair = tuple[int, int]  # (follower_id, followee_id)
MAX_VERIFY_ROUNDS = 5
PAIR_QUERY_CHUNK = 400


class MirrorNotConverged(EntryNotApplied):
    """The database kept changing under a mirror write for MAX_VERIFY_ROUNDS rounds."""


@dataclass(frozen=True)
class Version:
    """The newest outbox entry of a pair a write applies: ``entry_id`` (grows in commit order per
    pair: inserted after the row change, under its locks) and ``created_ms`` (unix ms).
    """

    entry_id: int
    created_ms: int


# One side of a pair (a set, its sorted set and the fences of their slot) written under a
# version. ARGV: member, score ('' removes), entry id, '1' for a confirmed write (the database's
# state read after the entry committed: always written, raises the fence) or '0' for a
# provisional one (written only above every fence), the fence's time to live in seconds.
FENCED_WRITE_LUA = """
local fenced = 0
for i = 3, 5 do
  local seen = tonumber(redis.call('HGET', KEYS[i], ARGV[1]) or '0')
  if seen > fenced then fenced = seen end
end
local version = tonumber(ARGV[3])
if ARGV[4] ~= '1' and version <= fenced then return 0 end
if ARGV[2] == '' then
  redis.call('SREM', KEYS[1], ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
else
  redis.call('SADD', KEYS[1], ARGV[1])
  redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
end
if version > fenced then
  redis.call('HSET', KEYS[4], ARGV[1], version)
  redis.call('EXPIRE', KEYS[4], ARGV[5])
end
return 1
"""
FENCE_TTL_SECONDS = 3 * redis_keys.FENCE_WINDOW_SECONDS


def _queue_side(
    pipe: Pipe, keys: tuple[str, str], member: int, score: int | None, fence: tuple[Version, bool, int] | None
) -> None:
    set_key, zset_key = keys
    if fence is None:
        if score is None:
            pipe.srem(set_key, member)
            pipe.zrem(zset_key, member)
        else:
            pipe.sadd(set_key, member)
            pipe.zadd(zset_key, {str(member): score})
        return
    version, confirmed, window = fence
    args = [member, "" if score is None else score, version.entry_id, "1" if confirmed else "0", FENCE_TTL_SECONDS]
    queue_eval(pipe, FENCED_WRITE_LUA, [set_key, zset_key, *redis_keys.fence_keys(set_key, window)], args)


@dataclass(frozen=True)
class LayoutObservation:
    """What a mirror write saw of a followee: its follower ``count`` and its ``layout`` marker,
    read in the write's own pipeline (the caller decides whether a migration is due)."""

    count: int
    layout: bytes


def queue_pair_write(
    pipe: Pipe,
    *,
    follower_id: int,
    followee_id: int,
    score: int | None,
    layout_now: bytes,
    scrub: bool = False,
    fence: tuple[Version, bool, int] | None = None,
) -> None:
    """Queue on ``pipe`` the commands that make Redis show the pair as ``score`` (None: removed).

    The followee's keys are ``layout.write_keys(layout_now)``; ``scrub`` also removes the
    follower from the layout no longer live (a write that raced a marker flip); ``fence``
    ``(version, confirmed, window)`` makes each side a versioned write (``FENCED_WRITE_LUA``).
    """
    targets = layout.write_keys(followee_id, follower_id, layout_now)
    stale = layout.stale_keys(followee_id, follower_id, layout_now) if scrub else []
    following = (redis_keys.following_set_key(follower_id), redis_keys.following_zset_key(follower_id))
    _queue_side(pipe, following, followee_id, score, fence)
    for target in targets:
        _queue_side(pipe, target, follower_id, score, fence)
    for set_key, zset_key in stale:
        pipe.srem(set_key, follower_id)
        pipe.zrem(zset_key, follower_id)
    queue_graph_version_change(pipe, (follower_id, followee_id))


def queue_graph_version_change(pipe: Pipe, user_ids: Iterable[int]) -> None:
    """Queue on ``pipe``, after the writes of ``user_ids``' follow-graph keys, the removal of their
    graph version tokens (``redis_keys.graph_version_key``): what was cached under the old token
    (a profile's samples) is then never read again. Every writer of those keys calls it."""
    for user_id in dict.fromkeys(int(user_id) for user_id in user_ids):
        # One key per UNLINK: the accounts' keys may be on different cluster slots.
        pipe.unlink(redis_keys.graph_version_key(user_id))


def _score_of(value: datetime | str) -> int:
    # A raw cursor returns the stored UTC time naive (MariaDB) or as text
    # (some SQLite builds); the ORM would have made it aware.
    at = parse_datetime(value) if isinstance(value, str) else value
    if at is None:
        raise ValueError(f"not a datetime: {value!r}")
    if timezone.is_naive(at):
        at = at.replace(tzinfo=UTC)
    return follow_score(at)


def pair_states(pairs: Sequence[Pair]) -> dict[Pair, int | None]:
    """Database state of each pair: its follow score, or None (absent or an inactive side).

    :returns: ``{(follower_id, followee_id): score_seconds | None}``; one
        query per PAIR_QUERY_CHUNK pairs.
    """
    states: dict[Pair, int | None] = {(int(a), int(b)): None for a, b in pairs}
    keys = list(states)
    follows, users = Follow._meta.db_table, User._meta.db_table
    for start in range(0, len(keys), PAIR_QUERY_CHUNK):
        chunk = keys[start : start + PAIR_QUERY_CHUNK]
        # Raw SQL: this read runs after every follow, and building the
        # ORM's OR of pairs cost more than the query.
        condition = " OR ".join(["(f.follower_id = %s AND f.followee_id = %s)"] * len(chunk))
        sql = (
            f"SELECT f.follower_id, f.followee_id, f.created_at FROM {follows} f"
            f" JOIN {users} a ON a.id = f.follower_id JOIN {users} b ON b.id = f.followee_id"
            f" WHERE a.is_active AND b.is_active AND ({condition})"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [value for pair in chunk for value in pair])
            for follower_id, followee_id, created_at in cursor.fetchall():
                states[(int(follower_id), int(followee_id))] = _score_of(created_at)
    return states


@primary_reads()
def mirror_apply_pairs(
    pairs: Iterable[Pair],
    *,
    hints: Mapping[Pair, int | None] | None = None,
    verify: bool = True,
    versions: Mapping[Pair, Version] | None = None,
) -> dict[int, LayoutObservation]:
    """Make Redis show each pair exactly as the database has it, race-safely.

    Each round writes the pairs and re-reads each followee's marker and count in the same
    pipeline, then re-reads the database; a pair whose row or marker moved is written again.

    :param pairs: ``(follower_id, followee_id)`` tuples, duplicates allowed.
    :param hints: ``{pair: score | None}`` believed for some pairs (the first round writes
        them unread); others are read from the database first.
    :param verify: False writes once, with no database read after (a commit's first write).
    :param versions: ``{pair: Version}`` of the entries applied: with ``verify`` they raise the
        pair's fence; without, a pair is written only above its fence, and not once its entry
        is older than half a fence window.
    :returns: ``{followee_id: LayoutObservation}`` as the write pipeline saw them.
    :raises redis.exceptions.ConnectionError: (and the other REDIS_ERRORS) when Redis is
        unreachable; the caller keeps the outbox entry.
    :raises MirrorNotConverged: when the database kept changing.
    """
    wanted = list(dict.fromkeys((int(a), int(b)) for a, b in pairs))
    observed: dict[int, LayoutObservation] = {}
    now = time.time()
    window = redis_keys.fence_window(now)
    fenced = versions or {}
    if not verify:
        # Too old to be sure a newer write's fence is still there: left to the confirmation.
        oldest_ms = (now - redis_keys.FENCE_WINDOW_SECONDS / 2) * 1000
        wanted = [pair for pair in wanted if pair not in fenced or fenced[pair].created_ms >= oldest_ms]
    if not wanted:
        return observed
    client = get_redis()
    known = hints or {}
    states = {pair: known[pair] for pair in wanted if pair in known}
    unknown = [pair for pair in wanted if pair not in states]
    if unknown:
        states.update(pair_states(unknown))
    layouts = {followee: layout_seen(followee) for _, followee in wanted}
    todo = wanted
    moved: set[int] = set()
    for _ in range(MAX_VERIFY_ROUNDS):
        followees = list(dict.fromkeys(followee for _, followee in todo))
        pipe = pipeline(client)
        for follower_id, followee_id in todo:
            queue_pair_write(
                pipe,
                follower_id=follower_id,
                followee_id=followee_id,
                score=states[(follower_id, followee_id)],
                layout_now=layouts[followee_id],
                scrub=followee_id in moved,
                fence=_fence_of(fenced, (follower_id, followee_id), verify, window),
            )
        widths = {followee_id: len(layout.read_keys(followee_id, layouts[followee_id])) for followee_id in followees}
        for followee_id in followees:
            pipe.get(redis_keys.followers_layout_key(followee_id))
            for set_key, _ in layout.read_keys(followee_id, layouts[followee_id]):
                pipe.scard(set_key)
        replies = pipe.execute()
        tail = len(replies) - sum(1 + width for width in widths.values())
        moved = set()
        for followee_id in followees:
            now_layout = layout.marker_layout(replies[tail])
            width = widths[followee_id]
            if now_layout != layouts[followee_id]:
                moved.add(followee_id)
                layouts[followee_id] = now_layout
            else:
                count = sum(int(n) for n in replies[tail + 1 : tail + 1 + width])
                observed[followee_id] = LayoutObservation(count=count, layout=now_layout)
            layout_remember(followee_id, now_layout)
            tail += 1 + width
        if not verify:
            todo = [pair for pair in todo if pair[1] in moved]
            if not todo:
                return observed
            continue
        again = pair_states(todo)
        todo = [pair for pair in todo if again[pair] != states[pair] or pair[1] in moved]
        states.update(again)
        if not todo:
            return observed
    raise MirrorNotConverged(f"{len(todo)} pairs kept changing, e.g. {todo[:3]}")


def _fence_of(versions: Mapping[Pair, Version], pair: Pair, confirmed: bool, window: int) -> tuple[Version, bool, int] | None:
    version = versions.get(pair)
    return None if version is None else (version, confirmed, window)


def user_pairs(user_id: int) -> list[Pair]:
    """Every pair touching ``user_id`` in the database or in Redis (a deleted account's rows are gone).

    :raises: ``REDIS_ERRORS`` (the breaker is opened first).
    """
    user_id = int(user_id)
    pairs: set[Pair] = set()
    for followee_id in Follow.objects.filter(follower_id=user_id).values_list("followee_id", flat=True).iterator():
        pairs.add((user_id, followee_id))
    for follower_id in Follow.objects.filter(followee_id=user_id).values_list("follower_id", flat=True).iterator():
        pairs.add((follower_id, user_id))
    try:
        client = get_redis()
        for member in client.sscan_iter(redis_keys.following_set_key(user_id), count=1000):
            pairs.add((user_id, int(member)))
        for key in layout.every_set_key(user_id):
            for member in client.sscan_iter(key, count=1000):
                pairs.add((int(member), user_id))
    except REDIS_ERRORS as exc:  # the database's pairs are still applied later
        redis_failed(exc)
        raise
    return sorted(pairs)


@primary_reads()
def mirror_apply_user(user_id: int, *, chunk: int = 2000) -> dict[int, LayoutObservation]:
    """Re-apply every edge of ``user_id`` (after deactivation, reactivation or deletion).

    :param chunk: pairs per ``mirror_apply_pairs`` call.
    :returns: the followees observed, as ``mirror_apply_pairs``.
    :raises: as ``mirror_apply_pairs``.
    """
    pairs = user_pairs(user_id)
    observed: dict[int, LayoutObservation] = {}
    for start in range(0, len(pairs), chunk):
        observed.update(mirror_apply_pairs(pairs[start : start + chunk]))
    return observed

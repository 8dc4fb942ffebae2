"""Rebuild the follow graph's Redis mirror from the database.

Keys are built aside (``ADD_CHUNK`` members per command) and swapped in (``SWAP_LUA``:
``UNLINK key; RENAME tmp key``, so the old value is freed in the background and the key is
never missing); accounts are walked in id ranges (resumable with ``start_after``); pair
entries of follows committed meanwhile are re-applied at the end. Design:
docs/architecture.md#big-accounts.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import redis
from django.db.models import Max, Q, QuerySet
from django.utils import timezone

from core.cluster import Pipe, is_cluster, lua, pipeline, queue_script
from core.models import OutboxEntry
from core.redis import get_redis, write_sentinels
from core.replica import primary_reads
from users.models import User
from users.selectors import id_ranges

from . import layout, redis_keys
from .control_mirror import mirror_apply_controls, mute_score
from .edges import active_edges_in_range, inactive_user_ids
from .mirror import mirror_apply_pairs, mirror_apply_user, queue_graph_version_change
from .models import OUTBOX_CONTROL, OUTBOX_PAIR, OUTBOX_USER, Block, Mute, live_mutes

logger = logging.getLogger(__name__)

# Members per SADD/ZADD command when building a key.
ADD_CHUNK = 5000
# An account of the single layout whose lists both hold at most this many
# members is replaced in one atomic step instead of key by key built aside
# (``_queue_small_user``); the step then writes at most 4 x SMALL_KEY members.
SMALL_KEY = 1000

# The atomic step as one Lua script call (Redis runs a script without
# interleaving other clients' commands, as it runs MULTI/EXEC). KEYS: the
# four keys of the account, then their build-aside leftovers. ARGV: the
# number of followees, then (score, id) pairs of the followees, then of the
# followers. Each id crosses the wire once (the sets are filled from the
# pairs) and each account costs the client one command instead of seven:
# the client's encoding of commands is most of a rebuild's time.
SMALL_USER_LUA = """
redis.call('UNLINK', unpack(KEYS))
local following = tonumber(ARGV[1])
local sides = {{1, 2, 2, 1 + 2 * following}, {3, 4, 2 + 2 * following, #ARGV}}
for _, side in ipairs(sides) do
  local first, last = side[3], side[4]
  if last > first then
    local members = {}
    for i = first + 1, last, 2 do members[#members + 1] = ARGV[i] end
    redis.call('SADD', KEYS[side[1]], unpack(members))
    redis.call('ZADD', KEYS[side[2]], unpack(ARGV, first, last))
  end
end
return 1
"""


@dataclass
class RebuildStats:
    """What a rebuild did: ``users`` walked, ``edges`` written, ``last_user_id`` reached."""

    users: int = 0
    edges: int = 0
    last_user_id: int = 0


def _tmp(key: str) -> str:
    # Same hash tag (the first {...}) as the live key, so RENAME stays in one slot.
    return key + ":rebuild"


# UNLINK the live key, RENAME the built one over it: one script, so readers
# never see the key missing, and the old value is freed in the background.
# KEYS: the live key, the built key (same hash tag: one slot on a cluster).
SWAP_LUA = """
redis.call('UNLINK', KEYS[1])
redis.call('RENAME', KEYS[2], KEYS[1])
return 1
"""


def _queue_swap(pipe: Pipe, tmp: str, key: str) -> None:
    """Queue an atomic, non-blocking replace of ``key`` by ``tmp`` (``SWAP_LUA``)."""
    queue_script(pipe, lua(SWAP_LUA), [key, tmp], [])


def _queue_set(pipe: Pipe, key: str, members: list[int]) -> None:
    tmp = _tmp(key)
    pipe.unlink(tmp)  # a leftover of an interrupted run may be big
    if not members:
        pipe.unlink(key)
        return
    for start in range(0, len(members), ADD_CHUNK):
        pipe.sadd(tmp, *members[start : start + ADD_CHUNK])
    _queue_swap(pipe, tmp, key)


def _queue_zset(pipe: Pipe, key: str, scored: list[tuple[int, int]]) -> None:
    tmp = _tmp(key)
    pipe.unlink(tmp)
    if not scored:
        pipe.unlink(key)
        return
    for start in range(0, len(scored), ADD_CHUNK):
        pipe.zadd(tmp, {str(member): score for member, score in scored[start : start + ADD_CHUNK]})
    _queue_swap(pipe, tmp, key)


def _queue_small_user(pipe: Pipe, user_id: int, following: list[tuple[int, int]], followers: list[tuple[int, int]]) -> None:
    """Queue the replacement of a small single-layout account's four keys in one atomic step
    (``SMALL_USER_LUA``: one command where build-aside-and-swap costs 24).
    """
    keys = [
        redis_keys.following_set_key(user_id),
        redis_keys.following_zset_key(user_id),
        redis_keys.followers_set_key(user_id),
        redis_keys.followers_zset_key(user_id),
    ]
    stale = keys + [_tmp(key) for key in keys]  # plus leftovers of an interrupted build-aside
    if not following and not followers:
        pipe.unlink(*stale)
        return
    args: list[int] = [len(following)]
    for member, score in following:
        args += (score, member)
    for member, score in followers:
        args += (score, member)
    queue_script(pipe, lua(SMALL_USER_LUA), stale, args)


def queue_user_keys(
    pipe: Pipe,
    user_id: int,
    following: list[tuple[int, int]],
    followers: list[tuple[int, int]],
    *,
    had_layout: bytes,
) -> None:
    """Queue commands replacing all follow-graph keys of ``user_id``.

    :param following: ``[(followee_id, score)]`` from the database.
    :param followers: ``[(follower_id, score)]`` from the database.
    :param had_layout: the followers layout live before the rebuild.
    """
    if (
        had_layout == layout.LAYOUT_SINGLE
        and len(following) <= SMALL_KEY
        and len(followers) <= SMALL_KEY
        and layout.desired_layout(followers=len(followers), layout=had_layout) == layout.LAYOUT_SINGLE
    ):
        _queue_small_user(pipe, user_id, following, followers)
    else:
        _queue_big_user(pipe, user_id, following, followers, had_layout=had_layout)
    queue_graph_version_change(pipe, [user_id])


def _queue_big_user(
    pipe: Pipe, user_id: int, following: list[tuple[int, int]], followers: list[tuple[int, int]], *, had_layout: bytes
) -> None:
    """``queue_user_keys`` of an account with a key too big for ``_queue_small_user`` (build aside and swap)."""
    _queue_set(pipe, redis_keys.following_set_key(user_id), [member for member, _ in following])
    _queue_zset(pipe, redis_keys.following_zset_key(user_id), following)
    shards = layout.shard_count()
    # Shards are written before the marker flips to them, and the old
    # layout is unlinked after, so readers never see the list empty.
    if layout.desired_layout(followers=len(followers), layout=had_layout) == layout.LAYOUT_SHARDED:
        by_shard: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for member, score in followers:
            by_shard[layout.follower_shard(member)].append((member, score))
        for shard in range(shards):
            _queue_set(pipe, redis_keys.followers_set_shard_key(user_id, shard), [m for m, _ in by_shard[shard]])
            _queue_zset(pipe, redis_keys.followers_zset_shard_key(user_id, shard), by_shard[shard])
        pipe.set(redis_keys.followers_layout_key(user_id), layout.LAYOUT_SHARDED)
        pipe.unlink(redis_keys.followers_set_key(user_id), redis_keys.followers_zset_key(user_id))
    else:
        _queue_set(pipe, redis_keys.followers_set_key(user_id), [member for member, _ in followers])
        _queue_zset(pipe, redis_keys.followers_zset_key(user_id), followers)
        if had_layout != layout.LAYOUT_SINGLE:
            pipe.unlink(redis_keys.followers_layout_key(user_id))
            for shard in range(shards):
                pipe.unlink(
                    redis_keys.followers_set_shard_key(user_id, shard),
                    redis_keys.followers_zset_shard_key(user_id, shard),
                )


def _write_users(
    client: redis.Redis,
    user_ids: list[int],
    following: dict[int, list[tuple[int, int]]],
    followers: dict[int, list[tuple[int, int]]],
) -> None:
    """Replace the keys of ``user_ids`` with these edges (one layout read, one write pipeline)."""
    if is_cluster(client):
        # The markers of different accounts are on different slots.
        marker_pipe = pipeline(client)
        for user_id in user_ids:
            marker_pipe.get(redis_keys.followers_layout_key(user_id))
        markers = marker_pipe.execute()
    else:
        # One MGET instead of a GET per account.
        markers = client.mget([redis_keys.followers_layout_key(user_id) for user_id in user_ids]) if user_ids else []
    pipe = pipeline(client)
    for user_id, marker in zip(user_ids, markers):
        queue_user_keys(
            pipe,
            user_id,
            following.get(user_id, []),
            followers.get(user_id, []),
            had_layout=layout.marker_layout(marker),
        )
    pipe.execute()


def rebuild_range(client: redis.Redis, low: int, high: int, *, inactive: set[int] | None = None) -> tuple[int, int]:
    """Rebuild every account with ``low < id <= high``.

    :param inactive: ids of deactivated accounts read at the start of the
        rebuild (``inactive_user_ids``); None: checked by a join per read.
    :returns: ``(users, edges)`` rebuilt; edges counted once (outgoing).
    """
    following: dict[int, list[tuple[int, int]]] = defaultdict(list)
    followers: dict[int, list[tuple[int, int]]] = defaultdict(list)
    outgoing = active_edges_in_range("follower_id", low, high, inactive=inactive)
    for follower_id, followee_id, score in outgoing:
        following[follower_id].append((followee_id, score))
    for follower_id, followee_id, score in active_edges_in_range("followee_id", low, high, inactive=inactive):
        followers[followee_id].append((follower_id, score))
    user_ids = list(User.objects.filter(pk__gt=low, pk__lte=high).values_list("pk", flat=True))
    _write_users(client, user_ids, following, followers)
    _write_controls(client, user_ids, low, high)
    return len(user_ids), len(outgoing)


def _write_controls(client: redis.Redis, user_ids: list[int], low: int, high: int) -> None:
    """Replace the block and mute sets of ``user_ids`` (ids in ``(low, high]``) with the database's."""
    hidden: dict[int, list[int]] = defaultdict(list)
    for blocker_id, blocked_id in Block.objects.filter(
        Q(blocker_id__gt=low, blocker_id__lte=high) | Q(blocked_id__gt=low, blocked_id__lte=high)
    ).values_list("blocker_id", "blocked_id"):
        hidden[blocker_id].append(blocked_id)
        hidden[blocked_id].append(blocker_id)
    muted: dict[int, list[tuple[int, int]]] = defaultdict(list)
    live = live_mutes()
    for mute in Mute.objects.filter(live, muter_id__gt=low, muter_id__lte=high).only("muter_id", "muted_id", "expires_at"):
        muted[mute.muter_id].append((mute.muted_id, mute_score(mute)))
    pipe = pipeline(client)
    for user_id in user_ids:
        if user_id not in hidden and user_id not in muted:
            # Most accounts: one command drops whatever an older mirror held.
            pipe.unlink(redis_keys.blocks_key(user_id), redis_keys.mutes_key(user_id))
            continue
        _queue_set(pipe, redis_keys.blocks_key(user_id), sorted(set(hidden.get(user_id, []))))
        _queue_zset(pipe, redis_keys.mutes_key(user_id), muted.get(user_id, []))
    pipe.execute()


def changed_since(started_at: datetime) -> QuerySet[OutboxEntry]:
    """Outbox pair entries a rebuild that started at ``started_at`` must re-apply."""
    # Applied before the start: committed before it, so every later read saw it. Any other may
    # have committed after the rebuild's read, or been swapped over. (``created_at`` would miss
    # a transaction that wrote its entry before the start and committed after the read.)
    return OutboxEntry.objects.filter(Q(applied_at__isnull=True) | Q(applied_at__gte=started_at), kind=OUTBOX_PAIR)


def _pairs(entries: QuerySet[OutboxEntry]) -> list[tuple[int, int]]:
    """The ``(follower_id, followee_id)`` pairs of pair entries."""
    return [(subject, followee) for subject, followee in entries.values_list("subject_id", "object_id") if followee is not None]


def _redis_neighbours(client: redis.Redis, user_id: int) -> tuple[set[int], set[int]]:
    """``(followees, followers)`` of ``user_id`` as its Redis keys have them now (SSCAN, every layout)."""
    followees = {int(m) for m in client.sscan_iter(redis_keys.following_set_key(user_id), count=ADD_CHUNK)}
    followers: set[int] = set()
    keys = layout.every_set_key(user_id)
    for key in keys:
        followers |= {int(m) for m in client.sscan_iter(key, count=ADD_CHUNK)}
    return followees, followers


@primary_reads()
def rebuild_user(user_id: int, *, chunk: int = ADD_CHUNK) -> int:
    """Rebuild one account's keys from the database (aside, swapped in; sharded when big), and its
    half of each neighbour's keys; drop edges the database lacks; re-apply follows committed
    meanwhile (``changed_since``).

    :returns: the number of edges of the account (both directions).
    :raises: as ``mirror_apply_pairs`` (Redis unreachable).
    """
    client = get_redis()
    started_at = timezone.now()
    stale_followees, stale_followers = _redis_neighbours(client, user_id)
    following = [(b, score) for _, b, score in active_edges_in_range("follower_id", user_id - 1, user_id)]
    followers = [(a, score) for a, _, score in active_edges_in_range("followee_id", user_id - 1, user_id)]
    _write_users(client, [user_id], {user_id: following}, {user_id: followers})
    for start in range(0, len(followers), chunk):
        pipe = pipeline(client)
        for follower_id, score in followers[start : start + chunk]:
            pipe.sadd(redis_keys.following_set_key(follower_id), str(user_id))
            pipe.zadd(redis_keys.following_zset_key(follower_id), {str(user_id): score})
        queue_graph_version_change(pipe, [follower_id for follower_id, _ in followers[start : start + chunk]])
        pipe.execute()
    stale_followees -= {b for b, _ in following}
    stale_followers -= {a for a, _ in followers}
    mirror_apply_pairs(
        [(user_id, b) for b, _ in following]
        + [(user_id, b) for b in sorted(stale_followees)]
        + [(a, user_id) for a in sorted(stale_followers)]
    )
    changed = changed_since(started_at).filter(Q(subject_id=user_id) | Q(object_id=user_id))
    mirror_apply_pairs(_pairs(changed))
    return len(following) + len(followers)


@primary_reads()
def rebuild_all(
    *,
    batch_users: int = 2000,
    start_after: int = 0,
    on_progress: Callable[[int, int], None] | None = None,
) -> RebuildStats:
    """Rebuild the whole mirror, ``batch_users`` accounts at a time (``users.selectors.id_ranges``); sets the sentinel at the end.

    :param start_after: resume after this user id (every step is idempotent).
    :param on_progress: called with ``(users_done_in_batch, edges_in_batch)``.
    :returns: ``RebuildStats``.
    """
    client = get_redis()
    started_at = timezone.now()
    stats = RebuildStats(last_user_id=start_after)
    top = User.objects.aggregate(top=Max("pk"))["top"] or 0
    # Read once: joining every edge to both accounts' rows was two thirds
    # of the database time. Accounts (de)activated after this read are
    # re-applied from their outbox entries at the end.
    inactive = inactive_user_ids()
    for low, high in id_ranges(start_after=start_after, top=top, batch_users=batch_users):
        users, edges = rebuild_range(client, low, high, inactive=inactive)
        stats.users += users
        stats.edges += edges
        stats.last_user_id = high
        if on_progress is not None:
            on_progress(users, edges)
    # Follows and unfollows that committed while we read older snapshots.
    mirror_apply_pairs(_pairs(changed_since(started_at)))
    # Blocks and mutes likewise.
    changed_controls = OutboxEntry.objects.filter(
        Q(applied_at__isnull=True) | Q(applied_at__gte=started_at), kind=OUTBOX_CONTROL, object_id__isnull=False
    )
    mirror_apply_controls(
        [(subject, other) for subject, other in changed_controls.values_list("subject_id", "object_id") if other is not None]
    )
    # Accounts deactivated or reactivated since the inactive ids were read.
    changed_users = OutboxEntry.objects.filter(Q(applied_at__isnull=True) | Q(applied_at__gte=started_at), kind=OUTBOX_USER)
    for user_id in sorted(set(changed_users.values_list("subject_id", flat=True))):
        mirror_apply_user(user_id)
    write_sentinels(client, int(timezone.now().timestamp() * 1000))
    return stats

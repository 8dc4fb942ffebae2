"""Rebuild the follow graph's Redis mirror from the database.

Keys are built aside under a temporary name carrying the same hash tag and
then swapped in with RENAME, so readers always see either the old or the
new complete set, never an empty or half-built one. Accounts are walked in
id ranges (bounded memory, resumable with ``start_after``). Follows that
commit while a rebuild runs are re-applied from the outbox at the end, so
they are kept.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Max
from django.utils import timezone

from . import redis_keys
from .mirror import follow_score, mirror_apply_pairs
from .models import Follow, MirrorOutbox
from .redis_client import get_redis

logger = logging.getLogger(__name__)
User = get_user_model()

# Members per SADD/ZADD command when building a key.
ADD_CHUNK = 5000


@dataclass
class RebuildStats:
    """What a rebuild did: ``users`` walked, ``edges`` written, ``last_user_id`` reached."""

    users: int = 0
    edges: int = 0
    last_user_id: int = 0


def _tmp(key: str) -> str:
    # Same hash tag (the first {...}) as the live key, so RENAME stays in one slot.
    return key + ":rebuild"


def _queue_set(pipe: Any, key: str, members: list[int]) -> None:
    tmp = _tmp(key)
    pipe.delete(tmp)
    if not members:
        pipe.unlink(key)
        return
    for start in range(0, len(members), ADD_CHUNK):
        pipe.sadd(tmp, *members[start : start + ADD_CHUNK])
    pipe.rename(tmp, key)


def _queue_zset(pipe: Any, key: str, scored: list[tuple[int, int]]) -> None:
    tmp = _tmp(key)
    pipe.delete(tmp)
    if not scored:
        pipe.unlink(key)
        return
    for start in range(0, len(scored), ADD_CHUNK):
        pipe.zadd(tmp, {str(member): score for member, score in scored[start : start + ADD_CHUNK]})
    pipe.rename(tmp, key)


def queue_user_keys(
    pipe: Any,
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
    _queue_set(pipe, redis_keys.following_set_key(user_id), [member for member, _ in following])
    _queue_zset(pipe, redis_keys.following_zset_key(user_id), following)
    shards = int(settings.FOLLOWERS_SHARDS)
    if len(followers) >= settings.FOLLOWERS_SHARD_THRESHOLD:
        by_shard: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for member, score in followers:
            by_shard[redis_keys.follower_shard(member)].append((member, score))
        for shard in range(shards):
            _queue_set(pipe, redis_keys.followers_set_shard_key(user_id, shard), [m for m, _ in by_shard[shard]])
            _queue_zset(pipe, redis_keys.followers_zset_shard_key(user_id, shard), by_shard[shard])
        pipe.set(redis_keys.followers_layout_key(user_id), redis_keys.LAYOUT_SHARDED)
        pipe.unlink(redis_keys.followers_set_key(user_id), redis_keys.followers_zset_key(user_id))
    else:
        _queue_set(pipe, redis_keys.followers_set_key(user_id), [member for member, _ in followers])
        _queue_zset(pipe, redis_keys.followers_zset_key(user_id), followers)
        if had_layout != redis_keys.LAYOUT_SINGLE:
            pipe.delete(redis_keys.followers_layout_key(user_id))
            for shard in range(shards):
                pipe.unlink(
                    redis_keys.followers_set_shard_key(user_id, shard),
                    redis_keys.followers_zset_shard_key(user_id, shard),
                )


def _edges(filter_field: str, low: int, high: int) -> list[tuple[int, int, Any]]:
    rows = Follow.objects.filter(
        **{f"{filter_field}__gt": low, f"{filter_field}__lte": high},
        follower__is_active=True,
        followee__is_active=True,
    )
    return list(rows.values_list("follower_id", "followee_id", "created_at"))


def rebuild_range(client: Any, low: int, high: int) -> tuple[int, int]:
    """Rebuild every account with ``low < id <= high``.

    :returns: ``(users, edges)`` rebuilt; edges counted once (outgoing).
    """
    following: dict[int, list[tuple[int, int]]] = defaultdict(list)
    followers: dict[int, list[tuple[int, int]]] = defaultdict(list)
    outgoing = _edges("follower_id", low, high)
    for follower_id, followee_id, created_at in outgoing:
        following[follower_id].append((followee_id, follow_score(created_at)))
    for follower_id, followee_id, created_at in _edges("followee_id", low, high):
        followers[followee_id].append((follower_id, follow_score(created_at)))
    user_ids = list(User.objects.filter(pk__gt=low, pk__lte=high).values_list("pk", flat=True))
    layout_pipe = client.pipeline(transaction=False)
    for user_id in user_ids:
        layout_pipe.get(redis_keys.followers_layout_key(user_id))
    layouts = layout_pipe.execute()
    pipe = client.pipeline(transaction=False)
    for user_id, layout in zip(user_ids, layouts):
        queue_user_keys(
            pipe,
            user_id,
            following.get(user_id, []),
            followers.get(user_id, []),
            had_layout=layout or redis_keys.LAYOUT_SINGLE,
        )
    pipe.execute()
    return len(user_ids), len(outgoing)


def rebuild_user(user_id: int) -> int:
    """Rebuild the keys of one account from the database.

    Its neighbours' keys are repaired pair by pair (race-safe), so the
    account's edges agree on both sides.

    :returns: the number of edges of the account (both directions).
    """
    client = get_redis()
    _, outgoing = rebuild_range(client, user_id - 1, user_id)
    pairs = list(Follow.objects.filter(follower_id=user_id).values_list("follower_id", "followee_id"))
    pairs += list(Follow.objects.filter(followee_id=user_id).values_list("follower_id", "followee_id"))
    mirror_apply_pairs(pairs)
    return len(pairs)


def rebuild_all(
    *,
    batch_users: int = 2000,
    start_after: int = 0,
    on_progress: Callable[[int, int], None] | None = None,
) -> RebuildStats:
    """Rebuild the whole mirror, ``batch_users`` account ids at a time.

    :param start_after: resume after this user id (a re-run after an
        interruption; every step is idempotent).
    :param on_progress: called with ``(users_done_in_batch, edges_in_batch)``.
    :returns: ``RebuildStats``; the sentinel key is set at the end.
    """
    client = get_redis()
    started_at = timezone.now()
    stats = RebuildStats(last_user_id=start_after)
    top = User.objects.aggregate(top=Max("pk"))["top"] or 0
    low = start_after
    while low < top:
        high = min(low + batch_users, top)
        users, edges = rebuild_range(client, low, high)
        stats.users += users
        stats.edges += edges
        stats.last_user_id = high
        if on_progress is not None:
            on_progress(users, edges)
        low = high
    # Follows and unfollows that committed while we read older snapshots.
    changed = MirrorOutbox.objects.filter(created_at__gte=started_at, kind=MirrorOutbox.KIND_PAIR)
    mirror_apply_pairs(changed.values_list("follower_id", "followee_id"))
    client.set(redis_keys.social_sentinel_key(), timezone.now().isoformat())
    return stats

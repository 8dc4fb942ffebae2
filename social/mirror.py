"""Writes of the follow graph's Redis mirror, always from the database's truth.

Every write here re-reads the database and writes the state it found, then
reads the database again and repeats if the state moved meanwhile. Two
appliers racing on one pair therefore converge: the last Redis write for a
pair is always followed by a database read that agrees with it (the same
"read, write, verify" idea as a compare-and-set loop). Nothing here trusts
what a caller believes the state is, so repeated, late or out-of-order
applications are harmless.

An edge is mirrored only while both accounts are active (deactivated
accounts vanish from every list, set and count).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from . import redis_keys
from .models import Follow, MirrorOutbox
from .redis_client import REDIS_ERRORS, get_redis, redis_available, redis_failed

logger = logging.getLogger(__name__)

Pair = tuple[int, int]  # (follower_id, followee_id)
MAX_VERIFY_ROUNDS = 5
PAIR_QUERY_CHUNK = 400


class MirrorNotConverged(RuntimeError):
    """The database kept changing under a mirror write for MAX_VERIFY_ROUNDS rounds."""


def follow_score(created_at: Any) -> int:
    """Redis score of a follow: its time in whole unix seconds."""
    return int(created_at.timestamp())


def followers_layouts(client: Any, user_ids: Iterable[int]) -> dict[int, bytes]:
    """Followers layout marker of each user (``LAYOUT_SINGLE`` when absent, ``LAYOUT_SHARDED``,
    ``LAYOUT_MIGRATING`` or ``LAYOUT_UNSHARDING``).

    :returns: ``{user_id: layout}`` read in one round trip.
    """
    ids = list(dict.fromkeys(int(u) for u in user_ids))
    if not ids:
        return {}
    pipe = client.pipeline(transaction=False)
    for user_id in ids:
        pipe.get(redis_keys.followers_layout_key(user_id))
    return {user_id: (value or redis_keys.LAYOUT_SINGLE) for user_id, value in zip(ids, pipe.execute())}


def queue_pair_write(
    pipe: Any, *, follower_id: int, followee_id: int, score: int | None, layout: bytes, scrub: bool = False
) -> None:
    """Queue on ``pipe`` the commands that make Redis show the pair as ``score``.

    ``score`` None removes the edge from all four structures. While a layout
    migration runs (``migrating``/``unsharding``) both layouts are written,
    so neither reads empty or stale when the marker flips. ``scrub`` (used
    when a write raced with a marker flip) also removes the follower from
    the layout that is no longer live, so a write that landed in the old
    keys after they were unlinked leaves no orphan key behind.
    """
    single = (redis_keys.followers_set_key(followee_id), redis_keys.followers_zset_key(followee_id))
    shard = redis_keys.follower_shard(follower_id)
    sharded = (
        redis_keys.followers_set_shard_key(followee_id, shard),
        redis_keys.followers_zset_shard_key(followee_id, shard),
    )
    targets: list[tuple[str, str]] = []
    if redis_keys.writes_single(layout):
        targets.append(single)
    if redis_keys.writes_shards(layout):
        targets.append(sharded)
    stale: list[tuple[str, str]] = []
    if scrub and layout == redis_keys.LAYOUT_SHARDED:
        stale.append(single)
    elif scrub and layout == redis_keys.LAYOUT_SINGLE:
        stale.append(sharded)
    if score is None:
        pipe.srem(redis_keys.following_set_key(follower_id), followee_id)
        pipe.zrem(redis_keys.following_zset_key(follower_id), followee_id)
        for set_key, zset_key in targets:
            pipe.srem(set_key, follower_id)
            pipe.zrem(zset_key, follower_id)
    else:
        pipe.sadd(redis_keys.following_set_key(follower_id), followee_id)
        pipe.zadd(redis_keys.following_zset_key(follower_id), {str(followee_id): score})
        for set_key, zset_key in targets:
            pipe.sadd(set_key, follower_id)
            pipe.zadd(zset_key, {str(follower_id): score})
    for set_key, zset_key in stale:
        pipe.srem(set_key, follower_id)
        pipe.zrem(zset_key, follower_id)


def pair_states(pairs: Sequence[Pair]) -> dict[Pair, int | None]:
    """Database state of each pair: its follow score, or None (absent or an inactive side).

    :returns: ``{(follower_id, followee_id): score_seconds | None}``; one
        query per PAIR_QUERY_CHUNK pairs.
    """
    states: dict[Pair, int | None] = {(int(a), int(b)): None for a, b in pairs}
    keys = list(states)
    for start in range(0, len(keys), PAIR_QUERY_CHUNK):
        chunk = keys[start : start + PAIR_QUERY_CHUNK]
        by_follower: dict[int, list[int]] = defaultdict(list)
        for follower_id, followee_id in chunk:
            by_follower[follower_id].append(followee_id)
        condition = Q()
        for follower_id, followee_ids in by_follower.items():
            condition |= Q(follower_id=follower_id, followee_id__in=followee_ids)
        rows = Follow.objects.filter(condition, follower__is_active=True, followee__is_active=True).values_list(
            "follower_id", "followee_id", "created_at"
        )
        for follower_id, followee_id, created_at in rows:
            states[(follower_id, followee_id)] = follow_score(created_at)
    return states


def mirror_apply_pairs(pairs: Iterable[Pair], *, layout_check: bool = True) -> int:
    """Make Redis show each pair exactly as the database has it, race-safely.

    Each round writes every pair with its followee's layout, then (in the
    same pipeline) re-reads each followee's layout marker and follower
    count; a pair is written again when its database row changed meanwhile
    or when a layout migration (``social.sharding``) flipped the marker
    between our read and our write, so no write is left only in keys that
    stopped being live.

    :param pairs: ``(follower_id, followee_id)`` tuples, duplicates allowed.
    :param layout_check: queue a layout migration for followees whose
        follower count crossed the sharding thresholds (the migration itself
        passes False).
    :returns: the number of distinct pairs written.
    :raises redis.exceptions.ConnectionError: (and the other REDIS_ERRORS)
        when Redis is unreachable; the caller keeps the outbox entry.
    :raises MirrorNotConverged: when the database kept changing.
    """
    wanted = list(dict.fromkeys((int(a), int(b)) for a, b in pairs))
    if not wanted:
        return 0
    client = get_redis()
    states = pair_states(wanted)
    todo = wanted
    moved: set[int] = set()
    observed: dict[int, tuple[int, bytes]] = {}  # followee -> (follower count, layout)
    for _ in range(MAX_VERIFY_ROUNDS):
        followees = list(dict.fromkeys(followee for _, followee in todo))
        layouts = followers_layouts(client, followees)
        pipe = client.pipeline(transaction=False)
        for follower_id, followee_id in todo:
            queue_pair_write(
                pipe,
                follower_id=follower_id,
                followee_id=followee_id,
                score=states[(follower_id, followee_id)],
                layout=layouts[followee_id],
                scrub=followee_id in moved,
            )
        for followee_id in followees:
            pipe.get(redis_keys.followers_layout_key(followee_id))
            for set_key, _ in redis_keys.followers_read_keys(followee_id, layouts[followee_id]):
                pipe.scard(set_key)
        replies = pipe.execute()
        tail = len(replies) - sum(1 + len(redis_keys.followers_read_keys(f, layouts[f])) for f in followees)
        moved = set()
        for followee_id in followees:
            now_layout = replies[tail] or redis_keys.LAYOUT_SINGLE
            width = len(redis_keys.followers_read_keys(followee_id, layouts[followee_id]))
            if now_layout != layouts[followee_id]:
                moved.add(followee_id)
            else:
                observed[followee_id] = (sum(int(n) for n in replies[tail + 1 : tail + 1 + width]), now_layout)
            tail += 1 + width
        again = pair_states(todo)
        todo = [pair for pair in todo if again[pair] != states[pair] or pair[1] in moved]
        states.update(again)
        if not todo:
            if layout_check:
                _layout_check(observed)
            return len(wanted)
    raise MirrorNotConverged(f"{len(todo)} pairs kept changing, e.g. {todo[:3]}")


def _layout_check(observed: dict[int, tuple[int, bytes]]) -> None:
    # Imported here because social.sharding builds on this module.
    from .sharding import layout_migrations_enqueue

    layout_migrations_enqueue(observed)


def user_pairs(user_id: int) -> list[Pair]:
    """Every pair touching ``user_id`` in the database or in Redis (both directions).

    Redis is consulted too so that edges of a deleted account (whose rows
    are gone) are still found and removed.
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
        layout = followers_layouts(client, [user_id])[user_id]
        follower_keys = (
            [redis_keys.followers_set_key(user_id)]
            if layout == redis_keys.LAYOUT_SINGLE
            else [redis_keys.followers_set_key(user_id)]
            + [redis_keys.followers_set_shard_key(user_id, s) for s in range(settings.FOLLOWERS_SHARDS)]
        )
        for key in follower_keys:
            for member in client.sscan_iter(key, count=1000):
                pairs.add((int(member), user_id))
    except REDIS_ERRORS as exc:  # the database's pairs are still applied later
        redis_failed(exc)
        raise
    return sorted(pairs)


def mirror_apply_user(user_id: int, *, chunk: int = 2000) -> int:
    """Re-apply every edge of ``user_id`` (after deactivation, reactivation or deletion).

    :returns: the number of pairs written, in chunks of ``chunk``.
    :raises: as ``mirror_apply_pairs``.
    """
    pairs = user_pairs(user_id)
    for start in range(0, len(pairs), chunk):
        mirror_apply_pairs(pairs[start : start + chunk])
    return len(pairs)


def outbox_apply(entries: Sequence[MirrorOutbox]) -> int:
    """Apply outbox ``entries`` to Redis and mark them applied.

    :returns: how many entries were applied.
    :raises: as ``mirror_apply_pairs``; entries then stay pending.
    """
    if not entries:
        return 0
    pairs = [(e.follower_id, e.followee_id) for e in entries if e.kind == MirrorOutbox.KIND_PAIR]
    mirror_apply_pairs([(a, b) for a, b in pairs if b is not None])
    for entry in entries:
        if entry.kind == MirrorOutbox.KIND_USER:
            mirror_apply_user(entry.follower_id)
    MirrorOutbox.objects.filter(id__in=[e.id for e in entries]).update(applied_at=timezone.now())
    return len(entries)


def outbox_apply_after_commit(entry_ids: Sequence[int]) -> None:
    """Best-effort immediate apply, run from ``transaction.on_commit``.

    A Redis failure is logged and opens the breaker; the entries stay
    pending for ``social_outbox_drain`` (Celery beat, every few seconds).
    While the breaker is open the write is not tried at all, so a follow
    never waits for a Redis timeout.
    """
    if not redis_available():
        return
    try:
        entries = list(MirrorOutbox.objects.filter(id__in=entry_ids, applied_at__isnull=True))
        outbox_apply(entries)
    except REDIS_ERRORS as exc:
        redis_failed(exc)
    except MirrorNotConverged:
        logger.warning("mirror did not converge for outbox entries %s; left for the drain", entry_ids)


def outbox_drain(*, batch: int = 500, max_batches: int | None = None) -> int:
    """Apply pending outbox entries oldest first until none are left.

    :param batch: entries per round (one database read, one Redis pipeline).
    :param max_batches: stop after this many rounds (None: until empty).
    :returns: the number of entries applied.
    :raises: Redis errors propagate so the Celery task can retry.
    """
    applied = 0
    rounds = 0
    while max_batches is None or rounds < max_batches:
        entries = list(MirrorOutbox.objects.filter(applied_at__isnull=True).order_by("id")[:batch])
        if not entries:
            break
        MirrorOutbox.objects.filter(id__in=[e.id for e in entries]).update(attempts=F("attempts") + 1)
        applied += outbox_apply(entries)
        rounds += 1
    return applied


def outbox_purge(*, older_than_seconds: int = 86400) -> int:
    """Delete applied entries older than ``older_than_seconds``; returns the count."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    deleted, _ = MirrorOutbox.objects.filter(applied_at__isnull=False, applied_at__lt=cutoff).delete()
    return deleted

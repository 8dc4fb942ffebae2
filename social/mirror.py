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
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.db.models import Q

from core.cluster import Pipe, pipeline
from core.errors import EntryNotApplied
from core.redis import REDIS_ERRORS, get_redis, redis_failed
from core.replica import primary_reads

from . import layout, redis_keys
from .models import Follow, follow_score
from .selectors import followers_layouts

logger = logging.getLogger(__name__)

Pair = tuple[int, int]  # (follower_id, followee_id)
MAX_VERIFY_ROUNDS = 5
PAIR_QUERY_CHUNK = 400


class MirrorNotConverged(EntryNotApplied):
    """The database kept changing under a mirror write for MAX_VERIFY_ROUNDS rounds."""


@dataclass(frozen=True)
class LayoutObservation:
    """What a mirror write saw of a followee: its follower ``count`` and its ``layout`` marker,
    read in the write's own pipeline (the caller decides whether a migration is due)."""

    count: int
    layout: bytes


def queue_pair_write(
    pipe: Pipe, *, follower_id: int, followee_id: int, score: int | None, layout_now: bytes, scrub: bool = False
) -> None:
    """Queue on ``pipe`` the commands that make Redis show the pair as ``score``.

    ``score`` None removes the edge from all four structures. The followee's
    keys are the ones ``layout.write_keys`` names for ``layout_now`` (both
    layouts while a migration runs). ``scrub`` (used when a write raced with
    a marker flip) also removes the follower from the layout that is no
    longer live, so a write that landed in the old keys after they were
    unlinked leaves no orphan key behind.
    """
    targets = layout.write_keys(followee_id, follower_id, layout_now)
    stale = layout.stale_keys(followee_id, follower_id, layout_now) if scrub else []
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


@primary_reads()
def mirror_apply_pairs(pairs: Iterable[Pair]) -> dict[int, LayoutObservation]:
    """Make Redis show each pair exactly as the database has it, race-safely.

    Each round writes every pair with its followee's layout, then (in the
    same pipeline) re-reads each followee's layout marker and follower
    count; a pair is written again when its database row changed meanwhile
    or when a layout migration (``social.sharding``) flipped the marker
    between our read and our write, so no write is left only in keys that
    stopped being live.

    :param pairs: ``(follower_id, followee_id)`` tuples, duplicates allowed.
    :returns: ``{followee_id: LayoutObservation}`` of the followees written,
        as the write pipeline saw them (``social.outbox`` decides from it
        whether a layout migration is due).
    :raises redis.exceptions.ConnectionError: (and the other REDIS_ERRORS)
        when Redis is unreachable; the caller keeps the outbox entry.
    :raises MirrorNotConverged: when the database kept changing.
    """
    wanted = list(dict.fromkeys((int(a), int(b)) for a, b in pairs))
    observed: dict[int, LayoutObservation] = {}
    if not wanted:
        return observed
    client = get_redis()
    states = pair_states(wanted)
    todo = wanted
    moved: set[int] = set()
    for _ in range(MAX_VERIFY_ROUNDS):
        followees = list(dict.fromkeys(followee for _, followee in todo))
        layouts = followers_layouts(client, followees)
        pipe = pipeline(client)
        for follower_id, followee_id in todo:
            queue_pair_write(
                pipe,
                follower_id=follower_id,
                followee_id=followee_id,
                score=states[(follower_id, followee_id)],
                layout_now=layouts[followee_id],
                scrub=followee_id in moved,
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
            else:
                count = sum(int(n) for n in replies[tail + 1 : tail + 1 + width])
                observed[followee_id] = LayoutObservation(count=count, layout=now_layout)
            tail += 1 + width
        again = pair_states(todo)
        todo = [pair for pair in todo if again[pair] != states[pair] or pair[1] in moved]
        states.update(again)
        if not todo:
            return observed
    raise MirrorNotConverged(f"{len(todo)} pairs kept changing, e.g. {todo[:3]}")


def user_pairs(user_id: int) -> list[Pair]:
    """Every pair touching ``user_id`` in the database or in Redis (both directions).

    Redis is consulted too (every follower layout at once) so that edges of
    a deleted account, whose rows are gone, are still found and removed.

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

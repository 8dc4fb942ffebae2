"""Writes of the Redis mirror of blocks and mutes, always from the database's truth.

A block either way puts each account in the other's ``blocks:`` set; a mute puts the muted in
the muter's ``mutes:`` sorted set, scored by expiry. As ``social.mirror``, a write re-reads the
database and writes again if the state moved, so racing appliers converge.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import redis
from django.db.models import Q

from core.cluster import pipeline
from core.errors import EntryNotApplied
from core.parsing import id_or_none
from core.redis import get_redis
from core.replica import primary_reads

from . import redis_keys
from .models import Block, Mute, live_mutes
from .visibility import now_ms as visibility_now_ms

Pair = tuple[int, int]  # two account ids, in either order
MAX_VERIFY_ROUNDS = 5


class ControlsNotConverged(EntryNotApplied):
    """The database kept changing under a controls write for MAX_VERIFY_ROUNDS rounds."""


@dataclass(frozen=True)
class PairControls:
    """What the database says of one pair ``(a, b)``: ``blocked`` (a block either way) and the
    expiry in unix ms of ``a``'s mute of ``b`` and of ``b``'s mute of ``a`` (None: no mute)."""

    blocked: bool
    a_mutes_b_until: int | None
    b_mutes_a_until: int | None


def mute_score(mute: Mute) -> int:
    """The Redis score of ``mute``: its expiry in unix ms, ``MUTE_FOREVER_MS`` without one."""
    if mute.expires_at is None:
        return redis_keys.MUTE_FOREVER_MS
    return int(mute.expires_at.timestamp() * 1000)


def pair_controls(pairs: Sequence[Pair]) -> dict[Pair, PairControls]:
    """The database's controls of each of ``pairs``: two queries for all of them.

    An expired mute counts as none.
    """
    if not pairs:
        return {}
    ids = {user_id for pair in pairs for user_id in pair}
    blocked: set[frozenset[int]] = set()
    for blocker_id, blocked_id in Block.objects.filter(blocker_id__in=ids, blocked_id__in=ids).values_list(
        "blocker_id", "blocked_id"
    ):
        blocked.add(frozenset((blocker_id, blocked_id)))
    mutes: dict[Pair, int] = {}
    live = live_mutes()
    for mute in Mute.objects.filter(live, muter_id__in=ids, muted_id__in=ids).only("muter_id", "muted_id", "expires_at"):
        mutes[(mute.muter_id, mute.muted_id)] = mute_score(mute)
    return {
        (a, b): PairControls(
            blocked=frozenset((a, b)) in blocked, a_mutes_b_until=mutes.get((a, b)), b_mutes_a_until=mutes.get((b, a))
        )
        for a, b in pairs
    }


def _write(pairs: dict[Pair, PairControls]) -> None:
    now_ms = visibility_now_ms()
    pipe = pipeline(get_redis())
    for (a, b), state in pairs.items():
        for one, other, until in ((a, b, state.a_mutes_b_until), (b, a, state.b_mutes_a_until)):
            if state.blocked:
                pipe.sadd(redis_keys.blocks_key(one), str(other))
            else:
                pipe.srem(redis_keys.blocks_key(one), str(other))
            mutes = redis_keys.mutes_key(one)
            if until is None:
                pipe.zrem(mutes, str(other))
            else:
                pipe.zadd(mutes, {str(other): until})
            # Expired mutes leave the set whenever it is written.
            pipe.zremrangebyscore(mutes, "-inf", now_ms)
    pipe.execute()


@primary_reads()
def mirror_apply_controls(pairs: Iterable[Pair]) -> int:
    """Make Redis show the blocks and mutes of ``pairs`` as the database has them.

    :returns: the number of pairs written.
    :raises ControlsNotConverged: the database kept changing (the entry stays pending).
    :raises: ``REDIS_ERRORS`` (the entry stays pending for the drain).
    """
    todo = sorted({(min(a, b), max(a, b)) for a, b in pairs if a != b})
    states = pair_controls(todo)
    written = len(todo)
    for _ in range(MAX_VERIFY_ROUNDS):
        _write({pair: states[pair] for pair in todo})
        again = pair_controls(todo)
        todo = [pair for pair in todo if again[pair] != states[pair]]
        states.update(again)
        if not todo:
            return written
    raise ControlsNotConverged(f"{len(todo)} pairs kept changing, e.g. {todo[:3]}")


def user_control_pairs(user_id: int) -> list[Pair]:
    """Every pair of ``user_id`` with a block or a mute in the database or in its Redis sets.

    :raises: ``REDIS_ERRORS``.
    """
    others: set[int] = set()
    others.update(Block.objects.filter(blocker_id=user_id).values_list("blocked_id", flat=True))
    others.update(Block.objects.filter(blocked_id=user_id).values_list("blocker_id", flat=True))
    others.update(Mute.objects.filter(muter_id=user_id).values_list("muted_id", flat=True))
    others.update(Mute.objects.filter(muted_id=user_id).values_list("muter_id", flat=True))
    client = get_redis()
    others.update(int(member) for member in client.sscan_iter(redis_keys.blocks_key(user_id), count=1000))
    others.update(int(member) for member, _ in client.zscan_iter(redis_keys.mutes_key(user_id), count=1000))
    return [(user_id, other) for other in sorted(others)]


def controls_differences(
    client: redis.Redis, user_ids: Sequence[int], garbage: list[tuple[str, str, bytes]] | None = None
) -> set[Pair]:
    """The pairs of ``user_ids`` whose blocks or mutes Redis shows otherwise than the database (the
    reconcile): one pipeline and two queries; expired mutes count as none, deleted accounts' ids as drift.

    :param garbage: gets ``(command, key, member)`` removing each member that is not a decimal id.
    :raises: ``REDIS_ERRORS``.
    """
    ids = sorted({int(user_id) for user_id in user_ids})
    if not ids:
        return set()
    pipe = pipeline(client)
    for user_id in ids:
        pipe.smembers(redis_keys.blocks_key(user_id))
        pipe.zrange(redis_keys.mutes_key(user_id), 0, -1, withscores=True)
    replies = pipe.execute()
    now_ms = visibility_now_ms()
    # Read after Redis: a block applied meanwhile then shows on both sides.
    hidden: dict[int, set[int]] = {user_id: set() for user_id in ids}
    for blocker_id, blocked_id in Block.objects.filter(Q(blocker_id__in=ids) | Q(blocked_id__in=ids)).values_list(
        "blocker_id", "blocked_id"
    ):
        if blocker_id in hidden:
            hidden[blocker_id].add(blocked_id)
        if blocked_id in hidden:
            hidden[blocked_id].add(blocker_id)
    muted: dict[int, dict[int, int]] = {user_id: {} for user_id in ids}
    live = live_mutes()
    for mute in Mute.objects.filter(live, muter_id__in=ids).only("muter_id", "muted_id", "expires_at"):
        muted[mute.muter_id][mute.muted_id] = mute_score(mute)
    drifted: set[Pair] = set()
    for index, user_id in enumerate(ids):
        in_redis: set[int] = set()
        for member in replies[2 * index]:
            other = id_or_none(member)
            if other is None:
                if garbage is not None:
                    garbage.append(("srem", redis_keys.blocks_key(user_id), member))
            else:
                in_redis.add(other)
        for other in in_redis ^ hidden[user_id]:
            drifted.add((min(user_id, other), max(user_id, other)))
        scores: dict[int, int] = {}
        for member, score in replies[2 * index + 1]:
            other = id_or_none(member)
            if other is None:
                if garbage is not None:
                    garbage.append(("zrem", redis_keys.mutes_key(user_id), member))
            elif score > now_ms:
                scores[other] = int(score)
        for other in set(scores) | set(muted[user_id]):
            if scores.get(other) != muted[user_id].get(other):
                drifted.add((min(user_id, other), max(user_id, other)))
    return drifted

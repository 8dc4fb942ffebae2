"""Move one account's followers between the single-key and the sharded layout, live.

``social.layout`` decides which layout an account wants; this module moves the data
(``followers_layout_migrate``: lock, marker, copy in slices, verify and repair from the
database, flip, UNLINK) so no read sees the list empty or doubled, and an interrupted
migration is safe and finished by a re-run. Design: docs/architecture.md#big-accounts.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import redis

from core.cluster import pipeline
from core.redis import RedisLock, RedisLockLost, get_redis

from . import layout, redis_keys
from .mirror import LayoutObservation, mirror_apply_pairs, queue_graph_version_change

logger = logging.getLogger(__name__)

# Members per ZSCAN/SSCAN step while copying and verifying (a COUNT hint).
SLICE_SIZE = 1000
# The migration lock's lifetime (ms), renewed at every slice.
LOCK_TTL_MS = 60_000
# Verification rounds over the members that differed.
MAX_REPAIR_ROUNDS = 3
# Pairs per mirror_apply_pairs call during repair.
REPAIR_CHUNK = 2000

KeyPair = layout.KeyPair
StepCallback = Callable[[str], None]


class LayoutMigrationLost(RedisLockLost):
    """Another process took the account's migration lock (ours expired); this run stopped."""


@dataclass
class MigrationResult:
    """What ``followers_layout_migrate`` did for ``user_id``: ``from_layout``/``to_layout`` (marker
    values), ``followers`` at the start, ``copied`` (ZSCAN may count one twice), ``repaired``
    from the database, ``skipped`` ("locked" or "settled").
    """

    user_id: int
    from_layout: bytes
    to_layout: bytes
    followers: int = 0
    copied: int = 0
    repaired: int = 0
    skipped: str = ""
    after: LayoutObservation | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "user_id": self.user_id,
            "from_layout": self.from_layout.decode(),
            "to_layout": self.to_layout.decode(),
            "followers": self.followers,
            "copied": self.copied,
            "repaired": self.repaired,
            "skipped": self.skipped,
        }


def followers_layout_state(client: redis.Redis, user_id: int) -> LayoutObservation:
    """The follower count and layout marker of ``user_id`` as readers see them (two round trips)."""
    live = layout.marker_layout(client.get(redis_keys.followers_layout_key(user_id)))
    pipe = pipeline(client)
    for set_key, _ in layout.read_keys(user_id, live):
        pipe.scard(set_key)
    return LayoutObservation(count=sum(int(n) for n in pipe.execute()), layout=live)


# --- migration ------------------------------------------------------------


class _Lock(RedisLock):
    """The migration lock of one account, renewed at every slice."""

    def __init__(self, client: redis.Redis, user_id: int) -> None:
        super().__init__(client=client, key=redis_keys.followers_migration_lock_key(user_id), milliseconds=LOCK_TTL_MS)

    def renew(self) -> None:
        try:
            super().renew()
        except RedisLockLost as exc:
            raise LayoutMigrationLost(str(exc)) from exc


def _placement(user_id: int, to_shards: bool) -> Callable[[int], KeyPair]:
    """Where a follower lives in the layout the copy writes (or reads, when reversed)."""
    settled = layout.LAYOUT_SHARDED if to_shards else layout.LAYOUT_SINGLE
    return lambda member: layout.home_keys(user_id, member)[settled]


def _scan_slices(client: redis.Redis, key: str, *, zset: bool, slice_size: int) -> Iterable[list[tuple[int, int]]]:
    """Yield ``[(member, score)]`` slices of ``key`` (score 0 for a set) with ZSCAN/SSCAN."""
    cursor = 0
    while True:
        if zset:
            cursor, rows = client.zscan(key, cursor, count=slice_size)
            items = [(int(member), int(score)) for member, score in rows]
        else:
            cursor, members = client.sscan(key, cursor, count=slice_size)
            items = [(int(member), 0) for member in members]
        if items:
            yield items
        if int(cursor) == 0:
            return


def _copy(
    client: redis.Redis,
    lock: _Lock,
    sources: list[KeyPair],
    place: Callable[[int], KeyPair],
    *,
    slice_size: int,
    step: StepCallback,
) -> int:
    """Copy every source sorted set into its new keys (ZADD + SADD), one slice per pipeline."""
    copied = 0
    for _, zset_key in sources:
        for items in _scan_slices(client, zset_key, zset=True, slice_size=slice_size):
            groups: dict[KeyPair, list[tuple[int, int]]] = defaultdict(list)
            for member, score in items:
                groups[place(member)].append((member, score))
            lock.renew()
            pipe = pipeline(client)
            for (set_key, dest_zset), rows in groups.items():
                pipe.zadd(dest_zset, {str(member): score for member, score in rows})
                pipe.sadd(set_key, *[str(member) for member, _ in rows])
            pipe.execute()
            copied += len(items)
            step("copy")
    return copied


def _differences(
    client: redis.Redis,
    lock: _Lock,
    sides: list[tuple[list[KeyPair], Callable[[int], KeyPair]]],
    *,
    slice_size: int,
    step: StepCallback,
) -> set[int]:
    """Members whose presence or score differs between the two layouts.

    :param sides: for each layout, its keys and where a member lives in the
        other layout; every key of both layouts is scanned once.
    """
    differ: set[int] = set()
    for keys, other in sides:
        for set_key, zset_key in keys:
            for zset in (True, False):
                for items in _scan_slices(client, zset_key if zset else set_key, zset=zset, slice_size=slice_size):
                    groups: dict[KeyPair, list[tuple[int, int]]] = defaultdict(list)
                    for member, score in items:
                        groups[other(member)].append((member, score))
                    lock.renew()
                    pipe = pipeline(client)
                    plan = list(groups.items())
                    for (other_set, other_zset), rows in plan:
                        members = [str(member) for member, _ in rows]
                        if zset:
                            pipe.zmscore(other_zset, members)
                        else:
                            pipe.smismember(other_set, members)
                    for (_, rows), reply in zip(plan, pipe.execute()):
                        for (member, score), found in zip(rows, reply):
                            if (zset and (found is None or int(found) != score)) or (not zset and not found):
                                differ.add(member)
                    step("verify")
    return differ


def _members_agree(
    client: redis.Redis, members: list[int], old: Callable[[int], KeyPair], new: Callable[[int], KeyPair]
) -> set[int]:
    """Of ``members``, those that still differ between the layouts (a targeted re-check)."""
    pipe = pipeline(client)
    for member in members:
        for place in (old, new):
            set_key, zset_key = place(member)
            pipe.sismember(set_key, str(member))
            pipe.zscore(zset_key, str(member))
    replies = pipe.execute()
    differ = set()
    for index, member in enumerate(members):
        in_old, score_old, in_new, score_new = replies[4 * index : 4 * index + 4]
        if (
            bool(in_old) != bool(in_new)
            or score_old != score_new
            or bool(in_old) != (score_old is not None)
            or bool(in_new) != (score_new is not None)
        ):
            differ.add(member)
    return differ


def _repair(
    client: redis.Redis, user_id: int, differ: set[int], old: Callable[[int], KeyPair], new: Callable[[int], KeyPair]
) -> int:
    """Re-apply differing members from the database until both layouts agree on them."""
    repaired = 0
    todo = sorted(differ)
    for _ in range(MAX_REPAIR_ROUNDS):
        if not todo:
            break
        for start in range(0, len(todo), REPAIR_CHUNK):
            chunk = todo[start : start + REPAIR_CHUNK]
            mirror_apply_pairs([(member, user_id) for member in chunk])
        repaired += len(todo)
        todo = sorted(_members_agree(client, todo, old, new))
    if todo:
        # Writers write both layouts now, so this only happens while the
        # database keeps changing under these pairs; they converge through
        # their own outbox entries.
        logger.warning("layout migration of %s: %d members still moving, e.g. %s", user_id, len(todo), todo[:3])
    return repaired


def followers_layout_migrate(
    *,
    user_id: int,
    target: bytes | None = None,
    slice_size: int = SLICE_SIZE,
    on_step: StepCallback | None = None,
) -> MigrationResult:
    """Move ``user_id``'s followers to the layout its count asks for, with reads live throughout.

    :param target: ``LAYOUT_SHARDED`` or ``LAYOUT_SINGLE`` to force a layout; None follows
        ``layout.desired_layout``.
    :param slice_size: members per ZSCAN/SSCAN step (COUNT hint).
    :param on_step: called with the phase name ("marked", "copy", "verify", "verified",
        "flipped", "cleaned").
    :returns: a ``MigrationResult``; ``after`` is the count and layout when it ended (follows
        meanwhile may ask for the other layout: the caller decides).
    :raises LayoutMigrationLost: the lock expired and another run took it.
    :raises redis.exceptions.ConnectionError: (and the other REDIS_ERRORS); the marker stays
        ``migrating``/``unsharding``, which is safe, and a re-run finishes the job.
    """
    client = get_redis()
    step = on_step or (lambda phase: None)
    lock = _Lock(client, user_id)
    state = followers_layout_state(client, user_id)
    goal = target or layout.desired_layout(followers=state.count, layout=state.layout)
    result = MigrationResult(user_id=user_id, from_layout=state.layout, to_layout=goal, followers=state.count)
    if not lock.acquire():
        result.skipped = "locked"
        return result
    try:
        state = followers_layout_state(client, user_id)  # again, under the lock
        result.from_layout, result.followers = state.layout, state.count
        if state.layout == goal:
            result.skipped = "settled"
        else:
            _migrate(client, lock, user_id, state.layout, goal, result, slice_size=slice_size, step=step)
    finally:
        lock.release()
        client.unlink(redis_keys.followers_migration_queued_key(user_id))
    result.after = followers_layout_state(client, user_id)
    if not result.skipped:
        logger.info("followers layout migration: %s", result.as_dict())
    return result


def _migrate(
    client: redis.Redis,
    lock: _Lock,
    user_id: int,
    live: bytes,
    goal: bytes,
    result: MigrationResult,
    *,
    slice_size: int,
    step: StepCallback,
) -> None:
    to_shards = goal == layout.LAYOUT_SHARDED
    single, shards = [layout.single_keys(user_id)], layout.all_shard_keys(user_id)
    sources, dests = (single, shards) if to_shards else (shards, single)
    marker_key = redis_keys.followers_layout_key(user_id)
    reverse = layout.LAYOUT_UNSHARDING if to_shards else layout.LAYOUT_MIGRATING
    if live != reverse:
        # Readers still read ``sources``. (When the marker says a migration
        # the other way was under way, readers read what is now the target
        # and writers wrote both layouts: only the flip is left to do.)
        during = layout.LAYOUT_MIGRATING if to_shards else layout.LAYOUT_UNSHARDING
        if live != during:
            # Leftovers of an earlier run or of a late writer; nobody reads them.
            for pair in dests:
                client.unlink(*pair)
            client.set(marker_key, during)
        step("marked")
        new_place = _placement(user_id, to_shards)
        old_place = _placement(user_id, not to_shards)
        result.copied = _copy(client, lock, sources, new_place, slice_size=slice_size, step=step)
        differ = _differences(client, lock, [(sources, new_place), (dests, old_place)], slice_size=slice_size, step=step)
        result.repaired = _repair(client, user_id, differ, old_place, new_place)
        step("verified")
    # The flip: one command, so every reader switches at once.
    pipe = pipeline(client)
    if to_shards:
        pipe.set(marker_key, layout.LAYOUT_SHARDED)
    else:
        pipe.unlink(marker_key)
    queue_graph_version_change(pipe, [user_id])  # readers now read other keys
    pipe.execute()
    step("flipped")
    for pair in sources:
        client.unlink(*pair)  # one slot per UNLINK (a pair shares its hash tag)
    step("cleaned")

"""Reconcile: find and repair drift between the database (the truth) and the follow mirror.

Accounts are walked in id order, ``batch_users`` at a time (resumable after any id); each
side is checked cheap first (``counts``, ``digest`` or ``full``) and diffed member by member
only when it differs; repair goes through ``mirror_apply_pairs`` (the database wins).
Figures count (edge, side). Checks: docs/operations.md#management-commands.
"""

from __future__ import annotations

import hashlib
import logging
import random
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import redis
from django.db import connection
from django.db.models import Max

from core.cluster import is_cluster, lua, pipeline
from core.parsing import id_or_none
from core.redis import get_redis
from core.replica import primary_reads
from core.runs import recorded_run
from users.models import User
from users.selectors import id_ranges

from . import layout, redis_keys, selectors
from .control_mirror import controls_differences, mirror_apply_controls
from .mirror import mirror_apply_pairs, queue_graph_version_change
from .models import Follow, ReconcileRun, follow_score
from .selectors import followers_layouts

logger = logging.getLogger(__name__)

Pair = tuple[int, int]
CHECK_COUNTS = "counts"
CHECK_DIGEST = "digest"
CHECK_FULL = "full"
CHECKS = (CHECK_COUNTS, CHECK_DIGEST, CHECK_FULL)
# Members per ZRANGE/SSCAN step when reading a key, so no single command
# walks a huge key while other clients wait (Redis runs one command at a time).
SLICE = 5000

FOLLOWING = "following"
FOLLOWERS = "followers"


@dataclass
class ReconcileReport:
    """Drift figures of one run: ``users_checked``/``users_drifted``, ``edges_checked``,
    ``edges_missing``/``edges_extra``/``scores_wrong`` per (edge, side), ``pairs_repaired``
    (0 in a dry run), ``controls_drifted``/``controls_repaired`` (block and mute pairs, non-id
    members), ``last_user_id`` (the checkpoint: every id up to it was walked).
    """

    users_checked: int = 0
    users_drifted: int = 0
    edges_checked: int = 0
    edges_missing: int = 0
    edges_extra: int = 0
    scores_wrong: int = 0
    pairs_repaired: int = 0
    controls_drifted: int = 0
    controls_repaired: int = 0
    last_user_id: int = 0
    drifted_pairs: set[Pair] = field(default_factory=set, repr=False)
    # Pairs whose blocks or mutes Redis shows wrong (``social.control_mirror``).
    drifted_controls: set[Pair] = field(default_factory=set, repr=False)
    # (command, key, member) removing members that are not decimal ids.
    garbage: list[tuple[str, str, bytes]] = field(default_factory=list, repr=False)
    garbage_owners: set[int] = field(default_factory=set, repr=False)  # the accounts of ``garbage``'s keys
    # The same, from block and mute sets.
    controls_garbage: list[tuple[str, str, bytes]] = field(default_factory=list, repr=False)

    def as_dict(self) -> dict[str, int]:
        """The figures as ``{name: int}`` (no pair lists)."""
        data = asdict(self)
        data.pop("drifted_pairs")
        data.pop("drifted_controls")
        data.pop("garbage")
        data.pop("garbage_owners")
        data.pop("controls_garbage")
        return data

    @property
    def drift(self) -> int:
        """``edges_missing + edges_extra + scores_wrong``."""
        return self.edges_missing + self.edges_extra + self.scores_wrong


def edge_digest(other_id: int | str, score: int | str) -> int:
    """CRC32 of ``"<other_id>:<score>"``, the term one edge adds to a side's digest.

    MariaDB computes the same value with ``CRC32(CONCAT(other_id, ':', score))``.
    """
    return zlib.crc32(f"{other_id}:{score}".encode())


def _score_text(score: float) -> str:
    # A follow time is a whole second; anything else must not match.
    return str(int(score)) if float(score).is_integer() else repr(float(score))


# --- database side --------------------------------------------------------


@dataclass
class SideFigures:
    """Count and digest of one side of one account."""

    count: int = 0
    digest: int = 0


def _sql_aggregates(own: str, other: str, low: int, high: int, ids: Sequence[int] | None) -> dict[int, SideFigures]:
    follow_table = connection.ops.quote_name(Follow._meta.db_table)
    user_table = connection.ops.quote_name(User._meta.db_table)
    params: list[Any] = [low, high]
    only = ""
    if ids is not None:
        only = f" AND f.{own} IN ({', '.join(['%s'] * len(ids))})"
        params.extend(ids)
    # Index range scan on (own, created_at, other); the two primary-key
    # joins drop edges of deactivated accounts, as every reader does.
    sql = (
        f"SELECT f.{own}, COUNT(*), "
        f"SUM(CRC32(CONCAT(f.{other}, ':', TIMESTAMPDIFF(SECOND, '1970-01-01 00:00:00', f.created_at)))) "
        f"FROM {follow_table} f JOIN {user_table} a ON a.id = f.follower_id JOIN {user_table} b ON b.id = f.followee_id "
        f"WHERE f.{own} > %s AND f.{own} <= %s AND a.is_active AND b.is_active{only} GROUP BY f.{own}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {int(user_id): SideFigures(int(count), int(digest or 0)) for user_id, count, digest in cursor.fetchall()}


def _python_aggregates(own: str, other: str, low: int, high: int, ids: Sequence[int] | None) -> dict[int, SideFigures]:
    # Databases without CRC32 (SQLite, the embedded demo): same figures from the rows.
    rows = Follow.objects.filter(follower__is_active=True, followee__is_active=True, **{f"{own}__gt": low, f"{own}__lte": high})
    if ids is not None:
        rows = rows.filter(**{f"{own}__in": list(ids)})
    figures: dict[int, SideFigures] = defaultdict(SideFigures)
    for user_id, other_id, created_at in rows.values_list(own, other, "created_at").iterator(chunk_size=5000):
        side = figures[user_id]
        side.count += 1
        side.digest += edge_digest(other_id, follow_score(created_at))
    return dict(figures)


def database_aggregates(direction: str, low: int, high: int, ids: Sequence[int] | None = None) -> dict[int, SideFigures]:
    """Per-account count and digest of one side, for accounts ``low < id <= high`` (or only ``ids``).

    :param direction: ``FOLLOWING`` (edges the account makes) or ``FOLLOWERS``.
    :returns: ``{user_id: SideFigures}``; accounts without edges are absent.
    """
    own, other = ("follower_id", "followee_id") if direction == FOLLOWING else ("followee_id", "follower_id")
    if connection.vendor == "mysql":
        return _sql_aggregates(own, other, low, high, ids)
    return _python_aggregates(own, other, low, high, ids)


def database_edges(direction: str, user_ids: Sequence[int]) -> dict[int, dict[int, int]]:
    """Active edges of one side of ``user_ids``: ``{user_id: {other_id: score_seconds}}``."""
    own, other = ("follower_id", "followee_id") if direction == FOLLOWING else ("followee_id", "follower_id")
    found: dict[int, dict[int, int]] = defaultdict(dict)
    rows = Follow.objects.filter(follower__is_active=True, followee__is_active=True, **{f"{own}__in": list(user_ids)})
    for user_id, other_id, created_at in rows.values_list(own, other, "created_at").iterator(chunk_size=5000):
        found[user_id][other_id] = follow_score(created_at)
    return found


# --- Redis side -----------------------------------------------------------


@dataclass
class RedisSide:
    """What Redis holds for one side of one account: ``keys`` (``(set_key, zset_key)`` pairs);
    ``set_count``, ``zset_count``, ``common`` (ZINTERCARD) summed over them; ``zset`` when read and its ``digest``.
    """

    keys: list[tuple[str, str]]
    set_count: int = 0
    zset_count: int = 0
    common: int = 0
    zset: dict[bytes, float] | None = None
    digest: int = 0


def _side_keys(user_id: int, direction: str, live: bytes) -> list[tuple[str, str]]:
    if direction == FOLLOWING:
        return [(redis_keys.following_set_key(user_id), redis_keys.following_zset_key(user_id))]
    return layout.read_keys(user_id, live)


def read_cardinalities(client: redis.Redis, user_ids: Sequence[int]) -> dict[tuple[int, str], RedisSide]:
    """SCARD, ZCARD and ZINTERCARD of both sides of ``user_ids`` in one pipeline.

    :returns: ``{(user_id, direction): RedisSide}``.
    :raises redis.exceptions.RedisError: Redis unreachable (or older than 7.0).
    """
    layouts = followers_layouts(client, user_ids)
    sides = {
        (user_id, direction): RedisSide(keys=_side_keys(user_id, direction, layouts[user_id]))
        for user_id in user_ids
        for direction in (FOLLOWING, FOLLOWERS)
    }
    pipe = pipeline(client)
    for side in sides.values():
        for set_key, zset_key in side.keys:
            pipe.scard(set_key)
            pipe.zcard(zset_key)
            pipe.zintercard(2, [zset_key, set_key])
    replies = iter(pipe.execute())
    for side in sides.values():
        for _ in side.keys:
            side.set_count += int(next(replies))
            side.zset_count += int(next(replies))
            side.common += int(next(replies))
    return sides


def read_zsets(client: redis.Redis, sides: Iterable[RedisSide]) -> None:
    """Fill ``zset`` and ``digest`` of each side, reading every zset in ``SLICE``-member slices."""
    wanted = list(sides)
    pipe = pipeline(client)
    plan: list[RedisSide] = []
    for side in wanted:
        side.zset = {}
        side.digest = 0
        # The slice count comes from ZCARD read a moment ago; members added
        # since then are picked up by the last slice's open end.
        for _, zset_key in side.keys:
            slices = max(1, -(-side.zset_count // SLICE))
            for index in range(slices):
                stop = -1 if index == slices - 1 else (index + 1) * SLICE - 1
                pipe.zrange(zset_key, index * SLICE, stop, withscores=True)
                plan.append(side)
    for side, reply in zip(plan, pipe.execute()):
        assert side.zset is not None
        for member, score in reply:
            side.zset[member] = score
    for side in wanted:
        assert side.zset is not None
        side.digest = sum(edge_digest(_member_text(m), _score_text(s)) for m, s in side.zset.items())


def _member_text(member: bytes) -> str:
    return member.decode("utf-8", "replace")


def read_sets(client: redis.Redis, sides: Sequence[RedisSide]) -> list[set[bytes]]:
    """Members of each side's sets: SMEMBERS in one pipeline for small sides, SSCAN in ``SLICE``
    steps for big ones. :returns: one set per side, in order."""
    found: list[set[bytes]] = [set() for _ in sides]
    pipe = pipeline(client)
    plan: list[int] = []
    for index, side in enumerate(sides):
        for set_key, _ in side.keys:
            if side.set_count > SLICE:
                found[index].update(client.sscan_iter(set_key, count=SLICE))
            else:
                pipe.smembers(set_key)
                plan.append(index)
    for index, reply in zip(plan, pipe.execute()):
        found[index].update(reply)
    return found


# --- comparison -----------------------------------------------------------


def _cheap_equal(side: RedisSide, truth: SideFigures, check: str) -> bool:
    if not (side.set_count == side.zset_count == side.common == truth.count):
        return False
    if check == CHECK_DIGEST:
        return side.digest == truth.digest
    return True


def _as_id(member: bytes) -> int | None:
    return id_or_none(member)


def diff_side(
    user_id: int,
    direction: str,
    truth: dict[int, int],
    members: set[bytes],
    scored: dict[bytes, float],
    side: RedisSide,
    report: ReconcileReport,
) -> bool:
    """Diff one side member by member into ``report``; returns whether it drifted."""

    def pair(other: int) -> Pair:
        return (user_id, other) if direction == FOLLOWING else (other, user_id)

    found = report.drift
    set_ids: set[int] = set()
    zset_ids: dict[int, float] = {}
    junk: set[bytes] = set()
    for member in members:
        other = _as_id(member)
        if other is None:
            junk.add(member)
            report.garbage.extend(("srem", set_key, member) for set_key, _ in side.keys)
            report.garbage_owners.add(user_id)
        else:
            set_ids.add(other)
    for member, score in scored.items():
        other = _as_id(member)
        if other is None:
            junk.add(member)
            report.garbage.extend(("zrem", zset_key, member) for _, zset_key in side.keys)
        else:
            zset_ids[other] = score
    # A member that is not a plain decimal id ("042", "ff:42") is never
    # right: one extra edge per such member and side.
    report.edges_extra += len(junk)
    for other, score in truth.items():
        if other not in set_ids or other not in zset_ids:
            report.edges_missing += 1
            report.drifted_pairs.add(pair(other))
        elif zset_ids[other] != score:
            report.scores_wrong += 1
            report.drifted_pairs.add(pair(other))
    for other in (set_ids | set(zset_ids)) - set(truth):
        report.edges_extra += 1
        report.drifted_pairs.add(pair(other))
    return report.drift > found


def reconcile_users(
    client: redis.Redis,
    low: int,
    high: int,
    user_ids: Sequence[int],
    report: ReconcileReport,
    *,
    check: str,
    whole_range: bool,
) -> None:
    """Check the accounts ``user_ids`` (all in ``low < id <= high``) and add their drift to ``report``.

    :param check: ``CHECK_COUNTS``, ``CHECK_DIGEST`` or ``CHECK_FULL``.
    :param whole_range: ``user_ids`` are every account of the range (the
        aggregate queries then need no id list).
    """
    if not user_ids:
        return
    wanted = set(user_ids)
    only = None if whole_range else sorted(wanted)
    sides = read_cardinalities(client, sorted(wanted))
    if check == CHECK_DIGEST:
        read_zsets(client, sides.values())
    suspects: dict[str, list[int]] = {FOLLOWING: [], FOLLOWERS: []}
    for direction in (FOLLOWING, FOLLOWERS):
        aggregates = database_aggregates(direction, low, high, only) if check != CHECK_FULL else {}
        for user_id in sorted(wanted):
            if direction == FOLLOWING and check != CHECK_FULL:
                report.edges_checked += aggregates.get(user_id, SideFigures()).count
            if check == CHECK_FULL or not _cheap_equal(
                sides[(user_id, direction)], aggregates.get(user_id, SideFigures()), check
            ):
                suspects[direction].append(user_id)
    drifted: set[int] = set()
    for direction, suspect_ids in suspects.items():
        if not suspect_ids:
            continue
        truth = database_edges(direction, suspect_ids)
        if check == CHECK_FULL and direction == FOLLOWING:
            report.edges_checked += sum(len(edges) for edges in truth.values())
        # Re-read the suspects' zsets after the database rows, so a follow
        # applied since the cheap pass is not reported as drift. (A write
        # that commits between the two reads can still be reported; its
        # repair is a harmless re-apply from the database.)
        suspect_sides = [sides[(u, direction)] for u in suspect_ids]
        read_zsets(client, suspect_sides)
        for user_id, side, members in zip(suspect_ids, suspect_sides, read_sets(client, suspect_sides)):
            assert side.zset is not None
            if diff_side(user_id, direction, truth.get(user_id, {}), members, side.zset, side, report):
                drifted.add(user_id)
    junk = len(report.controls_garbage)
    controls = controls_differences(client, sorted(wanted), report.controls_garbage)
    # A member that is not an id is one drifted entry of its set.
    report.controls_drifted += len(controls) + len(report.controls_garbage) - junk
    report.drifted_controls.update(controls)
    drifted.update(user_id for pair in controls for user_id in pair if user_id in wanted)
    report.users_checked += len(wanted)
    report.users_drifted += len(drifted)


def repair_report(client: redis.Redis, report: ReconcileReport) -> None:
    """Apply the drifted pairs from the database and drop non-id members; clears both lists."""
    if report.garbage or report.controls_garbage:
        pipe = pipeline(client)
        for command, key, member in [*report.garbage, *report.controls_garbage]:
            if command == "srem":
                pipe.srem(key, member)
            else:
                pipe.zrem(key, member)
        queue_graph_version_change(pipe, report.garbage_owners)
        pipe.execute()
        report.controls_repaired += len(report.controls_garbage)
        report.garbage.clear()
        report.garbage_owners.clear()
        report.controls_garbage.clear()
    if report.drifted_pairs:
        mirror_apply_pairs(sorted(report.drifted_pairs))
        report.pairs_repaired += len(report.drifted_pairs)
        report.drifted_pairs.clear()
    if report.drifted_controls:
        mirror_apply_controls(sorted(report.drifted_controls))
        report.pairs_repaired += len(report.drifted_controls)
        report.controls_repaired += len(report.drifted_controls)
        report.drifted_controls.clear()


def sampled(user_ids: Iterable[int], fraction: float, rng: random.Random) -> list[int]:
    """The ids kept by a ``fraction`` sample (1.0 keeps all)."""
    if fraction >= 1.0:
        return list(user_ids)
    return [user_id for user_id in user_ids if rng.random() < fraction]


@primary_reads()
def reconcile_all(
    *,
    repair: bool = True,
    repair_drift: bool | None = None,
    user_id: int | None = None,
    start_after: int = 0,
    batch_users: int = 1000,
    check: str = CHECK_DIGEST,
    sample: float = 1.0,
    seed: int | None = None,
    on_progress: Callable[[int], None] | None = None,
    on_batch: Callable[[ReconcileReport], None] | None = None,
) -> ReconcileReport:
    """Reconcile every account (or one ``user_id``, or a ``sample``) and repair unless told not to.

    :param repair: False for a dry run; ``repair_drift`` is the same switch (wins when given).
    :param start_after: walk ids above this one (resume).
    :param batch_users: accounts per batch (``users.selectors.id_ranges``) (memory bound: one batch's edges).
    :param check: ``"digest"`` (default), ``"counts"`` or ``"full"``.
    :param sample: fraction 0 < f <= 1 of accounts to check, chosen at random per id.
    :param on_progress: called with the number of ids walked after each batch.
    :param on_batch: called with the running report after each batch (checkpoint).
    :returns: a ``ReconcileReport``.
    :raises ValueError: unknown ``check`` or a ``sample`` outside (0, 1].
    :raises redis.exceptions.RedisError: Redis unreachable; repaired batches stay repaired.
    """
    if repair_drift is not None:
        repair = repair_drift
    if check not in CHECKS:
        raise ValueError(f"check must be one of {CHECKS}")
    if not 0 < sample <= 1:
        raise ValueError("sample must be in (0, 1]")
    client = get_redis()
    rng = random.Random(seed)  # noqa: S311 - a seeded sample of accounts, not a secret
    report = ReconcileReport(last_user_id=start_after)
    if user_id is not None:
        ranges: Iterable[tuple[int, int]] = [(user_id - 1, user_id)]
    else:
        top = User.objects.aggregate(top=Max("pk"))["top"] or 0
        ranges = id_ranges(start_after=start_after, top=top, batch_users=batch_users)
    for low, high in ranges:
        ids = list(User.objects.filter(pk__gt=low, pk__lte=high).order_by("pk").values_list("pk", flat=True))
        chosen = sampled(ids, sample, rng)
        reconcile_users(client, low, high, chosen, report, check=check, whole_range=sample >= 1.0)
        if repair:
            repair_report(client, report)
        else:
            report.drifted_pairs.clear()
            report.drifted_controls.clear()
            report.garbage.clear()
            report.garbage_owners.clear()
            report.controls_garbage.clear()
        report.last_user_id = high
        if on_batch is not None:
            on_batch(report)
        if on_progress is not None:
            on_progress(high - low)
    logger.info("reconcile: %s", report.as_dict())
    return report


# The counters of a ``ReconcileRun``, named as in ``ReconcileReport.as_dict()``.
RUN_FIGURES = (
    "users_checked",
    "users_drifted",
    "edges_checked",
    "edges_missing",
    "edges_extra",
    "scores_wrong",
    "pairs_repaired",
    "controls_drifted",
    "controls_repaired",
)


@primary_reads()
def reconcile_run(
    *,
    dry_run: bool = False,
    user_id: int | None = None,
    start_after: int | None = None,
    resume: bool = False,
    check: str = CHECK_DIGEST,
    sample: float = 1.0,
    batch_users: int = 1000,
    on_progress: Callable[[int], None] | None = None,
) -> tuple[ReconcileRun, ReconcileReport]:
    """Run ``reconcile_all`` and record it as a ``ReconcileRun`` (checkpointed after every batch).

    :param resume: continue the latest unfinished whole-graph run of the same
        kind from its checkpoint, adding to its figures.
    :param start_after: walk ids above this one (overrides the checkpoint).
    :returns: ``(run, report)``; ``run.finished_at`` is set on success.
    :raises: as ``reconcile_all``; the run keeps its checkpoint and the error text.
    """
    run, report = recorded_run(
        ReconcileRun,
        RUN_FIGURES,
        lambda begin, on_batch: reconcile_all(
            repair=not dry_run,
            user_id=user_id,
            start_after=begin,
            batch_users=batch_users,
            check=check,
            sample=sample,
            on_progress=on_progress,
            on_batch=on_batch,
        ),
        dry_run=dry_run,
        user_id=user_id,
        start_after=start_after,
        resume=resume,
        fields={"check_level": check, "sample": sample},
    )
    logger.info(
        "reconcile run %s: users_checked=%s edges_missing=%s edges_extra=%s scores_wrong=%s pairs_repaired=%s dry_run=%s",
        run.pk,
        run.users_checked,
        run.edges_missing,
        run.edges_extra,
        run.scores_wrong,
        run.pairs_repaired,
        dry_run,
    )
    return run, report


def graph_drift(*, repair: bool) -> int:
    """The table's reconcile of the follow mirror and counts: every account, every edge compared.

    :returns: edges missing, extra or with a wrong score (repaired unless ``repair`` is False).
    """
    return reconcile_all(repair=repair, check=CHECK_FULL).drift


def controls_drift(*, repair: bool) -> int:
    """The table's reconcile of the block and mute sets: every account's sets against the database.

    :returns: pairs whose block or mute Redis shows wrong (repaired unless ``repair`` is False).
    """
    return reconcile_all(repair=repair, check=CHECK_FULL).controls_drifted


# A kept profile sample as arrays: the three sizes, the samples (count, ids; per intersection)
# and what they were asked for (the two sample sizes, the digest of the blocked ids read, the ids
# given to leave out: the account's, the hidden ones); false for no such key or another value.
_KEPT_SAMPLE_LUA = """
local kept = redis.call('GET', KEYS[1])
if not kept then return false end
local ok, entry = pcall(cmsgpack.unpack, kept)
if not ok or type(entry) ~= 'table' or #entry ~= 5 or type(entry[4]) ~= 'table' or type(entry[5]) ~= 'table' then
    return false
end
return entry
"""


def _tokens_current(client: redis.Redis, token_keys: list[str], tokens: list[str]) -> bool:
    """Whether the graph version tokens at ``token_keys`` are still ``tokens`` (a missing one never is)."""
    found = client.mget(token_keys)
    return (
        all(token is not None for token in found)
        and [token.decode() if isinstance(token, bytes) else token for token in found] == tokens
    )


def _blocked_ids(client: redis.Redis, reader_id: int, digest: bytes | str) -> set[int] | None:
    """The ids in ``reader_id``'s blocks set when their digest (as ``PROFILE_GRAPH_LUA`` takes it)
    is still ``digest``; None when the set changed since (no read finds that kept sample)."""
    raw = client.smembers(redis_keys.blocks_key(reader_id))
    members = sorted(member.decode("utf-8", "surrogateescape") if isinstance(member, bytes) else member for member in raw)
    wanted = digest.decode() if isinstance(digest, bytes) else digest
    joined = ",".join(members).encode("utf-8", "surrogateescape")
    if hashlib.sha1(joined, usedforsecurity=False).hexdigest() != wanted:
        return None
    return {int(member) for member in members if id_or_none(member) is not None}


def profile_samples_drift(*, repair: bool) -> int:
    """The table's reconcile of the profile samples kept in Redis (``selectors.PROFILE_GRAPH_LUA``):
    each one still readable (both accounts' graph version tokens current) against the samples of
    the sets as they are now; a differing one is deleted unless ``repair`` is False. Kept samples
    under an older token are never read again and expire; keys under the head that the script
    does not write are passed over.

    :returns: how many kept samples differed.
    :raises: ``REDIS_ERRORS``.
    """
    client = get_redis()
    if is_cluster(client):
        return 0  # a cluster keeps none (``selectors.profile_graph``)
    head = redis_keys.profile_samples_key_head()
    read = lua(_KEPT_SAMPLE_LUA)
    drift = 0
    for raw_key in client.scan_iter(match=f"{head}*", count=1000):
        key = raw_key.decode("utf-8", "replace")
        parts = key[len(head) :].split(":")
        account_id, viewer_id = id_or_none(parts[0]), id_or_none(parts[1]) if len(parts) == 5 else None
        if account_id is None or len(parts) != 5 or (parts[1] and viewer_id is None):
            continue  # not a key the script writes: no read finds it
        token_keys = [redis_keys.graph_version_key(account_id)]
        if viewer_id is not None:
            token_keys.append(redis_keys.graph_version_key(viewer_id))
        tokens = parts[2 : 2 + len(token_keys)]  # a key without a viewer holds one token and ""
        entry = read(keys=[key], args=[], client=client) if _tokens_current(client, token_keys, tokens) else None
        if not entry:
            continue
        samples, (limit, familiar_limit, blocked_digest, *given) = entry[3], entry[4]
        left_out = set(given)
        if blocked_digest:
            # The blocks read were the viewer's, or on one's own profile one's own.
            blocked = _blocked_ids(client, account_id if viewer_id is None else viewer_id, blocked_digest)
            if blocked is None:
                continue
            left_out |= blocked
        kept = [(samples[index], list(samples[index + 1])) for index in range(0, len(samples), 2)]
        wanted = [selectors.lowest_shown(selectors.mutual_follow_ids(user_id=account_id), limit, left_out)]
        if viewer_id is not None:
            others = left_out | {viewer_id}
            common = selectors.common_following_ids(user_id=viewer_id, other_id=account_id)
            wanted.append(selectors.lowest_shown(common, limit, others))
            familiar = selectors.familiar_follower_ids(viewer_id=viewer_id, user_id=account_id)
            wanted.append(selectors.lowest_shown(familiar, familiar_limit, others))
        # A write between the two reads changed the token: its next read derives the sample again.
        if kept != wanted and _tokens_current(client, token_keys, tokens):
            drift += 1
            if repair:
                client.delete(key)
    return drift

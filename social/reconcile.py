"""Reconcile: find and repair drift between the database (the truth) and the Redis mirror.

Accounts are walked in id order, ``batch_users`` at a time (bounded memory,
resumable with ``start_after``). For each account the four structures are
compared with the database: cheap first (cardinalities and score sums in
one pipeline), full member diff only where those differ. Drifted pairs are
repaired through ``mirror_apply_pairs`` (race-safe, the database wins).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Max

from . import redis_keys
from .mirror import follow_score, followers_layouts, mirror_apply_pairs
from .models import Follow
from .redis_client import get_redis

logger = logging.getLogger(__name__)
User = get_user_model()

Pair = tuple[int, int]


@dataclass
class ReconcileReport:
    """Drift figures: ``users_checked``, ``users_drifted``, ``edges_missing``
    (in the database, not in Redis), ``edges_extra`` (in Redis only),
    ``scores_wrong`` (present with another follow time), ``pairs_repaired``."""

    users_checked: int = 0
    users_drifted: int = 0
    edges_missing: int = 0
    edges_extra: int = 0
    scores_wrong: int = 0
    pairs_repaired: int = 0
    last_user_id: int = 0
    drifted_pairs: set[Pair] = field(default_factory=set, repr=False)

    def as_dict(self) -> dict[str, int]:
        data = asdict(self)
        data.pop("drifted_pairs")
        return data


def _db_edges(low: int, high: int) -> tuple[dict[int, dict[int, int]], dict[int, dict[int, int]]]:
    following: dict[int, dict[int, int]] = defaultdict(dict)
    followers: dict[int, dict[int, int]] = defaultdict(dict)
    active = Follow.objects.filter(follower__is_active=True, followee__is_active=True)
    for follower_id, followee_id, at in active.filter(follower_id__gt=low, follower_id__lte=high).values_list(
        "follower_id", "followee_id", "created_at"
    ):
        following[follower_id][followee_id] = follow_score(at)
    for follower_id, followee_id, at in active.filter(followee_id__gt=low, followee_id__lte=high).values_list(
        "follower_id", "followee_id", "created_at"
    ):
        followers[followee_id][follower_id] = follow_score(at)
    return following, followers


def _follower_keys(user_id: int, layout: bytes) -> list[tuple[str, str]]:
    if layout == redis_keys.LAYOUT_SHARDED:
        return [
            (redis_keys.followers_set_shard_key(user_id, s), redis_keys.followers_zset_shard_key(user_id, s))
            for s in range(settings.FOLLOWERS_SHARDS)
        ]
    return [(redis_keys.followers_set_key(user_id), redis_keys.followers_zset_key(user_id))]


def _read_structures(client: Any, user_ids: list[int]) -> dict[int, dict[str, Any]]:
    """Read the four structures of each account in one pipeline."""
    layouts = followers_layouts(client, user_ids)
    pipe = client.pipeline(transaction=False)
    plan: list[tuple[int, str]] = []
    for user_id in user_ids:
        pipe.smembers(redis_keys.following_set_key(user_id))
        plan.append((user_id, "following_set"))
        pipe.zrange(redis_keys.following_zset_key(user_id), 0, -1, withscores=True)
        plan.append((user_id, "following_zset"))
        for set_key, zset_key in _follower_keys(user_id, layouts[user_id]):
            pipe.smembers(set_key)
            plan.append((user_id, "followers_set"))
            pipe.zrange(zset_key, 0, -1, withscores=True)
            plan.append((user_id, "followers_zset"))
    found: dict[int, dict[str, Any]] = {
        u: {"following_set": set(), "following_zset": {}, "followers_set": set(), "followers_zset": {}} for u in user_ids
    }
    for (user_id, name), reply in zip(plan, pipe.execute()):
        if name.endswith("_set"):
            found[user_id][name] |= {int(m) for m in reply}
        else:
            found[user_id][name].update({int(m): int(s) for m, s in reply})
    return found


def _diff(
    truth: dict[int, int], members: set[int], scored: dict[int, int], pair: Callable[[int], Pair], report: ReconcileReport
) -> None:
    for other, score in truth.items():
        if other not in members or other not in scored:
            report.edges_missing += 1
            report.drifted_pairs.add(pair(other))
        elif scored[other] != score:
            report.scores_wrong += 1
            report.drifted_pairs.add(pair(other))
    for other in (members | set(scored)) - set(truth):
        report.edges_extra += 1
        report.drifted_pairs.add(pair(other))


def reconcile_range(client: Any, low: int, high: int, report: ReconcileReport) -> None:
    """Compare and collect drift for accounts ``low < id <= high`` into ``report``."""
    user_ids = list(User.objects.filter(pk__gt=low, pk__lte=high).values_list("pk", flat=True))
    if not user_ids:
        return
    following, followers = _db_edges(low, high)
    found = _read_structures(client, user_ids)
    for user_id in user_ids:
        before = len(report.drifted_pairs)
        mine = found[user_id]
        _diff(following.get(user_id, {}), mine["following_set"], mine["following_zset"], lambda o: (user_id, o), report)
        _diff(followers.get(user_id, {}), mine["followers_set"], mine["followers_zset"], lambda o: (o, user_id), report)
        report.users_checked += 1
        if len(report.drifted_pairs) > before:
            report.users_drifted += 1


def reconcile_all(
    *,
    repair: bool = True,
    user_id: int | None = None,
    start_after: int = 0,
    batch_users: int = 1000,
    on_progress: Callable[[int], None] | None = None,
) -> ReconcileReport:
    """Reconcile every account (or one ``user_id``) and repair unless ``repair`` is False.

    :returns: a ``ReconcileReport``; an edge missing on both of its sides
        counts once per side that lacks it.
    """
    client = get_redis()
    report = ReconcileReport(last_user_id=start_after)
    if user_id is not None:
        reconcile_range(client, user_id - 1, user_id, report)
    else:
        top = User.objects.aggregate(top=Max("pk"))["top"] or 0
        low = start_after
        while low < top:
            high = min(low + batch_users, top)
            reconcile_range(client, low, high, report)
            if repair and report.drifted_pairs:
                report.pairs_repaired += mirror_apply_pairs(sorted(report.drifted_pairs))
                report.drifted_pairs.clear()
            report.last_user_id = high
            if on_progress is not None:
                on_progress(high - low)
            low = high
    if repair and report.drifted_pairs:
        report.pairs_repaired += mirror_apply_pairs(sorted(report.drifted_pairs))
    logger.info("reconcile: %s", report.as_dict())
    return report

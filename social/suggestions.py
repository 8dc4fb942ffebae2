"""Who to follow: accounts followed by many of the accounts a reader follows (friends of friends).

``rank`` is the pure scoring (adjacency in, ranking out; also used by ``bench/suggestions.py``);
the best ``SUGGESTIONS_MAX`` are stored in Redis for their order only, re-derived from the rows
by the outbox handlers here and checked nightly by ``suggestions_reconcile``.
Design: docs/behaviours.md (Who to follow).
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import timedelta

import redis
from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from core.cluster import pipeline
from core.redis import get_redis
from users.models import User

from . import redis_keys
from .models import Follow, SuggestionReconcileRun
from .selectors import (
    MOST_FOLLOWED_CACHE_SECONDS,
    POPULAR_POOL,
    WHY_NAMES,
    active_follows,
    blocks_either_way,
    most_followed_cache_key,
    most_followed_compute,
    suggestion_exclusions,
    users_most_followed,
)

logger = logging.getLogger(__name__)

# Candidates kept per reader; followees read per pipeline.
SUGGESTIONS_MAX = 100
FOLLOWEE_BATCH = 500


def weight(following: int) -> float:
    """The weight of a followee that follows ``following`` accounts: ``1 / log2(2 + following)``."""
    return 1.0 / math.log2(2 + following)


@dataclass(frozen=True)
class Ranked:
    """One candidate: ``score``, ``via`` (followees following it), ``names`` (the first ``WHY_NAMES`` of them)."""

    user_id: int
    score: float
    via: int
    names: tuple[int, ...]


def rank(
    reader_id: int,
    followees: Collection[int],
    following_of: Callable[[Sequence[int]], Iterable[tuple[int, Collection[int]]]],
    *,
    exclude: Collection[int] = (),
    limit: int = SUGGESTIONS_MAX,
) -> list[Ranked]:
    """The best ``limit`` candidates for ``reader_id`` who follows ``followees``.

    :param following_of: called with batches of followee ids, yields ``(followee, its followings)``.
    :param exclude: ids never suggested (besides the reader and its followees).
    :returns: best first; ties by id ascending.
    """
    scores: dict[int, float] = {}
    via: Counter[int] = Counter()
    names: dict[int, list[int]] = {}
    ids = sorted(followees)
    for start in range(0, len(ids), FOLLOWEE_BATCH):
        for followee, theirs in following_of(ids[start : start + FOLLOWEE_BATCH]):
            if not theirs:
                continue
            w = weight(len(theirs))
            for candidate in theirs:
                scores[candidate] = scores.get(candidate, 0.0) + w
                via[candidate] += 1
                named = names.setdefault(candidate, [])
                if len(named) < WHY_NAMES:
                    named.append(followee)
    blocked = set(exclude) | set(followees) | {reader_id}
    best = sorted(
        ((score, user_id) for user_id, score in scores.items() if user_id not in blocked), key=lambda item: (-item[0], item[1])
    )
    return [
        Ranked(user_id=user_id, score=score, via=via[user_id], names=tuple(names[user_id])) for score, user_id in best[:limit]
    ]


def _redis_following_of(client: redis.Redis) -> Callable[[Sequence[int]], Iterable[tuple[int, Collection[int]]]]:
    def read(ids: Sequence[int]) -> Iterable[tuple[int, Collection[int]]]:
        pipe = pipeline(client)
        for followee in ids:
            pipe.smembers(redis_keys.following_set_key(followee))
        for followee, members in zip(ids, pipe.execute()):
            yield followee, [int(member) for member in members]

    return read


def _database_following_of(ids: Sequence[int]) -> Iterable[tuple[int, Collection[int]]]:
    theirs: dict[int, list[int]] = {followee: [] for followee in ids}
    for follower_id, followee_id in active_follows().filter(follower_id__in=list(ids)).values_list("follower_id", "followee_id"):
        theirs[follower_id].append(followee_id)
    return theirs.items()


def compute(
    reader_id: int, *, client: redis.Redis | None = None, limit: int | None = None, followees: Collection[int] | None = None
) -> list[Ranked]:
    """Rank ``reader_id``'s candidates from its followees (less those a block separates), reading what
    they follow from the mirror (``client``) or the database (None); a reader following nobody gets the most followed.

    :param limit: how many to keep (None: ``SUGGESTIONS_MAX``).
    :param followees: the reader's followees when the caller read them already (None: read here).
    :raises: ``REDIS_ERRORS`` on the Redis path.
    """
    limit = SUGGESTIONS_MAX if limit is None else limit
    if followees is None:
        followees = set(active_follows().filter(follower_id=reader_id).values_list("followee_id", flat=True))
    following_of = _redis_following_of(client) if client is not None else _database_following_of
    exclude = suggestion_exclusions(reader_id)
    # Links the reader may see only: the same rule as the read (selectors.suggestion_links).
    followees = set(followees) - blocks_either_way(reader_id)
    if not followees:
        popular = [
            (user, count)
            for user, count in users_most_followed(limit=POPULAR_POOL)
            if user.pk not in exclude and user.pk != reader_id
        ]
        return [Ranked(user_id=user.pk, score=float(count), via=0, names=()) for user, count in popular[:limit]]
    # More than kept: some candidates may be deactivated.
    ranked = rank(reader_id, followees, following_of, exclude=exclude, limit=limit * 2)
    active = set(User.objects.filter(pk__in=[r.user_id for r in ranked], is_active=True).values_list("pk", flat=True))
    return [r for r in ranked if r.user_id in active][:limit]


def store(client: redis.Redis, reader_id: int, ranked: Sequence[Ranked]) -> None:
    """Replace ``reader_id``'s stored suggestions with ``ranked`` (one MULTI on its slot)."""
    key, why = redis_keys.suggestions_key(reader_id), redis_keys.suggestions_why_key(reader_id)
    pipe = client.pipeline(transaction=True)
    pipe.delete(key, why, redis_keys.suggestions_counted_key(reader_id), redis_keys.suggestions_empty_key(reader_id))
    if ranked:
        pipe.zadd(key, {str(r.user_id): r.score for r in ranked})
        pipe.hset(why, mapping={str(r.user_id): _why_value(r.via, r.names) for r in ranked})
    else:
        pipe.set(redis_keys.suggestions_empty_key(reader_id), 1, ex=redis_keys.SUGGESTIONS_TTL_SECONDS)
    pipe.expire(key, redis_keys.SUGGESTIONS_TTL_SECONDS)
    pipe.expire(why, redis_keys.SUGGESTIONS_TTL_SECONDS)
    pipe.execute()


def _why_value(via: int, names: Sequence[int]) -> str:
    return ",".join([str(via), *(str(name) for name in names)])


def suggestions_refresh(*, user_id: int) -> int:
    """Compute and store ``user_id``'s suggestions from its followees as the database has them now.

    :returns: how many were stored.
    :raises: ``REDIS_ERRORS``.
    """
    client = get_redis()
    ranked = compute(user_id, client=client)
    store(client, user_id, ranked)
    return len(ranked)


def _stored(client: redis.Redis, user_ids: Sequence[int]) -> list[int]:
    pipe = pipeline(client)
    for user_id in user_ids:
        pipe.exists(redis_keys.suggestions_key(user_id), redis_keys.suggestions_empty_key(user_id))
    return [user_id for user_id, found in zip(user_ids, pipe.execute()) if found]


def suggestions_rederive(*, user_ids: Iterable[int]) -> int:
    """Recompute from the rows the stored suggestions of each of ``user_ids`` that has some; idempotent.

    :returns: how many readers were recomputed.
    :raises: ``REDIS_ERRORS``.
    """
    client = get_redis()
    ids = sorted({int(user_id) for user_id in user_ids})
    done = 0
    for start in range(0, len(ids), FOLLOWEE_BATCH):
        for user_id in _stored(client, ids[start : start + FOLLOWEE_BATCH]):
            suggestions_refresh(user_id=user_id)
            done += 1
    return done


def suggestions_rederive_account(*, account_id: int) -> int:
    """Re-derive the stored suggestions of every reader following ``account_id`` (after its (de)activation).

    :returns: how many readers were recomputed.
    :raises: ``REDIS_ERRORS``.
    """
    readers = (
        Follow.objects.filter(followee_id=account_id, follower__is_active=True)
        .order_by("follower_id")
        .values_list("follower_id", flat=True)
    )
    return suggestions_rederive(user_ids=readers.iterator(chunk_size=FOLLOWEE_BATCH))


def rankings_invalidate() -> None:
    """Start a new generation of the cached most-followed rankings (the old ones expire).

    :raises: ``REDIS_ERRORS``.
    """
    key = redis_keys.most_followed_generation_key()
    cache.add(key, 0, timeout=None)
    cache.incr(key)


def suggestions_refresh_active(
    *, start_after: int = 0, resume: bool = False, on_progress: Callable[[int, int], None] | None = None
) -> int:
    """Recompute the suggestions of every reader seen within ``FEED_ACTIVE_DAYS``, in id order,
    checkpointed every ``CHECKPOINT_EVERY`` readers.

    :param start_after: resume after this user id.
    :param resume: go on from a checkpoint left within ``SUGGESTIONS_CHECKPOINT_TTL_SECONDS``.
    :param on_progress: called with ``(readers done, last user id)`` after each reader.
    :returns: how many readers were refreshed.
    :raises: ``REDIS_ERRORS``.
    """
    client = get_redis()
    checkpoint = redis_keys.suggestions_refresh_checkpoint_key()
    if resume:
        saved = client.get(checkpoint)
        start_after = max(start_after, int(saved) if saved is not None and saved.isdigit() else 0)
    since = timezone.now() - timedelta(days=int(settings.FEED_ACTIVE_DAYS))
    readers = (
        User.objects.filter(is_active=True, last_seen_at__gte=since, pk__gt=start_after)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    done = 0
    for user_id in readers.iterator(chunk_size=1000):
        suggestions_refresh(user_id=user_id)
        done += 1
        if done % CHECKPOINT_EVERY == 0:
            client.set(checkpoint, user_id, ex=redis_keys.SUGGESTIONS_CHECKPOINT_TTL_SECONDS)
        if on_progress is not None:
            on_progress(done, user_id)
    client.delete(checkpoint)
    return done


# Readers walked between two checkpoints of a refresh or reconcile run.
CHECKPOINT_EVERY = 100


# Rankings the directory and the who-to-follow fallback cache (selectors.users_most_followed).
RANKING_LIMITS = (12, POPULAR_POOL)
# Scores closer than this are equal (floats summed in another order).
SCORE_TOLERANCE = 1e-9


@dataclass
class SuggestionsDrift:
    """Reconcile figures: ``readers_*`` and ``rankings_*`` checked, drifted, fixed; ``last_user_id``."""

    dry_run: bool = False
    readers_checked: int = 0
    readers_drifted: int = 0
    readers_fixed: int = 0
    rankings_checked: int = 0
    rankings_drifted: int = 0
    rankings_fixed: int = 0
    last_user_id: int = 0

    def as_dict(self) -> dict[str, int]:
        """The figures as a dict (the task's return value, the command's output)."""
        return {name: int(value) for name, value in asdict(self).items()}


def _stored_set(client: redis.Redis, reader_id: int) -> tuple[bool, dict[int, float], dict[int, str]]:
    pipe = pipeline(client)
    pipe.zrange(redis_keys.suggestions_key(reader_id), 0, -1, withscores=True)
    pipe.hgetall(redis_keys.suggestions_why_key(reader_id))
    pipe.exists(redis_keys.suggestions_empty_key(reader_id))
    ranked, why, empty = pipe.execute()
    scores = {int(member): float(score) for member, score in ranked}
    reasons = {int(member): value.decode() if isinstance(value, bytes) else str(value) for member, value in why.items()}
    return bool(empty) or bool(scores), scores, reasons


def _same(ranked: Sequence[Ranked], scores: dict[int, float], reasons: dict[int, str]) -> bool:
    if {r.user_id for r in ranked} != set(scores) or set(reasons) != set(scores):
        return False
    return all(
        abs(scores[r.user_id] - r.score) <= SCORE_TOLERANCE and reasons[r.user_id] == _why_value(r.via, r.names) for r in ranked
    )


def suggestions_reconcile(
    *, dry_run: bool = False, start_after: int = 0, on_progress: Callable[[SuggestionsDrift], None] | None = None
) -> SuggestionsDrift:
    """Compare the stored suggestions (sets, scores, reasons) of every reader seen within
    ``FEED_ACTIVE_DAYS`` with a rebuild from the database, in id order, and replace drifted ones
    unless ``dry_run``; then ``rankings_reconcile``.

    :param on_progress: called with the running figures after each reader.
    :returns: the drift figures.
    :raises: ``REDIS_ERRORS``.
    """
    drift = SuggestionsDrift(dry_run=dry_run, last_user_id=start_after)
    client = get_redis()
    since = timezone.now() - timedelta(days=int(settings.FEED_ACTIVE_DAYS))
    readers = (
        User.objects.filter(is_active=True, last_seen_at__gte=since, pk__gt=start_after)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    for reader_id in readers.iterator(chunk_size=1000):
        drift.last_user_id = reader_id
        found, scores, reasons = _stored_set(client, reader_id)
        if found:
            drift.readers_checked += 1
            rebuilt = compute(reader_id)
            if not _same(rebuilt, scores, reasons):
                drift.readers_drifted += 1
                if not dry_run:
                    store(client, reader_id, rebuilt)
                    drift.readers_fixed += 1
            elif not dry_run:
                pipe = client.pipeline(transaction=True)
                for key in (
                    redis_keys.suggestions_key(reader_id),
                    redis_keys.suggestions_why_key(reader_id),
                    redis_keys.suggestions_empty_key(reader_id),
                ):
                    pipe.expire(key, redis_keys.SUGGESTIONS_TTL_SECONDS)
                pipe.execute()
        if on_progress is not None:
            on_progress(drift)
    rankings_reconcile(drift, dry_run=dry_run)
    return drift


def rankings_reconcile(drift: SuggestionsDrift, *, dry_run: bool = False) -> None:
    """Compare each cached ranking (``RANKING_LIMITS``) with the database's; replace drifted ones unless ``dry_run``; adds to ``drift``'s ``rankings_*``.

    :raises: ``REDIS_ERRORS``.
    """
    for limit in RANKING_LIMITS:
        key = most_followed_cache_key(limit=limit)
        cached = cache.get(key)
        if cached is None:
            continue
        drift.rankings_checked += 1
        truth = most_followed_compute(limit=limit)
        if [tuple(row) for row in cached] != truth:
            drift.rankings_drifted += 1
            if not dry_run:
                cache.set(key, truth, timeout=MOST_FOLLOWED_CACHE_SECONDS)
                drift.rankings_fixed += 1


def suggestions_reconcile_run(*, dry_run: bool = False) -> tuple[SuggestionReconcileRun, SuggestionsDrift]:
    """``suggestions_reconcile`` recorded as a ``SuggestionReconcileRun`` (saved every ``CHECKPOINT_EVERY`` readers).

    :raises: ``REDIS_ERRORS`` (recorded on the run first).
    """
    run = SuggestionReconcileRun.objects.create(dry_run=dry_run)
    walked = 0
    last = SuggestionsDrift(dry_run=dry_run)

    def save(drift: SuggestionsDrift, **extra: object) -> None:
        SuggestionReconcileRun.objects.filter(pk=run.pk).update(**{**drift.as_dict(), **extra})

    def progress(drift: SuggestionsDrift) -> None:
        nonlocal walked, last
        walked, last = walked + 1, drift
        if walked % CHECKPOINT_EVERY == 0:
            save(drift)

    try:
        drift = suggestions_reconcile(dry_run=dry_run, on_progress=progress)
    except Exception as exc:
        save(last, error=repr(exc)[:500])
        raise
    save(drift, finished_at=timezone.now())
    run.refresh_from_db()
    return run, drift


def suggestions_drift(*, repair: bool) -> int:
    """The table's reconcile of who to follow (sets, scores and reasons), ``suggestions_reconcile``.

    :returns: readers whose stored suggestions differed from a rebuild.
    """
    return suggestions_reconcile(dry_run=not repair).readers_drifted


def rankings_drift(*, repair: bool) -> int:
    """The table's reconcile of the directory's cached rankings, ``rankings_reconcile``.

    :returns: cached rankings that differed from the database's.
    """
    drift = SuggestionsDrift(dry_run=not repair)
    rankings_reconcile(drift, dry_run=not repair)
    return drift.rankings_drifted

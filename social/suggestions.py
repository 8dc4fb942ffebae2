"""Who to follow: accounts followed by many of the accounts a reader follows (friends of friends).

**Score.** For reader ``r`` following ``F``, a candidate ``c`` scores the
sum over the followees ``f`` in ``F`` that follow ``c`` of ``1 / log2(2 +
|following(f)|)``: a followee who follows few accounts says more about each
of them than one who follows thousands (Adamic-Adar's idea, on the follow
direction). Excluded: the reader, accounts it follows or asked to follow,
accounts hidden by a block either way, accounts it mutes, and deactivated
ones. A reader who follows nobody gets the most followed accounts.

**Storage.** The best ``SUGGESTIONS_MAX`` are kept in Redis
(``social.redis_keys.suggestions_key``, a sorted set by score, and
``suggestions_why_key``, a hash naming up to two followees behind each
candidate and their count, for the reason shown). Computed in the
background: by the nightly task for readers seen within
``FEED_ACTIVE_DAYS``, when a reader's page finds none, and incrementally
after each follow (``suggestions_after_follow``: the new followee leaves
the set and its own followees gain its weight, once: a set of the followees
counted, ``suggestions_counted_key``, makes a repeated or late job add
nothing). Reads filter in O(page):
accounts followed, blocked or muted since the set was computed are skipped.

``rank`` is the pure function (adjacency in, ranking out) that both the
Redis path and the quality benchmark (``bench/suggestions.py``) use.
"""

from __future__ import annotations

import logging
import math
from datetime import timedelta
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

import redis
from django.conf import settings
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from core.cluster import lua, pipeline
from core.redis import REDIS_ERRORS, get_redis, redis_available, redis_failed
from users.models import User

from . import redis_keys
from .models import Follow
from .selectors import POPULAR_POOL, active_follows, parse_suggestion_reason, suggestion_exclusions, users_most_followed

logger = logging.getLogger(__name__)

# Candidates kept per reader; followees read per pipeline.
SUGGESTIONS_MAX = 100
FOLLOWEE_BATCH = 500
# Followees named in a reason.
WHY_NAMES = 2


def weight(following: int) -> float:
    """The weight of a followee that follows ``following`` accounts: ``1 / log2(2 + following)``."""
    return 1.0 / math.log2(2 + following)


@dataclass(frozen=True)
class Ranked:
    """One candidate: its ``score``, how many of the reader's followees follow it (``via``) and
    the first of them (``names``, at most ``WHY_NAMES`` ids)."""

    user_id: int
    score: float
    via: int
    names: tuple[int, ...]


def rank(reader_id: int, followees: Collection[int], following_of: Callable[[Sequence[int]], Iterable[tuple[int, Collection[int]]]],
         *, exclude: Collection[int] = (), limit: int = SUGGESTIONS_MAX) -> list[Ranked]:
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
    best = sorted(((score, user_id) for user_id, score in scores.items() if user_id not in blocked), key=lambda item: (-item[0], item[1]))
    return [Ranked(user_id=user_id, score=score, via=via[user_id], names=tuple(names[user_id])) for score, user_id in best[:limit]]


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
    reader_id: int, *, client: redis.Redis | None = None, limit: int = SUGGESTIONS_MAX, followees: Collection[int] | None = None
) -> list[Ranked]:
    """Rank ``reader_id``'s candidates from the follow mirror (``client``), or from the database
    (``client`` None); deactivated candidates are dropped; a reader who follows nobody gets the
    most followed accounts.

    :param followees: the reader's followees when the caller read them already (None: read here).
    :raises: ``REDIS_ERRORS`` on the Redis path.
    """
    if client is not None:
        if followees is None:
            followees = {int(member) for member in client.smembers(redis_keys.following_set_key(reader_id))}
        following_of = _redis_following_of(client)
    else:
        if followees is None:
            followees = set(active_follows().filter(follower_id=reader_id).values_list("followee_id", flat=True))
        following_of = _database_following_of
    exclude = suggestion_exclusions(reader_id)
    if not followees:
        popular = [(user, count) for user, count in users_most_followed(limit=POPULAR_POOL) if user.pk not in exclude and user.pk != reader_id]
        return [Ranked(user_id=user.pk, score=float(count), via=0, names=()) for user, count in popular[:limit]]
    # More than kept: some candidates may be deactivated.
    ranked = rank(reader_id, followees, following_of, exclude=exclude, limit=limit * 2)
    active = set(User.objects.filter(pk__in=[r.user_id for r in ranked], is_active=True).values_list("pk", flat=True))
    return [r for r in ranked if r.user_id in active][:limit]


def store(client: redis.Redis, reader_id: int, ranked: Sequence[Ranked], *, counted: Collection[int]) -> None:
    """Replace ``reader_id``'s stored suggestions with ``ranked`` (one MULTI on its slot).

    :param counted: the followees ``ranked`` was computed from: a later update for one of
        them adds nothing (``suggestions_after_follow``).
    """
    key, why, done = redis_keys.suggestions_key(reader_id), redis_keys.suggestions_why_key(reader_id), redis_keys.suggestions_counted_key(reader_id)
    pipe = client.pipeline(transaction=True)
    pipe.delete(key, why, done, redis_keys.suggestions_empty_key(reader_id))
    if counted:
        pipe.sadd(done, *sorted(counted))
        pipe.expire(done, redis_keys.SUGGESTIONS_TTL_SECONDS)
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
    """Compute and store ``user_id``'s suggestions (the task's body).

    :returns: how many were stored.
    :raises: ``REDIS_ERRORS``.
    """
    client = get_redis()
    followees = {int(member) for member in client.smembers(redis_keys.following_set_key(user_id))}
    ranked = compute(user_id, client=client, followees=followees)
    store(client, user_id, ranked, counted=followees)
    return len(ranked)


def suggestions_after_follow(*, follower_id: int, followee_id: int) -> int:
    """The cheap update after ``follower_id`` followed ``followee_id``: the followee leaves the
    suggestions, and the accounts it follows gain its weight (reasons naming it when they have
    room). Nothing when the reader has no suggestions stored (they are computed when needed);
    only the removal when the stored set was computed after the follow (it counts the followee
    already) or the follow is gone again.

    :returns: the candidates touched.
    :raises: ``REDIS_ERRORS``.
    """
    client = get_redis()
    key, why = redis_keys.suggestions_key(follower_id), redis_keys.suggestions_why_key(follower_id)
    done = redis_keys.suggestions_counted_key(follower_id)
    stored, empty, counted_any = client.exists(key), client.exists(redis_keys.suggestions_empty_key(follower_id)), client.exists(done)
    if not stored and not empty:
        return 0
    if empty or not counted_any:
        # Nothing found before, or the most followed accounts of a reader who followed nobody
        # (their follower counts would outrank every friend of a friend): compute anew.
        client.delete(key, why, redis_keys.suggestions_empty_key(follower_id))
        suggestions_request(user_id=follower_id)
        return 0
    follows = Follow.objects.filter(follower_id=follower_id, followee_id=followee_id).exists()
    # SADD answers 0 when the stored set counts this followee already (computed after the
    # follow, or this job ran before): then only the removal, so nothing is counted twice.
    fresh = follows and client.sadd(done, str(followee_id)) == 1
    if not fresh:
        pipe = client.pipeline(transaction=True)
        pipe.zrem(key, str(followee_id))
        pipe.hdel(why, str(followee_id))
        pipe.execute()
        return 0
    theirs = {int(member) for member in client.smembers(redis_keys.following_set_key(followee_id))}
    mine = {int(member) for member in client.smembers(redis_keys.following_set_key(follower_id))}
    skip = mine | suggestion_exclusions(follower_id) | {follower_id}
    candidates = sorted(theirs - skip)
    reasons = client.hmget(why, [str(c) for c in candidates]) if candidates else []
    w = weight(len(theirs))
    pipe = client.pipeline(transaction=True)
    pipe.zrem(key, str(followee_id))
    pipe.hdel(why, str(followee_id))
    for candidate, reason in zip(candidates, reasons):
        pipe.zincrby(key, w, str(candidate))
        via, names = parse_suggestion_reason(reason)
        named = names if len(names) >= WHY_NAMES else [*names, followee_id]
        pipe.hset(why, str(candidate), _why_value(via + 1, named))
    pipe.execute()
    # Keep the best SUGGESTIONS_MAX and their reasons only (a script of its own: a cluster runs
    # none inside a MULTI block).
    lua(TRIM_LUA)(keys=[key, why], args=[SUGGESTIONS_MAX], client=client)
    return len(candidates)


# KEYS: a reader's suggestions and reasons; ARGV: how many to keep. Drops the
# lowest-ranked beyond that from both (the reasons of the dropped go too).
TRIM_LUA = """
local extra = redis.call('ZRANGE', KEYS[1], 0, -(tonumber(ARGV[1]) + 1))
if #extra > 0 then
  redis.call('ZREM', KEYS[1], unpack(extra))
  redis.call('HDEL', KEYS[2], unpack(extra))
end
return #extra
"""


def suggestions_refresh_active(
    *, start_after: int = 0, resume: bool = False, on_progress: Callable[[int, int], None] | None = None
) -> int:
    """Recompute the suggestions of every reader seen within ``FEED_ACTIVE_DAYS``, in id order,
    saving a checkpoint every ``CHECKPOINT_EVERY`` readers.

    :param start_after: resume after this user id (an interrupted run).
    :param resume: go on from the checkpoint a run interrupted within the last
        ``SUGGESTIONS_CHECKPOINT_TTL_SECONDS`` left (the nightly task), if any.
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
    readers = User.objects.filter(is_active=True, last_seen_at__gte=since, pk__gt=start_after).order_by("pk").values_list("pk", flat=True)
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


# Readers refreshed between two checkpoints of the nightly run.
CHECKPOINT_EVERY = 100


def suggestions_request(*, user_id: int) -> bool:
    """Queue the computation of ``user_id``'s suggestions unless one is queued (best effort).

    :returns: True when a task was queued.
    """
    if not redis_available():
        return False
    try:
        queued = get_redis().set(redis_keys.suggestions_queued_key(user_id), 1, nx=True, ex=redis_keys.SUGGESTIONS_QUEUED_TTL_SECONDS)
    except REDIS_ERRORS as exc:
        redis_failed(exc)
        return False
    if not queued:
        return False
    from .tasks import social_suggestions_refresh  # the task module imports this one

    try:
        social_suggestions_refresh.apply_async(kwargs={"user_id": user_id})
    except BrokerError as exc:
        # Nothing is lost (the page shows the most followed accounts meanwhile);
        # the marker goes, so the next page asks again.
        logger.warning("broker refused the suggestions of %s: %r", user_id, exc)
        try:
            get_redis().delete(redis_keys.suggestions_queued_key(user_id))
        except REDIS_ERRORS as redis_exc:
            redis_failed(redis_exc)
        return False
    return True

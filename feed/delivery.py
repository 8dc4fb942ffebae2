"""Low-level Redis writes of feeds: inbox and outbox entries, follower iteration, pull authors.

Everything here writes what the caller computed from the database; the
services (``feed.services``) decide what that is. Every inbox or outbox
write is ``ZADD`` followed by ``ZREMRANGEBYRANK`` in the same pipeline, so
no key ever holds more than ``INBOX_MAX_LEN`` members after a write
(trimming on write, so an inbox never grows without bound).
Members are always ``redis_keys.note_member(id)``: a retried or repeated
write of one note adds nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta

import redis
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from core.redis import mirror_ready
from social import layout
from social.models import Follow
from social.selectors import follow_counts
from users.models import User

from . import redis_keys

Entry = tuple[int, int]  # (note_id, score in unix ms)

# Followers read per SSCAN call and handled per pipeline (one DB query for
# their activity, one Redis round trip for their inboxes).
SSCAN_COUNT = 1000


def fan_out_batch_size() -> int:
    """Followers per fan-out batch (``FEED_FANOUT_BATCH_SIZE``, default 1000)."""
    return int(getattr(settings, "FEED_FANOUT_BATCH_SIZE", 1000))


def fan_out_batch_pause() -> float:
    """Seconds to sleep between fan-out batches (``FEED_FANOUT_BATCH_PAUSE_SECONDS``, default 0)."""
    return float(getattr(settings, "FEED_FANOUT_BATCH_PAUSE_SECONDS", 0.0))


def active_cutoff() -> datetime:
    """Followers last seen before this datetime are skipped at fan-out (``FEED_ACTIVE_DAYS`` ago)."""
    return timezone.now() - timedelta(days=int(settings.FEED_ACTIVE_DAYS))


def member_ids(reply: Iterable[object]) -> list[int]:
    """The note ids of a ZRANGE/SMEMBERS reply without scores (members are decimal strings).

    :raises ValueError: a member that is not a decimal id.
    """
    return [int(member) for member in reply if isinstance(member, (bytes, str))]


def queue_add(pipe: redis.client.Pipeline, key: str, entries: Iterable[Entry]) -> None:
    """Queue ``ZADD key`` of ``entries`` and the trim to ``INBOX_MAX_LEN`` on ``pipe``.

    :param entries: ``[(note_id, score_ms)]``; nothing is queued when empty.
    """
    mapping = {redis_keys.note_member(note_id): int(score) for note_id, score in entries}
    if not mapping:
        return
    pipe.zadd(key, mapping)
    # Keep the newest INBOX_MAX_LEN: ranks 0..-(cap+1) are the oldest extras.
    pipe.zremrangebyrank(key, 0, -(redis_keys.inbox_max_len() + 1))


def queue_remove(pipe: redis.client.Pipeline, key: str, note_ids: Iterable[int]) -> None:
    """Queue ``ZREM key`` of ``note_ids`` on ``pipe`` (nothing when empty)."""
    members = [redis_keys.note_member(note_id) for note_id in note_ids]
    if members:
        pipe.zrem(key, *members)


def is_pull_author(client: redis.Redis, author_id: int) -> bool:
    """Whether ``author_id``'s notes are pulled at read time instead of fanned out.

    True when the author is already in the pull set (sticky until a full
    rebuild re-derives the set) or has at least ``FANOUT_PULL_THRESHOLD``
    followers now, in which case the author is added to the set.
    """
    if client.sismember(redis_keys.pull_authors_key(), str(author_id)):
        return True
    if follow_counts(user_id=author_id).followers >= int(settings.FANOUT_PULL_THRESHOLD):
        client.sadd(redis_keys.pull_authors_key(), str(author_id))
        return True
    return False


def _redis_follower_ids(client: redis.Redis, author_id: int) -> Iterator[list[int]]:
    cursors = {key: 0 for key in layout.every_set_key(author_id)}
    while cursors:
        pipe = client.pipeline(transaction=False)
        keys = list(cursors)
        for key in keys:
            pipe.sscan(key, cursors[key], count=SSCAN_COUNT)
        for key, (cursor, members) in zip(keys, pipe.execute()):
            if members:
                yield [int(member) for member in members]
            if int(cursor) == 0:
                del cursors[key]
            else:
                cursors[key] = int(cursor)


def _database_follower_ids(author_id: int, *, only_active: bool, batch: int) -> Iterator[list[int]]:
    rows = Follow.objects.filter(followee_id=author_id)
    if only_active:
        rows = rows.filter(follower__is_active=True, follower__last_seen_at__gte=active_cutoff())
    # Keyset over the (followee, created_at, follower) index, never OFFSET.
    last: tuple[datetime, int] | None = None
    while True:
        page = rows.order_by("created_at", "follower_id")
        if last is not None:
            page = page.filter(Q(created_at__gt=last[0]) | Q(created_at=last[0], follower_id__gt=last[1]))
        chunk = list(page.values_list("created_at", "follower_id")[:batch])
        if not chunk:
            return
        yield [follower_id for _, follower_id in chunk]
        last = chunk[-1]


def follower_batches(
    client: redis.Redis, author_id: int, *, only_active: bool, source: str = "auto", batch: int | None = None
) -> Iterator[list[int]]:
    """Yield ``author_id``'s followers in batches of at most ``batch`` ids.

    :param only_active: keep only followers that are active and were seen
        within ``FEED_ACTIVE_DAYS`` (one ``users`` query per batch on the
        Redis path; a join on the database path).
    :param source: ``"redis"`` (SSCAN of the follower set and its shards,
        as ``social.redis_keys`` lays them out), ``"database"`` (Follow rows,
        also those of a deactivated author, which the mirror no longer
        lists) or ``"auto"`` (Redis when the follow mirror is built).
    :returns: an iterator of id lists; SSCAN may repeat an id, which is
        harmless because every write is idempotent.
    :raises: Redis errors (REDIS_ERRORS) propagate so a task can retry.
    """
    size = batch or fan_out_batch_size()
    use_redis = source == "redis" or (source == "auto" and mirror_ready(client))
    if not use_redis:
        yield from _database_follower_ids(author_id, only_active=only_active, batch=size)
        return
    pending: list[int] = []
    for members in _redis_follower_ids(client, author_id):
        pending.extend(members)
        while len(pending) >= size:
            chunk, pending = pending[:size], pending[size:]
            yield _keep_active(chunk) if only_active else chunk
    if pending:
        yield _keep_active(pending) if only_active else pending


def _keep_active(user_ids: list[int]) -> list[int]:
    ids = sorted(set(user_ids))
    return list(
        User.objects.filter(pk__in=ids, is_active=True, last_seen_at__gte=active_cutoff())
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def deliver(client: redis.Redis, user_ids: Sequence[int], entries: Sequence[Entry]) -> int:
    """Add ``entries`` to the inbox of every user in ``user_ids``, in one pipeline.

    :returns: the number of inbox writes (users times entries).
    """
    if not user_ids or not entries:
        return 0
    # The same ZADD + trim as queue_add, with the mapping built once per
    # batch instead of once per follower (this loop is the fan-out's cost).
    mapping = {redis_keys.note_member(note_id): int(score) for note_id, score in entries}
    oldest_extra = -(redis_keys.inbox_max_len() + 1)
    pipe = client.pipeline(transaction=False)
    for user_id in user_ids:
        key = redis_keys.inbox_key(user_id)
        pipe.zadd(key, mapping)
        pipe.zremrangebyrank(key, 0, oldest_extra)
    pipe.execute()
    return len(user_ids) * len(entries)


def withdraw(client: redis.Redis, user_ids: Sequence[int], note_ids: Sequence[int]) -> int:
    """Remove ``note_ids`` from the inbox of every user in ``user_ids``, in one pipeline.

    :returns: the number of members removed.
    """
    if not user_ids or not note_ids:
        return 0
    pipe = client.pipeline(transaction=False)
    for user_id in user_ids:
        queue_remove(pipe, redis_keys.inbox_key(user_id), note_ids)
    return int(sum(pipe.execute()))


def fan_out_to_followers(
    client: redis.Redis, author_id: int, entries: Sequence[Entry], *, only_active: bool = True, source: str = "auto"
) -> tuple[int, int]:
    """Deliver ``entries`` to ``author_id``'s followers, batch by batch.

    Between batches it sleeps ``FEED_FANOUT_BATCH_PAUSE_SECONDS`` (0 by
    default; raise it to spread a big fan-out's load on Redis).

    :returns: ``(followers_delivered, inbox_writes)``.
    """
    followers = writes = 0
    pause = fan_out_batch_pause()
    for batch in follower_batches(client, author_id, only_active=only_active, source=source):
        writes += deliver(client, batch, entries)
        followers += len(batch)
        if pause:
            time.sleep(pause)
    return followers, writes

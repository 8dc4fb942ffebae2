"""Every write of notifications.

``notification_add`` is the body of the outbox jobs (``notifications.outbox``):
it runs after the change committed, checks that the change still stands,
and writes the row and its group in one transaction; the unread counter in
Redis follows after commit. ``notifications_mark_read`` is the reader's.
"""

from __future__ import annotations

from datetime import date, timedelta
from functools import partial

from django.db import connection, transaction
from django.db.models import F, Q
from django.db.models.constants import OnConflict
from django.db.models.functions import Greatest
from django.utils import timezone

from core.cluster import lua
from core.redis import REDIS_ERRORS, get_redis, redis_available, redis_failed
from core.transactions import retry_on_deadlock
from social.models import Block, Follow, FollowRequest, Mute, live_mutes

from . import redis_keys
from .models import APPROVED, FOLLOW, GROUP_ACTORS, REPEAT_SECONDS, REQUEST, Notification, NotificationGroup

# INCR the counter only where it exists: a missing one is counted from the
# database at the next read, and an INCR would start it at 1 instead.
INCR_IF_EXISTS_LUA = """
if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('INCR', KEYS[1]) end
return false
"""


def _still_stands(kind: str, *, recipient_id: int, actor_id: int) -> bool:
    """Whether the event still holds now: the follow (or request) exists between active accounts,
    no block stands between them and the recipient does not mute the actor."""
    if kind == FOLLOW:
        exists = Follow.objects.filter(follower_id=actor_id, followee_id=recipient_id, follower__is_active=True, followee__is_active=True).exists()
    elif kind == REQUEST:
        exists = FollowRequest.objects.filter(requester_id=actor_id, target_id=recipient_id, requester__is_active=True).exists()
    else:
        exists = Follow.objects.filter(follower_id=recipient_id, followee_id=actor_id, followee__is_active=True).exists()
    if not exists:
        return False
    pair = Q(blocker_id=recipient_id, blocked_id=actor_id) | Q(blocker_id=actor_id, blocked_id=recipient_id)
    if Block.objects.filter(pair).exists():
        return False
    live = live_mutes()
    return not Mute.objects.filter(live, muter_id=recipient_id, muted_id=actor_id).exists()


def _ensure_group(recipient_id: int, kind: str, now_day: date) -> None:
    """Make sure the day's group row exists: ``INSERT IGNORE`` in its own (auto)commit, before
    the job's transaction, so that transaction locks an existing row only (a lock on a row that
    does not exist yet takes gap locks, which deadlocked under a follow storm)."""
    table = NotificationGroup._meta.db_table
    insert = connection.ops.insert_statement(on_conflict=OnConflict.IGNORE)
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    day = connection.ops.adapt_datefield_value(now_day)
    with connection.cursor() as cursor:
        cursor.execute(
            f"{insert} {table} (recipient_id, kind, day, count, latest_actor_ids, updated_at, unread) VALUES (%s, %s, %s, 0, %s, %s, %s)",
            [recipient_id, kind, day, "[]", now, True],
        )


def notification_add(kind: str, *, recipient_id: int, actor_id: int) -> bool:
    """Record that ``actor_id`` did ``kind`` (``FOLLOW``, ``REQUEST``, ``APPROVED``) to
    ``recipient_id``, if it still stands; idempotent.

    The same event within ``REPEAT_SECONDS`` of the row's time changes
    nothing; later, the row comes back to the top, unread. The day's group
    counts it and shows the actor first.

    :returns: True when the recipient has one more unread notification.
    :raises ValueError: an unknown ``kind``.
    """
    if kind not in (FOLLOW, REQUEST, APPROVED):
        raise ValueError(f"unknown notification kind {kind!r}")
    if not _still_stands(kind, recipient_id=recipient_id, actor_id=actor_id):
        return False
    return retry_on_deadlock(lambda: _add(kind, recipient_id=recipient_id, actor_id=actor_id))


def _add(kind: str, *, recipient_id: int, actor_id: int) -> bool:
    now = timezone.now()
    _ensure_group(recipient_id, kind, now.date())
    with transaction.atomic():
        # The group's row lock serialises the jobs of one recipient, kind and day (a storm of
        # follows of one account), so the counts never race; the row exists already. No
        # account row is locked: a follow holds its follower's.
        group = NotificationGroup.objects.select_for_update().get(recipient_id=recipient_id, kind=kind, day=now.date())
        row = Notification.objects.select_for_update().filter(recipient_id=recipient_id, kind=kind, actor_id=actor_id).first()
        if row is not None and row.created_at > now - timedelta(seconds=REPEAT_SECONDS):
            return False
        if row is None:
            Notification.objects.create(recipient_id=recipient_id, kind=kind, actor_id=actor_id, created_at=now, group=group)
            unread_now = True
        else:
            unread_now = row.read_at is not None
            if row.group_id is not None and row.group_id != group.pk:
                NotificationGroup.objects.filter(pk=row.group_id).update(count=Greatest(F("count") - 1, 0))
            Notification.objects.filter(pk=row.pk).update(created_at=now, read_at=None, group=group)
        moved_in = row is None or row.group_id != group.pk
        actors = [actor_id] + [other for other in group.latest_actor_ids if other != actor_id]
        NotificationGroup.objects.filter(pk=group.pk).update(
            count=F("count") + (1 if moved_in else 0), latest_actor_ids=actors[:GROUP_ACTORS], updated_at=now, unread=True
        )
        if unread_now:
            transaction.on_commit(partial(_counter_increment, recipient_id))
    return unread_now


def _counter_increment(recipient_id: int) -> None:
    key = redis_keys.unread_key(recipient_id)
    if not redis_available():
        return
    try:
        lua(INCR_IF_EXISTS_LUA)(keys=[key], args=[], client=get_redis())
    except REDIS_ERRORS as exc:
        redis_failed(exc)


def notifications_mark_read(*, recipient_id: int) -> int:
    """Mark every notification of ``recipient_id`` read; the counter is 0 after commit.

    :returns: how many were unread.
    """
    with transaction.atomic():
        marked = Notification.objects.filter(recipient_id=recipient_id, read_at__isnull=True).update(read_at=timezone.now())
        NotificationGroup.objects.filter(recipient_id=recipient_id, unread=True).update(unread=False)
        transaction.on_commit(partial(counter_set, recipient_id, 0))
    return marked


def counter_set(recipient_id: int, value: int) -> None:
    """Set ``recipient_id``'s unread counter in Redis, best effort (a failure opens the breaker)."""
    if not redis_available():
        return
    try:
        get_redis().set(redis_keys.unread_key(recipient_id), int(value), ex=redis_keys.UNREAD_TTL_SECONDS)
    except REDIS_ERRORS as exc:
        redis_failed(exc)

"""Every write of notifications.

``notification_add`` is the body of the outbox jobs (``notifications.outbox``):
it runs after the change committed, checks that the change still stands,
and writes the row, its group and the recipient's unread counter in one
transaction; the counter's Redis mirror follows after commit.
``notifications_mark_read`` is the reader's; ``unread_reconcile`` the
nightly repair of the counters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date, datetime, timedelta
from functools import partial
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, F, Max, Q
from django.db.models.constants import OnConflict
from django.db.models.functions import Greatest
from django.utils import timezone

from core import outbox
from core.cluster import pipeline
from core.models import OutboxEntry
from core.redis import get_redis
from core.transactions import retry_on_deadlock
from social.models import Block, Follow, FollowRequest, Mute, live_mutes
from users.models import User

from . import redis_keys
from .models import APPROVED, FOLLOW, GROUP_ACTORS, REPEAT_SECONDS, REQUEST, Notification, NotificationGroup, UnreadCounter
from .selectors import counter_publish


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


def _insert_ignore(table: str, columns: str, values: list[Any]) -> None:
    insert = connection.ops.insert_statement(on_conflict=OnConflict.IGNORE)
    with connection.cursor() as cursor:
        cursor.execute(f"{insert} {table} ({columns}) VALUES ({', '.join(['%s'] * len(values))})", values)


def _ensure_rows(recipient_id: int, kind: str, now_day: date) -> None:
    """Make sure the recipient's counter row and the day's group row exist: ``INSERT IGNORE`` in
    their own (auto)commits, before the job's transaction, so that transaction locks existing
    rows only (a lock on a row that does not exist yet takes gap locks, which deadlocked under
    a follow storm)."""
    _insert_ignore(UnreadCounter._meta.db_table, "recipient_id, unread, version", [recipient_id, 0, 0])
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    day = connection.ops.adapt_datefield_value(now_day)
    _insert_ignore(NotificationGroup._meta.db_table, "recipient_id, kind, day, count, latest_actor_ids, updated_at, unread", [recipient_id, kind, day, 0, "[]", now, True])


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
    day = timezone.now().date()
    _ensure_rows(recipient_id, kind, day)
    with transaction.atomic():
        # The counter row's lock serialises the jobs of one recipient (a storm of follows of
        # one account) and its mark-read, so the counts never race; it and the group row
        # exist already. No account row is locked: a follow holds its follower's.
        counter = UnreadCounter.objects.select_for_update().get(pk=recipient_id)
        # The time after the lock: one recipient's notifications are stamped in the order
        # they commit, so a page's newest time bounds what it showed (mark-read).
        now = timezone.now()
        if now.date() != day:
            _ensure_rows(recipient_id, kind, now.date())  # midnight passed meanwhile
        group = NotificationGroup.objects.select_for_update().get(recipient_id=recipient_id, kind=kind, day=now.date())
        row = Notification.objects.filter(recipient_id=recipient_id, kind=kind, actor_id=actor_id).first()
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
            _counter_change(counter, counter.unread + 1)
    return unread_now


def _counter_change(counter: UnreadCounter, unread: int) -> None:
    """Store ``unread`` in ``counter`` (locked by the caller's transaction) at the next version;
    its outbox entry writes the Redis mirror after commit."""
    counter.unread, counter.version = max(0, unread), counter.version + 1
    counter.save(update_fields=["unread", "version"])
    outbox.record(COUNTER, subject_id=counter.recipient_id)


def notifications_mark_read(*, recipient_id: int, up_to: datetime | None = None) -> int:
    """Mark the notifications of ``recipient_id`` read, those that came by ``up_to`` (default
    now: all; a page passes the newest time it showed, so one that came since stays unread).

    :returns: how many were unread.
    """

    def write() -> int:
        with transaction.atomic():
            counter = UnreadCounter.objects.select_for_update().filter(pk=recipient_id).first()
            if counter is None:
                return 0  # never notified
            until = up_to or timezone.now()
            marked = Notification.objects.filter(recipient_id=recipient_id, read_at__isnull=True, created_at__lte=until).update(read_at=timezone.now())
            NotificationGroup.objects.filter(recipient_id=recipient_id, unread=True, updated_at__lte=until).update(unread=False)
            _counter_change(counter, counter.unread - marked)
        return marked

    return retry_on_deadlock(write)


def counter_recount(*, recipient_id: int) -> int:
    """Count ``recipient_id``'s unread notifications again into its counter row (the reconcile's
    repair), under the row's lock, so no job of the recipient runs meanwhile.

    :returns: the count.
    """
    _insert_ignore(UnreadCounter._meta.db_table, "recipient_id, unread, version", [recipient_id, 0, 0])
    with transaction.atomic():
        counter = UnreadCounter.objects.select_for_update().get(pk=recipient_id)
        unread = Notification.objects.filter(recipient_id=recipient_id, read_at__isnull=True).count()
        _counter_change(counter, unread)
    return unread


def unread_reconcile(*, batch_users: int = 2000, on_progress: Callable[[int, int], None] | None = None) -> int:
    """Repair the unread counters, ``batch_users`` account ids at a time; safe to interrupt and
    re-run. A counter row whose count differs from its unread rows (rows changed behind the
    application's back) is recounted under its lock; a Redis counter that differs from its row
    is rewritten (a missing one is set at its next read).

    :param on_progress: called with ``(ids walked, counters repaired)`` after each batch.
    :returns: how many counters were repaired (rows and Redis values).
    :raises: ``REDIS_ERRORS``.
    """
    client = get_redis()
    top = User.objects.aggregate(top=Max("pk"))["top"] or 0
    repaired = 0
    for low in range(0, top, batch_users):
        high = min(low + batch_users, top)
        truth = dict(
            Notification.objects.filter(recipient_id__gt=low, recipient_id__lte=high, read_at__isnull=True)
            .values("recipient_id")
            .annotate(n=Count("pk"))
            .values_list("recipient_id", "n")
        )
        rows = dict(UnreadCounter.objects.filter(pk__gt=low, pk__lte=high).values_list("pk", "unread"))
        drifted = sorted(user_id for user_id in set(truth) | set(rows) if truth.get(user_id, 0) != rows.get(user_id, 0))
        for user_id in drifted:
            retry_on_deadlock(partial(counter_recount, recipient_id=user_id))
        fixed = set(drifted)
        counters = list(UnreadCounter.objects.filter(pk__gt=low, pk__lte=high).order_by("pk").values_list("pk", "version", "unread"))
        pipe = pipeline(client)
        for user_id, _, _ in counters:
            pipe.get(redis_keys.unread_key(user_id))
        for (user_id, version, unread), stored in zip(counters, pipe.execute()):
            if stored is not None and stored != redis_keys.unread_value(version, unread).encode():
                counter_publish(client, user_id, version, unread, repair=True)
                fixed.add(user_id)
        repaired += len(fixed)
        if on_progress is not None:
            on_progress(high - low, len(fixed))
    return repaired


def _apply_counters(entries: Sequence[OutboxEntry]) -> None:
    ids = sorted({entry.subject_id for entry in entries})
    client = get_redis()
    for recipient_id, version, unread in UnreadCounter.objects.filter(pk__in=ids).values_list("pk", "version", "unread"):
        counter_publish(client, recipient_id, version, unread)


# A counter row changed (a notification added, notifications read, a recount):
# its Redis mirror is written right after commit from the row; a Redis failure
# leaves the entry to the drain, which writes the row's state then.
COUNTER = outbox.register("notifications.counter", apply=_apply_counters, inline=True, stage=3)

"""Every write of notifications.

``notification_add`` is the outbox jobs' body (checks the change still stands, then row, group
and unread counter in one transaction); ``notifications_mark_read`` the reader's; the
``*_refresh`` jobs derive groups and counters again from the rows (nothing patches a count);
``notifications_reconcile`` the nightly check. Behaviour: docs/behaviours.md (Notifications).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import date, datetime, timedelta
from typing import Any

import redis
from django.db import connection, transaction
from django.db.models import Count, Exists, Max, OuterRef, Q, QuerySet
from django.db.models.constants import OnConflict
from django.utils import timezone

from core import outbox, streaming
from core import redis_keys as core_keys
from core.cluster import pipeline
from core.models import OutboxEntry
from core.redis import get_redis
from core.transactions import retry_on_deadlock
from social.models import Block, Follow, FollowRequest, Mute, live_mutes
from users.account_rows import forget_value_read
from users.models import NOTIFICATIONS, User
from users.services import marker_advance

from . import redis_keys
from .models import (
    APPROVED,
    FOLLOW,
    REPEAT_SECONDS,
    REQUEST,
    Notification,
    NotificationGroup,
    NotificationsReconcileRun,
    UnreadCounter,
)
from .selectors import counter_publish, derive_group, visible


def _still_stands(kind: str, *, recipient_id: int, actor_id: int) -> bool:
    """Whether the event still holds now: the follow (or request) exists between active accounts,
    no block stands between them and the recipient does not mute the actor."""
    if kind == FOLLOW:
        exists = Follow.objects.filter(
            follower_id=actor_id, followee_id=recipient_id, follower__is_active=True, followee__is_active=True
        ).exists()
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
    """``INSERT IGNORE`` the recipient's counter row and the day's group row in their own commits,
    so the job's transaction locks existing rows only (locking a missing row takes gap locks,
    which deadlocked under a follow storm).
    """
    _insert_ignore(UnreadCounter._meta.db_table, "recipient_id, unread, version", [recipient_id, 0, 0])
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    day = connection.ops.adapt_datefield_value(now_day)
    # Made as its no rows derive it (read, no actors): the job may find under its lock that the
    # change no longer stands and add no row, leaving the group as made.
    _insert_ignore(
        NotificationGroup._meta.db_table,
        "recipient_id, kind, day, count, latest_actor_ids, updated_at, unread",
        [recipient_id, kind, day, 0, "[]", now, False],
    )


def notification_add(kind: str, *, recipient_id: int, actor_id: int) -> bool:
    """Record that ``actor_id`` did ``kind`` (``FOLLOW``, ``REQUEST``, ``APPROVED``) to ``recipient_id``,
    if it still stands; idempotent (a repeat within ``REPEAT_SECONDS`` changes nothing; later, the
    row comes back to the top, unread).

    Publishes a ``notification`` event to the recipient's stream when it has one more unread.

    :returns: True when the recipient has one more unread notification.
    :raises ValueError: an unknown ``kind``.
    """
    if kind not in (FOLLOW, REQUEST, APPROVED):
        raise ValueError(f"unknown notification kind {kind!r}")
    if not _still_stands(kind, recipient_id=recipient_id, actor_id=actor_id):
        return False
    added = retry_on_deadlock(lambda: _add(kind, recipient_id=recipient_id, actor_id=actor_id))
    row_id = (
        Notification.objects.filter(recipient_id=recipient_id, kind=kind, actor_id=actor_id).values_list("pk", flat=True).first()
    )
    if added and row_id is not None:
        # After the commit: the streaming process reads the row to format it.
        streaming.publish(get_redis(), [core_keys.stream_channel(recipient_id)], streaming.Event(streaming.NOTIFICATION, row_id))
    return added


def _add(kind: str, *, recipient_id: int, actor_id: int) -> bool:
    day = timezone.now().date()
    _ensure_rows(recipient_id, kind, day)
    with transaction.atomic():
        # The counter row's lock serialises the jobs of one recipient (a storm of follows of
        # one account), its mark-read and every refresh (block, deletion, deactivation), so
        # the counts never race; it and the group row exist already. No account row is
        # locked: a follow holds its follower's.
        counter = UnreadCounter.objects.select_for_update().get(pk=recipient_id)
        # Again under the lock: a block whose refresh ran between the first check and this
        # lock would otherwise leave this row behind it. The actor's account row is read
        # under a shared lock, so a deactivation either commits first (and is seen here) or
        # waits for this row, which its refresh then finds.
        _share_lock_account(actor_id)
        if not _still_stands(kind, recipient_id=recipient_id, actor_id=actor_id):
            return False
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
            Notification.objects.filter(pk=row.pk).update(created_at=now, read_at=None, group=group)
        # Both groups the row touched (the day it left, the day it came to) are derived again
        # from their rows: the old one no longer counts or names the actor.
        _refresh_groups(sorted({group.pk, *([row.group_id] if row is not None and row.group_id else [])}))
        if unread_now:
            _counter_change(counter, counter.unread + 1)
    return unread_now


def _share_lock_account(user_id: int) -> None:
    lock = " LOCK IN SHARE MODE" if connection.vendor == "mysql" else ""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id FROM {User._meta.db_table} WHERE id = %s{lock}", [user_id])


def _refresh_groups(group_ids: Sequence[int]) -> int:
    """Derive each group's count, newest actors, time and unread flag from its visible rows, under the
    caller's counter lock, in pk order (two refreshes lock alike).

    :returns: how many groups changed.
    """
    changed = 0
    for group in NotificationGroup.objects.select_for_update().filter(pk__in=group_ids).order_by("pk"):
        derived = derive_group(group.pk)
        if derived.differs(group):
            NotificationGroup.objects.filter(pk=group.pk).update(
                count=derived.count,
                latest_actor_ids=derived.actor_ids,
                unread=derived.unread,
                updated_at=derived.updated_at or group.updated_at,
            )
            changed += 1
    return changed


def _recount(counter: UnreadCounter) -> None:
    """Count ``counter``'s unread visible rows again into it (locked by the caller), at the next version."""
    _counter_change(
        counter, visible(Notification.objects.filter(recipient_id=counter.recipient_id, read_at__isnull=True)).count()
    )


def _lock_counters(recipient_ids: Sequence[int]) -> dict[int, UnreadCounter]:
    for recipient_id in recipient_ids:
        _insert_ignore(UnreadCounter._meta.db_table, "recipient_id, unread, version", [recipient_id, 0, 0])
    found = UnreadCounter.objects.select_for_update().filter(pk__in=sorted(recipient_ids)).order_by("pk")
    return {counter.pk: counter for counter in found}


def recipient_refresh(*, recipient_id: int, group_ids: Sequence[int] = ()) -> None:
    """Derive ``recipient_id``'s ``group_ids`` from their rows again and recount its unread
    counter (the after-commit work of a deletion, a deactivation or a reactivation); idempotent."""

    def write() -> None:
        with transaction.atomic():
            counter = _lock_counters([recipient_id])[recipient_id]
            _refresh_groups(group_ids)
            _recount(counter)

    retry_on_deadlock(write)


def pair_refresh(*, user_id: int, other_id: int) -> int:
    """Make the notifications between two accounts agree with the database now (after a block or an
    ended request): rows that no longer stand go, their groups are derived again, both counters
    recounted; idempotent.

    :returns: how many rows were removed.
    """
    ids = sorted({user_id, other_id})

    def write() -> int:
        with transaction.atomic():
            counters = _lock_counters(ids)
            stale = _stale_rows(user_id, other_id)
            removed = list(stale.values_list("pk", "recipient_id", "group_id"))
            Notification.objects.filter(pk__in=[pk for pk, _, _ in removed]).delete()
            for recipient_id, counter in counters.items():
                _refresh_groups(sorted({group for _, owner, group in removed if owner == recipient_id and group is not None}))
                _recount(counter)
        return len(removed)

    return retry_on_deadlock(write)


def _stale_rows(user_id: int, other_id: int) -> QuerySet[Notification]:
    """The rows between the two accounts that should not exist now."""
    between = Q(recipient_id=user_id, actor_id=other_id) | Q(recipient_id=other_id, actor_id=user_id)
    blocked = Q(blocker_id=user_id, blocked_id=other_id) | Q(blocker_id=other_id, blocked_id=user_id)
    if Block.objects.filter(blocked).exists():
        return Notification.objects.filter(between)
    ended = Q(pk__in=[])
    for recipient_id, actor_id in ((user_id, other_id), (other_id, user_id)):
        if not FollowRequest.objects.filter(requester_id=actor_id, target_id=recipient_id).exists():
            ended |= Q(recipient_id=recipient_id, actor_id=actor_id)
    return Notification.objects.filter(ended, kind=REQUEST)


def actor_refresh(*, actor_id: int, batch: int = 500) -> int:
    """Derive again every group and counter in which ``actor_id``'s rows count (its account was
    deactivated or reactivated: its rows are hidden or shown again), one recipient at a time.

    :returns: how many recipients were refreshed.
    """
    pairs = (
        Notification.objects.filter(actor_id=actor_id)
        .values_list("recipient_id", "group_id")
        .order_by("recipient_id", "group_id")
        .distinct()
    )
    by_recipient: dict[int, set[int]] = {}
    for recipient_id, group_id in pairs.iterator(chunk_size=batch):
        by_recipient.setdefault(recipient_id, set()).update([group_id] if group_id is not None else [])
    for recipient_id, groups in by_recipient.items():
        recipient_refresh(recipient_id=recipient_id, group_ids=sorted(groups))
    return len(by_recipient)


def actor_row_count(*, actor_id: int) -> int:
    """How many notification rows name ``actor_id``."""
    return Notification.objects.filter(actor_id=actor_id).count()


def actor_rows(*, actor_id: int) -> list[tuple[int, int | None]]:
    """``(recipient id, group id)`` of every group holding a row of ``actor_id`` (read before the
    account's deletion removes them, to refresh those groups after commit)."""
    return list(
        Notification.objects.filter(actor_id=actor_id)
        .values_list("recipient_id", "group_id")
        .order_by("recipient_id", "group_id")
        .distinct()
    )


def _counter_change(counter: UnreadCounter, unread: int) -> None:
    """Store ``unread`` in ``counter`` (locked by the caller's transaction) at the next version;
    its outbox entry writes the Redis mirror after commit."""
    counter.unread, counter.version = max(0, unread), counter.version + 1
    counter.save(update_fields=["unread", "version"])
    outbox.record(COUNTER, subject_id=counter.recipient_id)
    forget_value_read(redis_keys.unread_key(counter.recipient_id))  # this request's header reads the new count


def notifications_mark_read(*, recipient_id: int, up_to: datetime | None = None) -> int:
    """Mark the notifications of ``recipient_id`` read, those that came by ``up_to`` (default
    now: all; a page passes the newest time it showed, so one that came since stays unread), and
    move the ``notifications`` marker forwards to the newest of them.

    :returns: how many were unread.
    """

    def write() -> int:
        with transaction.atomic():
            counter = UnreadCounter.objects.select_for_update().filter(pk=recipient_id).first()
            if counter is None:
                return 0  # never notified
            until = up_to or timezone.now()
            marked = Notification.objects.filter(recipient_id=recipient_id, read_at__isnull=True, created_at__lte=until).update(
                read_at=timezone.now()
            )
            NotificationGroup.objects.filter(recipient_id=recipient_id, unread=True, updated_at__lte=until).update(unread=False)
            # Recounted, not decremented: rows hidden meanwhile (a block, a deactivation) are
            # in neither figure.
            _recount(counter)
        return marked

    marked = retry_on_deadlock(write)
    newest = (
        Notification.objects.filter(recipient_id=recipient_id, created_at__lte=up_to or timezone.now())
        .aggregate(newest=Max("id"))
        .get("newest")
    )
    if newest:
        # What was marked read was seen: Mastodon's notifications marker follows it.
        marker_advance(user_id=recipient_id, timeline=NOTIFICATIONS, last_read_id=int(newest))
    return marked


def counter_recount(*, recipient_id: int) -> int:
    """Count ``recipient_id``'s unread notifications again into its counter row (the reconcile's
    repair), under the row's lock, so no job of the recipient runs meanwhile.

    :returns: the count.
    """
    _insert_ignore(UnreadCounter._meta.db_table, "recipient_id, unread, version", [recipient_id, 0, 0])
    with transaction.atomic():
        counter = UnreadCounter.objects.select_for_update().get(pk=recipient_id)
        _recount(counter)
    return counter.unread


@dataclass
class NotificationsDrift:
    """Figures of a notifications reconcile: ``*_found`` differed, ``*_fixed`` were repaired (0 in a
    dry run), for rows, groups, counters and the Redis mirrors.
    """

    rows_found: int = 0
    rows_fixed: int = 0
    groups_found: int = 0
    groups_fixed: int = 0
    counters_found: int = 0
    counters_fixed: int = 0
    mirrors_found: int = 0
    mirrors_fixed: int = 0

    def as_dict(self) -> dict[str, int]:
        """Every figure by name."""
        return asdict(self)

    def add(self, other: NotificationsDrift) -> None:
        """Add ``other``'s figures to these."""
        for name, value in other.as_dict().items():
            setattr(self, name, getattr(self, name) + value)


def _stale_pairs(low: int, high: int) -> list[tuple[int, int]]:
    """``(recipient, actor)`` of rows of recipients in ``(low, high]`` that should not exist."""
    in_range = Notification.objects.filter(recipient_id__gt=low, recipient_id__lte=high)
    blocks = Block.objects.filter(
        Q(blocker_id=OuterRef("recipient_id"), blocked_id=OuterRef("actor_id"))
        | Q(blocker_id=OuterRef("actor_id"), blocked_id=OuterRef("recipient_id"))
    )
    pending = FollowRequest.objects.filter(requester_id=OuterRef("actor_id"), target_id=OuterRef("recipient_id"))
    stale = in_range.filter(Exists(blocks) | (Q(kind=REQUEST) & ~Exists(pending)))
    return list(stale.values_list("recipient_id", "actor_id").order_by("recipient_id", "actor_id"))


@dataclass
class NotificationsFound:
    """What differs from the rows for recipients in a range: ``stale`` rows' ``(recipient, actor)``,
    ``groups`` (recipient id -> ids of its groups whose figures differ), ``counters`` (recipient
    ids whose counter row differs) and ``mirrors`` (recipient ids whose Redis counter differs)."""

    stale: list[tuple[int, int]]
    groups: dict[int, list[int]]
    counters: list[int]
    mirrors: list[int]


def notifications_found(client: redis.Redis, low: int, high: int) -> NotificationsFound:
    """Find what differs from the rows for recipients with ids in ``(low, high]`` (the reconcile's
    check, no repair).

    :raises: ``REDIS_ERRORS``.
    """
    stale = _stale_pairs(low, high)
    groups: dict[int, list[int]] = {}
    for group in NotificationGroup.objects.filter(recipient_id__gt=low, recipient_id__lte=high).order_by("pk"):
        if derive_group(group.pk).differs(group):
            groups.setdefault(group.recipient_id, []).append(group.pk)
    truth = dict(
        visible(Notification.objects.filter(recipient_id__gt=low, recipient_id__lte=high, read_at__isnull=True))
        .values("recipient_id")
        .annotate(n=Count("pk"))
        .values_list("recipient_id", "n")
    )
    rows = dict(UnreadCounter.objects.filter(pk__gt=low, pk__lte=high).values_list("pk", "unread"))
    counters = sorted(user_id for user_id in set(truth) | set(rows) if truth.get(user_id, 0) != rows.get(user_id, 0))
    stored = list(UnreadCounter.objects.filter(pk__gt=low, pk__lte=high).order_by("pk").values_list("pk", "version", "unread"))
    pipe = pipeline(client)
    for user_id, _, _ in stored:
        pipe.get(redis_keys.unread_key(user_id))
    mirrors = [
        user_id
        for (user_id, version, unread), value in zip(stored, pipe.execute())
        if value is not None and value != redis_keys.unread_value(version, unread).encode()
    ]
    return NotificationsFound(stale=stale, groups=groups, counters=counters, mirrors=mirrors)


def _reconcile_batch(client: redis.Redis, low: int, high: int, *, dry_run: bool) -> NotificationsDrift:
    # Everything is found first, so a dry run and a repair of the same state report the
    # same ``*_found``; then the repairs, rows first (their removal re-derives groups and
    # counters too), each idempotent under the recipient's lock.
    found = notifications_found(client, low, high)
    stale, groups, counters, mirrors = found.stale, found.groups, found.counters, found.mirrors
    drift = NotificationsDrift(
        rows_found=len(stale),
        groups_found=sum(len(ids) for ids in groups.values()),
        counters_found=len(counters),
        mirrors_found=len(mirrors),
    )
    if dry_run:
        return drift
    for recipient_id, actor_id in sorted(set(stale)):
        drift.rows_fixed += pair_refresh(user_id=recipient_id, other_id=actor_id)
    for recipient_id in sorted(set(groups) | set(counters)):
        recipient_refresh(recipient_id=recipient_id, group_ids=groups.get(recipient_id, []))
    drift.groups_fixed, drift.counters_fixed = drift.groups_found, drift.counters_found
    for user_id, version, unread in (
        UnreadCounter.objects.filter(pk__in=mirrors).order_by("pk").values_list("pk", "version", "unread")
    ):
        counter_publish(client, user_id, version, unread, repair=True)
        drift.mirrors_fixed += 1
    return drift


def notifications_reconcile(
    *, dry_run: bool = False, batch_users: int = 2000, on_progress: Callable[[int, NotificationsDrift], None] | None = None
) -> NotificationsDrift:
    """Check notification rows, groups, counters and Redis counters against the rows, ``batch_users``
    recipient ids at a time, and repair unless ``dry_run`` (under each recipient's counter lock);
    safe to interrupt and re-run.

    :param on_progress: called with ``(ids walked, the batch's figures)`` after each batch.
    :returns: the figures (``NotificationsDrift``).
    :raises: ``REDIS_ERRORS``.
    """
    client = get_redis()
    total = NotificationsDrift()
    low = 0
    while True:
        # By keyset over the accounts there are (ids are sparse after deletions and imports).
        ids = list(User.objects.filter(pk__gt=low).order_by("pk").values_list("pk", flat=True)[:batch_users])
        if not ids:
            return total
        high = ids[-1]
        drift = _reconcile_batch(client, low, high, dry_run=dry_run)
        total.add(drift)
        if on_progress is not None:
            on_progress(len(ids), drift)
        low = high


def notifications_reconcile_recorded(*, dry_run: bool = False, batch_users: int = 2000) -> NotificationsReconcileRun:
    """``notifications_reconcile`` recorded as a ``NotificationsReconcileRun`` (the admin's health
    page shows the newest), its figures saved after every batch.

    :raises: what ``notifications_reconcile`` raises, after the row kept the error text.
    """
    run = NotificationsReconcileRun.objects.create(dry_run=dry_run)
    total = NotificationsDrift()

    def progress(_: int, drift: NotificationsDrift) -> None:
        total.add(drift)
        for name, value in total.as_dict().items():
            setattr(run, name, value)
        run.save(update_fields=list(total.as_dict()))

    try:
        notifications_reconcile(dry_run=dry_run, batch_users=batch_users, on_progress=progress)
    except Exception as exc:
        run.error = repr(exc)[:2000]
        run.save(update_fields=["error"])
        raise
    run.finished_at = timezone.now()
    run.save(update_fields=["finished_at"])
    return run


def _apply_counters(entries: Sequence[OutboxEntry]) -> None:
    ids = sorted({entry.subject_id for entry in entries})
    client = get_redis()
    for recipient_id, version, unread in UnreadCounter.objects.filter(pk__in=ids).values_list("pk", "version", "unread"):
        counter_publish(client, recipient_id, version, unread)


# A counter row changed (a notification added, notifications read, a recount):
# its Redis mirror is written right after commit from the row; a Redis failure
# leaves the entry to the drain, which writes the row's state then.
COUNTER = outbox.register("notifications.counter", apply=_apply_counters, inline=True, stage=3)


def notifications_drift(*, repair: bool) -> int:
    """The table's reconcile of notification rows, groups and counters (``notifications_reconcile``).

    :returns: rows, groups, counters and Redis mirrors that differed from the rows.
    """
    drift = notifications_reconcile(dry_run=not repair)
    return drift.rows_found + drift.groups_found + drift.counters_found + drift.mirrors_found

"""Notifications: "B followed you", "B asked to follow you", "A approved your request".

The database is the truth. One ``Notification`` per (recipient, kind,
actor): the same event again within ``REPEAT_SECONDS`` (a follow, an
unfollow and a follow again) changes nothing; later it brings the row back
to the top, unread. Rows of one kind and day are counted in a
``NotificationGroup`` ("B, C and 41 others followed you"): its count and
newest actors are re-derived from the visible rows under it (actor active,
no block either way) whenever a row is added, moved, removed or hidden
(``services.recipient_refresh``), so a page reads one group row per line
whatever its size.
Written by the change's outbox job (``notifications.outbox``), never
before commit. The unread count per recipient is kept in the database
(``UnreadCounter``, in the same transactions, recounted from the rows
whenever rows are hidden or removed) and mirrored in Redis
(``notifications.redis_keys.unread_key``), so a read is one GET, or one
primary-key read while the mirror is missing.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

FOLLOW = "follow"
REQUEST = "follow_request"
APPROVED = "request_approved"
KINDS = [(FOLLOW, "followed you"), (REQUEST, "asked to follow you"), (APPROVED, "approved your follow request")]

# An event repeated within this many seconds is the same notification.
REPEAT_SECONDS = 60
# Actors a group remembers for its line ("B, C and 41 others").
GROUP_ACTORS = 3


class NotificationGroup(models.Model):
    """The notifications of one ``kind`` to ``recipient`` on one UTC ``day``: how many, the newest
    actors (ids, newest first, at most ``GROUP_ACTORS``) and when the newest came."""

    recipient = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_groups")
    kind = models.CharField(max_length=20, choices=KINDS)
    day = models.DateField()
    count = models.PositiveIntegerField(default=0)
    latest_actor_ids = models.JSONField(default=list)
    updated_at = models.DateTimeField(default=timezone.now)
    unread = models.BooleanField(default=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["recipient", "kind", "day"], name="notification_group_unique_day")]
        # The page: a recipient's groups, newest first (keyset on updated_at, id).
        indexes = [models.Index(fields=["recipient", "updated_at", "id"], name="notification_group_newest")]

    def __str__(self) -> str:
        return f"{self.count} {self.kind} to {self.recipient_id} on {self.day}"


class Notification(models.Model):
    """``actor`` did ``kind`` to ``recipient`` at ``created_at``; ``read_at`` None while unread."""

    recipient = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications_caused")
    kind = models.CharField(max_length=20, choices=KINDS)
    created_at = models.DateTimeField(default=timezone.now)
    read_at = models.DateTimeField(null=True, blank=True)
    group = models.ForeignKey(NotificationGroup, on_delete=models.SET_NULL, null=True, blank=True, related_name="rows")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["recipient", "kind", "actor"], name="notification_unique_event")]
        indexes = [
            models.Index(fields=["recipient", "read_at"], name="notification_unread"),
            # A group's re-derivation: its rows newest first (count and the newest actors).
            models.Index(fields=["group", "created_at", "id"], name="notification_group_rows"),
        ]

    def __str__(self) -> str:
        return f"{self.actor_id} {self.kind} {self.recipient_id}"


class UnreadCounter(models.Model):
    """How many visible notifications of ``recipient`` are ``unread`` (actor active, no block
    between them), raised by the transaction that adds one and recounted from the rows by every
    other that changes them (mark-read, a block, a deletion, a deactivation): their first lock,
    so one recipient's writers queue here. ``version``, raised by each, orders their writes of
    the Redis mirror (an older one never overwrites a newer one)."""

    recipient = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="+")
    unread = models.PositiveIntegerField(default=0)
    version = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.unread} unread for {self.recipient_id} (v{self.version})"


# The drift figures of a reconcile run, in the order the command and the health page show them.
RECONCILE_FIGURES = ("rows_found", "rows_fixed", "groups_found", "groups_fixed", "counters_found", "counters_fixed", "mirrors_found", "mirrors_fixed")


class NotificationsReconcileRun(models.Model):
    """One run of ``reconcile_notifications`` (command or nightly task) and its drift figures:
    rows that should not be there (a block between the accounts, a request no longer pending),
    groups whose count or names differ from their rows, counter rows that differ from their
    unread visible rows, Redis mirrors that differ from their row; ``*_found`` what differed,
    ``*_fixed`` what was repaired (0 in a dry run). ``finished_at`` None: running or failed."""

    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    dry_run = models.BooleanField(default=False)
    rows_found = models.PositiveIntegerField(default=0)
    rows_fixed = models.PositiveIntegerField(default=0)
    groups_found = models.PositiveIntegerField(default=0)
    groups_fixed = models.PositiveIntegerField(default=0)
    counters_found = models.PositiveIntegerField(default=0)
    counters_fixed = models.PositiveIntegerField(default=0)
    mirrors_found = models.PositiveIntegerField(default=0)
    mirrors_fixed = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, default="")

    class Meta:
        indexes = (models.Index(fields=["started_at"], name="notifications_reconcile_start"),)

    def __str__(self) -> str:
        return f"notifications reconcile {self.started_at:%Y-%m-%d %H:%M}"

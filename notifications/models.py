"""Notifications: "B followed you", "B asked to follow you", "A approved your request".

The database is the truth: one ``Notification`` per (recipient, kind, actor), a
``NotificationGroup`` per kind and day derived from its visible rows, and an ``UnreadCounter``
mirrored in Redis. Written by the change's outbox job after commit. Behaviour: docs/behaviours.md
(Notifications).
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
    """How many visible notifications of ``recipient`` are ``unread``; every writer of them locks it
    first, and ``version`` (raised by each) orders writes of the Redis mirror.
    """

    recipient = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="+")
    unread = models.PositiveIntegerField(default=0)
    version = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.unread} unread for {self.recipient_id} (v{self.version})"


# The drift figures of a reconcile run, in the order the command and the health page show them.
RECONCILE_FIGURES = (
    "rows_found",
    "rows_fixed",
    "groups_found",
    "groups_fixed",
    "counters_found",
    "counters_fixed",
    "mirrors_found",
    "mirrors_fixed",
)


class NotificationsReconcileRun(models.Model):
    """One run of ``reconcile_notifications`` and its figures: ``*_found`` (rows, groups, counters,
    mirrors that differed) and ``*_fixed`` (0 in a dry run); ``finished_at`` None: running or failed.
    """

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

"""The transactional outbox's table (``core.outbox`` is its mechanism)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class OutboxEntry(models.Model):
    """One side effect of a committed change that Redis (or another derived store) must reflect.

    Written in the change's transaction; ``applied_at`` set once applied (purged after
    ``OUTBOX_RETENTION_SECONDS``). ``kind`` names the handler; ``subject_id``/``object_id`` are
    plain ids (not foreign keys: an entry outlives its rows). Design: docs/architecture.md#the-outbox-and-its-kinds.
    """

    kind = models.CharField(max_length=40)
    subject_id = models.BigIntegerField()
    object_id = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    applied_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=500, blank=True, default="")
    # Not stored: what the recording transaction knew of the outcome (a
    # follow's score, None for an unfollow) when ``hinted``, which an apply
    # in the same process may write first. Handlers verify it against the
    # database; entries read back from the table carry no hint.
    hinted: bool = False
    hint: int | None = None

    class Meta:
        verbose_name = "outbox entry"
        verbose_name_plural = "outbox entries"
        indexes = [
            # The drain walks pending entries oldest first; re-application
            # after a Redis rollback walks entries applied since a moment.
            models.Index(fields=["applied_at", "id"], name="outbox_pending"),
            # A rebuild re-applies the entries of the accounts it touched.
            models.Index(fields=["kind", "subject_id", "object_id"], name="outbox_subject"),
            models.Index(fields=["created_at"], name="outbox_age"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.subject_id} -> {self.object_id}"


class RedisWatch(models.Model):
    """What the drain last saw of one Redis server (``node``): its ``run_id`` and heartbeat, to notice a
    rollback (``core.outbox.watch_redis``; docs/architecture.md#consistency-under-faults).
    """

    node = models.CharField(max_length=200, unique=True)
    run_id = models.CharField(max_length=64)
    heartbeat_ms = models.BigIntegerField(default=0)
    checked_at = models.DateTimeField(default=timezone.now)
    rollbacks = models.PositiveIntegerField(default=0)
    last_rollback_at = models.DateTimeField(null=True, blank=True)
    last_rollback_to_ms = models.BigIntegerField(null=True, blank=True)
    last_reapplied = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.node} run {self.run_id[:8]}"

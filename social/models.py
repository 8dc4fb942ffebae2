from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils import timezone

# The follow graph's outbox kinds (``core.OutboxEntry.kind``), registered by ``social.outbox``.
OUTBOX_PAIR = "social.pair"
OUTBOX_USER = "social.user"


def now_whole_second() -> datetime:
    """Current time truncated to the second: Redis scores follows in whole
    seconds, so the database keeps the same value and both paths order alike."""
    return timezone.now().replace(microsecond=0)


def follow_score(created_at: datetime) -> int:
    """Redis score of a follow made at ``created_at``: its time in whole unix seconds."""
    return int(created_at.timestamp())


class Follow(models.Model):
    """One edge of the follow graph: ``follower`` follows ``followee``.

    Mirrored in Redis (``social.redis_keys``): the follower's followee set
    ``follow:{follower}`` and time-ordered ``following:z:{follower}``; the
    followee's follower set ``followers:{followee}`` and time-ordered
    ``followers:z:{followee}`` (sharded for big accounts). No signals: the
    services record a ``social.pair`` outbox entry (``core.outbox``) in the
    same transaction, applied after commit by ``social.outbox``.
    """

    follower = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="following_edges")
    followee = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="follower_edges")
    created_at = models.DateTimeField(default=now_whole_second)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["follower", "followee"], name="follow_unique_pair"),
            models.CheckConstraint(condition=~Q(follower=F("followee")), name="follow_no_self_follow"),
        ]
        indexes = [
            # "followers of X newest first": a backward range scan that
            # needs no table row (InnoDB secondary indexes carry the PK).
            models.Index(fields=["followee", "created_at", "follower"], name="follow_followers_newest"),
            # "following of X newest first".
            models.Index(fields=["follower", "created_at", "followee"], name="follow_following_newest"),
        ]

    def __str__(self) -> str:
        return f"{self.follower_id} -> {self.followee_id}"


class ReconcileRun(models.Model):
    """One run of ``reconcile_social_cache`` (command or nightly task) and its drift figures.

    Updated after every batch of accounts, so an interrupted run keeps its
    checkpoint (``last_user_id``) and ``--resume`` continues it; the admin
    health page shows the latest row. ``finished_at`` is None while the run
    is under way or after it was interrupted.
    """

    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    dry_run = models.BooleanField(default=False)
    # "full" (every member), "digest" (counts and digests, full diff where
    # they differ) or "counts" (cardinalities only).
    check_level = models.CharField(max_length=8, default="digest")
    sample = models.FloatField(default=1.0)  # fraction of accounts checked
    only_user_id = models.BigIntegerField(null=True, blank=True)
    last_user_id = models.BigIntegerField(default=0)  # checkpoint: every id <= this was walked
    users_checked = models.PositiveIntegerField(default=0)
    users_drifted = models.PositiveIntegerField(default=0)
    edges_checked = models.PositiveBigIntegerField(default=0)
    edges_missing = models.PositiveIntegerField(default=0)
    edges_extra = models.PositiveIntegerField(default=0)
    scores_wrong = models.PositiveIntegerField(default=0)
    pairs_repaired = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, default="")

    class Meta:
        indexes = [models.Index(fields=["started_at"], name="reconcile_run_started")]

    def __str__(self) -> str:
        return f"reconcile {self.started_at:%Y-%m-%d %H:%M} missing={self.edges_missing} extra={self.edges_extra}"

    @property
    def drift(self) -> int:
        """Edges missing + extra + with a wrong score (each counted per side)."""
        return self.edges_missing + self.edges_extra + self.scores_wrong

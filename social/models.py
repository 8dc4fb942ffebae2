from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils import timezone

# The follow graph's outbox kinds (``core.OutboxEntry.kind``), registered by ``social.outbox``.
OUTBOX_PAIR = "social.pair"
OUTBOX_USER = "social.user"
OUTBOX_CONTROL = "social.control"


def now_whole_second() -> datetime:
    """Current time truncated to the second: Redis scores follows in whole
    seconds, so the database keeps the same value and both paths order alike."""
    return timezone.now().replace(microsecond=0)


def now_whole_millisecond() -> datetime:
    """Current time truncated to the millisecond: the scale of the follow-requests cursor."""
    now = timezone.now()
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def follow_score(created_at: datetime) -> int:
    """Redis score of a follow made at ``created_at``: its time in whole unix seconds."""
    return int(created_at.timestamp())


class Follow(models.Model):
    """One edge of the follow graph: ``follower`` follows ``followee``.

    Mirrored in Redis (``social.redis_keys``) through the ``social.pair`` outbox entry the
    services record; no signals.
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


class Block(models.Model):
    """``blocker`` blocks ``blocked``: neither follows the other nor sees the other's account.

    Mirrored in ``blocks_key`` of both sides through the ``social.control`` entry; no signals.
    """

    blocker = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="blocks_made")
    blocked = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="blocks_received")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["blocker", "blocked"], name="block_unique_pair"),
            models.CheckConstraint(condition=~Q(blocker=F("blocked")), name="block_no_self_block"),
        ]
        indexes = [
            models.Index(fields=["blocker", "created_at"], name="block_blocker_newest"),
            models.Index(fields=["blocked"], name="block_blocked"),
        ]

    def __str__(self) -> str:
        return f"{self.blocker_id} blocks {self.blocked_id}"


def live_mutes() -> Q:
    """The filter of the ``Mute`` rows that hold now: no expiry, or one still ahead."""
    return Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now())


class Mute(models.Model):
    """``muter`` mutes ``muted`` until ``expires_at`` (None: until unmuted): only ``muted``'s notes leave
    ``muter``'s home feed. Mirrored in ``mutes_key`` as ``Block``; expired rows are ignored on read
    and deleted by ``mutes_expire``.
    """

    muter = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mutes_made")
    muted = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mutes_received")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["muter", "muted"], name="mute_unique_pair"),
            models.CheckConstraint(condition=~Q(muter=F("muted")), name="mute_no_self_mute"),
        ]
        indexes = [
            models.Index(fields=["muter", "created_at"], name="mute_muter_newest"),
            models.Index(fields=["expires_at"], name="mute_expiry"),
        ]

    def __str__(self) -> str:
        return f"{self.muter_id} mutes {self.muted_id}"

    def is_active_at(self, moment: datetime) -> bool:
        """Whether the mute still holds at ``moment``."""
        return self.expires_at is None or self.expires_at > moment


class FollowRequest(models.Model):
    """``requester`` asks to follow the private account ``target``; approval deletes it and creates the
    ``Follow`` the normal way. Database only.
    """

    requester = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="follow_requests_made")
    target = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="follow_requests_received")
    created_at = models.DateTimeField(default=now_whole_millisecond)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["requester", "target"], name="follow_request_unique_pair"),
            models.CheckConstraint(condition=~Q(requester=F("target")), name="follow_request_no_self"),
        ]
        # "requests to X newest first", keyset-paged by (created_at, id).
        indexes = [models.Index(fields=["target", "created_at", "id"], name="follow_request_newest")]

    def __str__(self) -> str:
        return f"{self.requester_id} asks to follow {self.target_id}"


class FollowImport(models.Model):
    """One upload of follows to import (``social.transfer``): the usernames in order, the
    checkpoint (``position``: lines handled), how many were followed, and the lines skipped
    with their reason (``[[username, reason], ...]``). ``waiting_until``: the follow rate
    limit paused the job until then. ``finished_at`` is None while under way."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="follow_imports")
    created_at = models.DateTimeField(default=timezone.now)
    usernames = models.JSONField(default=list)
    total = models.PositiveIntegerField(default=0)
    position = models.PositiveIntegerField(default=0)
    followed = models.PositiveIntegerField(default=0)
    skipped = models.JSONField(default=list)
    waiting_until = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["user", "created_at"], name="follow_import_newest")]

    def __str__(self) -> str:
        return f"import {self.pk} of {self.user_id}: {self.position}/{self.total}"

    @property
    def skipped_count(self) -> int:
        """Lines handled without a follow (``skipped`` keeps the first ``SKIPS_KEPT`` of them)."""
        return max(0, self.position - self.followed)

    @property
    def percent(self) -> int:
        """Lines handled, in percent (100 for an empty import)."""
        return 100 if not self.total else int(100 * self.position / self.total)


class ReconcileRun(models.Model):
    """One run of ``reconcile_social_cache`` and its drift figures, updated after every batch
    (``last_user_id`` is the checkpoint ``--resume`` continues); ``finished_at`` None while under way or interrupted.
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
    controls_drifted = models.PositiveIntegerField(default=0)  # pairs whose blocks or mutes Redis showed wrong
    controls_repaired = models.PositiveIntegerField(default=0)  # of them, re-written from the database
    error = models.TextField(blank=True, default="")

    class Meta:
        indexes = [models.Index(fields=["started_at"], name="reconcile_run_started")]

    def __str__(self) -> str:
        return f"reconcile {self.started_at:%Y-%m-%d %H:%M} missing={self.edges_missing} extra={self.edges_extra}"

    @property
    def drift(self) -> int:
        """Edges missing + extra + with a wrong score (each counted per side)."""
        return self.edges_missing + self.edges_extra + self.scores_wrong


class SuggestionReconcileRun(models.Model):
    """One run of ``reconcile_suggestions`` (``suggestions_reconcile``); ``finished_at`` None while under
    way or after a failure (``error``).
    """

    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    dry_run = models.BooleanField(default=False)
    last_user_id = models.BigIntegerField(default=0)
    readers_checked = models.PositiveIntegerField(default=0)
    readers_drifted = models.PositiveIntegerField(default=0)
    readers_fixed = models.PositiveIntegerField(default=0)
    rankings_checked = models.PositiveIntegerField(default=0)
    rankings_drifted = models.PositiveIntegerField(default=0)
    rankings_fixed = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, default="")

    class Meta:
        indexes = (models.Index(fields=["started_at"], name="suggest_reconcile_started"),)

    def __str__(self) -> str:
        return f"suggestions reconcile {self.started_at:%Y-%m-%d %H:%M} drifted={self.readers_drifted}+{self.rankings_drifted}"

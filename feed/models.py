from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ONE_MS = timedelta(milliseconds=1)


def now_whole_ms() -> datetime:
    """Current time truncated to the millisecond (inbox scores are whole ms, so both paths order notes alike)."""
    now = timezone.now()
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def to_ms(at: datetime) -> int:
    """Unix time of ``at`` in whole milliseconds (integer arithmetic, no float rounding)."""
    return (at - EPOCH) // ONE_MS


def from_ms(ms: int) -> datetime:
    """The aware UTC datetime of unix time ``ms`` (milliseconds)."""
    # Positional (days, seconds, microseconds, milliseconds): a cached feed
    # page converts every note's score, and the keyword form is slower.
    return EPOCH + timedelta(0, 0, 0, int(ms))


# Mastodon's visibilities: public; unlisted (as public here: followfeed has no public
# timelines to leave it off); private (the author's followers only, whatever the account's
# setting); direct (the author only: followfeed has no mentions to address it to).
PUBLIC = "public"
UNLISTED = "unlisted"
PRIVATE = "private"
DIRECT = "direct"
VISIBILITIES = [(PUBLIC, "Public"), (UNLISTED, "Unlisted"), (PRIVATE, "Followers only"), (DIRECT, "Only me")]
# What reaches feeds (fan-out, pull, rebuild, the database feed): everything but direct notes.
FEED_VISIBILITIES = (PUBLIC, UNLISTED, PRIVATE)
SPOILER_MAX_LENGTH = 500


class Note(models.Model):
    """A short post by ``author``, shown in the home feed of every follower.

    ``created_at`` (whole ms) is its score in every inbox and outbox. Hidden (``is_hidden``),
    soft-deleted (``deleted_at``) or by a deactivated author, it leaves every feed. Mirrored in
    Redis (``feed.redis_keys``) by its ``feed.note`` outbox entry; ``fanned_out_at`` is set when
    the fan-out finished.
    """

    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notes")
    body = models.TextField()
    created_at = models.DateTimeField(default=now_whole_ms)
    is_hidden = models.BooleanField(default=False)
    deleted_at = models.DateTimeField(null=True, blank=True)
    fanned_out_at = models.DateTimeField(null=True, blank=True)
    visibility = models.CharField(max_length=10, choices=VISIBILITIES, default=PUBLIC)
    # A content warning: shown instead of the body until the reader opens the note.
    spoiler_text = models.CharField(max_length=SPOILER_MAX_LENGTH, blank=True, default="")

    class Meta:
        permissions = [("hide_note", "Can hide or unhide notes")]
        indexes = [
            # An author's notes newest first (user timeline, backfill,
            # outbox rebuild); ties in one millisecond by id ascending.
            models.Index(fields=["author", "created_at", "id"], name="note_author_newest"),
            # The home feed from the database (catch-up, past the inbox
            # cap, Redis down) walks all notes newest first.
            models.Index(fields=["created_at", "id"], name="note_newest"),
            # The beat task finds notes whose fan-out never finished.
            models.Index(fields=["fanned_out_at", "created_at"], name="note_fan_out_pending"),
        ]

    def __str__(self) -> str:
        return f"note {self.pk} by {self.author_id}"

    @property
    def published_ms(self) -> int:
        """The publish time in unix milliseconds (the note's inbox score)."""
        return to_ms(self.created_at)

    @property
    def is_live(self) -> bool:
        """Whether the note may be shown at all (to its author at least): not hidden, not deleted, author active."""
        return not self.is_hidden and self.deleted_at is None and bool(self.author.is_active)

    @property
    def is_visible(self) -> bool:
        """Whether the note may be shown in feeds: live and not direct."""
        return self.is_live and self.visibility != DIRECT

    @property
    def is_direct_and_shown(self) -> bool:
        """Whether the note is direct and live (shown to its author alone)."""
        return self.is_live and self.visibility == DIRECT


class InboxReconcileRun(models.Model):
    """One run of the inbox reconcile and its figures, updated after every batch (``last_user_id`` is
    the checkpoint ``--resume`` continues); ``finished_at`` None while under way or interrupted.
    """

    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    dry_run = models.BooleanField(default=False)
    sample = models.FloatField(default=1.0)  # fraction of readers checked
    only_user_id = models.BigIntegerField(null=True, blank=True)
    last_user_id = models.BigIntegerField(default=0)  # checkpoint: every reader id <= this was walked
    readers_checked = models.PositiveIntegerField(default=0)
    readers_drifted = models.PositiveIntegerField(default=0)
    notes_missing = models.PositiveIntegerField(default=0)
    notes_extra = models.PositiveIntegerField(default=0)
    scores_wrong = models.PositiveIntegerField(default=0)
    readers_repaired = models.PositiveIntegerField(default=0)
    lists_drifted = models.PositiveIntegerField(default=0)  # readers whose list keys differed
    error = models.TextField(blank=True, default="")

    class Meta:
        indexes = [models.Index(fields=["started_at"], name="inbox_reconcile_started")]

    def __str__(self) -> str:
        return f"inbox reconcile {self.started_at:%Y-%m-%d %H:%M} drifted={self.readers_drifted}"


class AuthorNoteCount(models.Model):
    """How many notes of ``author`` others may be shown (visible, not deleted, a feed visibility):
    Mastodon's ``statuses_count``, kept by ``feed.services`` in the transaction of each change
    (``feed.note_counts.count_change``). No row: count the notes (an author whose notes were loaded
    in bulk). Reconciled by ``feed.reconcile.note_counts_drift``.
    """

    author = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="+")
    notes = models.PositiveIntegerField()

    def __str__(self) -> str:
        return f"{self.author_id}: {self.notes} notes"


# A list's replies policy, as Mastodon's: which replies of members a list timeline shows.
# followfeed's notes are never replies, so every policy shows the same notes; it is kept
# for clients that set and read it.
REPLIES_POLICIES = [("followed", "Replies to any followed account"), ("list", "Replies to list members"), ("none", "No replies")]
LIST_TITLE_MAX_LENGTH = 100


class List(models.Model):
    """A reader's (``owner``) list of accounts it follows, with a timeline of their notes.

    ``exclusive``: its members' notes leave the owner's home feed. Membership is mirrored in
    Redis (``feed.redis_keys.list_members_key``, ``list_index_key``, ``excluded_key``) by the
    ``feed.lists`` outbox entry of the owner.
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="lists")
    title = models.CharField(max_length=LIST_TITLE_MAX_LENGTH)
    replies_policy = models.CharField(max_length=10, choices=REPLIES_POLICIES, default="list")
    exclusive = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["owner", "id"], name="list_owner")]

    def __str__(self) -> str:
        return f"list {self.pk} of {self.owner_id}"


class ListMember(models.Model):
    """``account`` is a member of ``list`` (the list's owner follows it; an unfollow, block or
    removal deletes the row in the same transaction)."""

    list = models.ForeignKey(List, on_delete=models.CASCADE, related_name="members")
    account = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="list_memberships")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["list", "account"], name="list_member_unique")]
        indexes = [
            # "The lists of this reader holding this account" (unfollow, account_lists).
            models.Index(fields=["account", "list"], name="list_member_account"),
        ]

    def __str__(self) -> str:
        return f"{self.account_id} in list {self.list_id}"

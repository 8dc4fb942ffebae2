"""Every write of notes and feeds.

Notes are written to the database; their delivery to Redis runs after
commit in Celery (``feed.tasks``), never inside the transaction: a note
that rolls back sends nothing (C16), and a task never looks for a row that
is not committed yet. Tasks get ids, re-read the database and write Redis
idempotently, so a retried, repeated or late task is harmless (C11); each
write is followed by a check of the database and undone if the state moved
meanwhile (read, write, verify), so racing tasks converge.

If Redis is down a note is still published: its fan-out task retries with
backoff, and ``fan_out_pending`` (beat) delivers any note whose fan-out
never finished (``Note.fanned_out_at`` is null), so no note is lost (C14).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from social.models import Follow
from social.redis_client import REDIS_ERRORS, get_redis, redis_failed

from . import delivery, redis_keys
from .models import Note, now_whole_ms
from .rebuild import outbox_rebuild, recent_entries, synced_until

logger = logging.getLogger(__name__)
User = get_user_model()


class NoteError(Exception):
    """A note action that cannot be done; ``status`` is the HTTP status to answer."""

    status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NoteInvalidError(NoteError):
    """Empty or too long body (HTTP 400)."""


class NoteForbiddenError(NoteError):
    """The actor may not do this to the note (HTTP 403)."""

    status = 403


# --- scheduling -------------------------------------------------------------


def enqueue(task_name: str, **kwargs: Any) -> None:
    """Send task ``feed.tasks.<task_name>`` with ``kwargs`` after the current transaction commits.

    Outside a transaction it is sent at once. A broker that refuses the
    message is logged, not raised: the request that caused it already
    committed, and the beat jobs (pending fan-outs, rebuild on the next
    visit) repair what the task would have done.
    """

    def send() -> None:
        from . import tasks

        try:
            getattr(tasks, task_name).apply_async(kwargs=kwargs)
        except Exception:  # noqa: BLE001 - broker down: logged, repaired later
            logger.exception("could not enqueue %s(%s)", task_name, kwargs)

    transaction.on_commit(send)


# --- notes ------------------------------------------------------------------


def note_create(*, author: Any, body: str, created_at: datetime | None = None) -> Note:
    """Publish a note by ``author`` and schedule its fan-out after commit.

    :param body: the text; surrounding whitespace is stripped.
    :param created_at: publish time (replays and tests); default now,
        truncated to the millisecond.
    :returns: the saved ``Note``.
    :raises NoteInvalidError: empty body, or longer than ``NOTE_MAX_LENGTH``
        characters (400).
    :raises NoteForbiddenError: ``author`` is deactivated (403).
    """
    text = (body or "").strip()
    if not text:
        raise NoteInvalidError("A note cannot be empty.")
    if len(text) > int(settings.NOTE_MAX_LENGTH):
        raise NoteInvalidError(f"A note can have at most {settings.NOTE_MAX_LENGTH} characters.")
    if not author.is_active:
        raise NoteForbiddenError("Your account is deactivated.")
    at = created_at or now_whole_ms()
    at = at.replace(microsecond=at.microsecond // 1000 * 1000)
    with transaction.atomic():
        note = Note.objects.create(author_id=author.pk, body=text, created_at=at)
        enqueue("feed_note_fan_out", note_id=note.pk)
    return note


def note_hide(*, note: Note, hidden: bool) -> bool:
    """Hide (moderation) or unhide ``note``.

    Readers stop showing a hidden note at once; after commit a task removes
    it from the outbox and every inbox. Unhiding delivers it again, at its
    original place in time.

    :returns: True when the flag changed.
    """
    with transaction.atomic():
        changed = Note.objects.filter(pk=note.pk, is_hidden=not hidden).update(is_hidden=hidden)
        note.is_hidden = hidden
        if changed:
            enqueue("feed_note_fan_out" if not hidden else "feed_note_retract", note_id=note.pk)
    return bool(changed)


def note_delete(*, note: Note, actor: Any | None = None) -> bool:
    """Delete ``note`` (soft: ``deleted_at``), then remove it from every feed after commit.

    :param actor: when given, must be the author.
    :returns: True when the note was not deleted before.
    :raises NoteForbiddenError: ``actor`` is not the author (403).
    """
    if actor is not None and actor.pk != note.author_id:
        raise NoteForbiddenError("Only the author can delete a note.")
    with transaction.atomic():
        now = timezone.now()
        changed = Note.objects.filter(pk=note.pk, deleted_at__isnull=True).update(deleted_at=now)
        if changed:
            note.deleted_at = now
            enqueue("feed_note_retract", note_id=note.pk)
    return bool(changed)


# --- delivery (called by tasks) --------------------------------------------------


@dataclass(frozen=True)
class FanOut:
    """Outcome of a fan-out: ``mode`` is ``push``, ``pull`` or ``skipped``;
    ``followers`` reached and ``inbox_writes`` made."""

    mode: str
    followers: int = 0
    inbox_writes: int = 0


def note_fan_out(*, note_id: int) -> FanOut:
    """Deliver note ``note_id``: its author's outbox, then every active follower's inbox.

    Pull authors (``delivery.is_pull_author``) get only the outbox.
    Followers not seen within ``FEED_ACTIVE_DAYS`` are skipped; their
    inboxes are rebuilt when they come back. Idempotent: a re-run after a
    crash or a partial run writes the same members with the same scores.
    Marks ``fanned_out_at``. If the note was hidden or deleted meanwhile,
    the delivery is withdrawn again.

    :returns: ``FanOut``; ``skipped`` when the note is gone or not visible.
    :raises: Redis errors (REDIS_ERRORS) so the task retries.
    """
    note = Note.objects.select_related("author").filter(pk=note_id).first()
    if note is None:
        return FanOut(mode="skipped")
    if not note.is_visible:
        Note.objects.filter(pk=note_id, fanned_out_at__isnull=True).update(fanned_out_at=timezone.now())
        return FanOut(mode="skipped")
    client = get_redis()
    entry = [(note.pk, note.published_ms)]
    pipe = client.pipeline(transaction=False)
    delivery.queue_add(pipe, redis_keys.outbox_key(note.author_id), entry)
    pipe.execute()
    if delivery.is_pull_author(client, note.author_id):
        result = FanOut(mode="pull")
    else:
        followers, writes = delivery.fan_out_to_followers(client, note.author_id, entry)
        result = FanOut(mode="push", followers=followers, inbox_writes=writes)
    Note.objects.filter(pk=note_id, fanned_out_at__isnull=True).update(fanned_out_at=timezone.now())
    # Verify: hidden or deleted while we delivered -> take it back.
    if not Note.objects.filter(pk=note_id, is_hidden=False, deleted_at__isnull=True).exists():
        note_retract(note_id=note_id)
    return result


def note_retract(*, note_id: int, author_id: int | None = None) -> int:
    """Remove note ``note_id`` from its author's outbox and every follower's inbox.

    A note that is visible again (unhidden meanwhile) is left alone.
    Followers are found as at fan-out, but all of them (a skipped reader's
    stale inbox may hold it too).

    :param author_id: needed when the row is gone (hard delete).
    :returns: the number of inbox members removed.
    :raises: Redis errors (REDIS_ERRORS) so the task retries.
    """
    note = Note.objects.select_related("author").filter(pk=note_id).first()
    if note is not None and note.is_visible:
        return 0
    author = note.author_id if note is not None else author_id
    if author is None:
        return 0
    client = get_redis()
    client.zrem(redis_keys.outbox_key(author), redis_keys.note_member(note_id))
    # The follow mirror no longer lists a deactivated author's followers:
    # then the Follow rows (kept on deactivation) are the list.
    source = "auto" if note is not None and note.author.is_active else "database"
    removed = 0
    for batch in delivery.follower_batches(client, author, only_active=False, source=source):
        removed += delivery.withdraw(client, batch, [note_id])
    return removed


def fan_out_pending(*, older_than_seconds: int = 60, limit: int = 500) -> int:
    """Deliver notes whose fan-out never finished (``fanned_out_at`` null), oldest first.

    Run by beat every ``FEED_PENDING_FAN_OUT_SECONDS``; it is the repair
    for a fan-out lost to a Redis outage or a broker that refused the task.
    Notes younger than ``older_than_seconds`` are left to their own task.

    :returns: how many notes were handled.
    :raises: Redis errors (REDIS_ERRORS): still down, the next run retries.
    """
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    pending = list(
        Note.objects.filter(fanned_out_at__isnull=True, created_at__lt=cutoff)
        .order_by("created_at", "id")
        .values_list("id", flat=True)[:limit]
    )
    for note_id in pending:
        note_fan_out(note_id=note_id)
    return len(pending)


# --- follow graph changes ---------------------------------------------------------


def _follows(follower_id: int, followee_id: int) -> bool:
    return Follow.objects.filter(
        follower_id=follower_id, followee_id=followee_id, follower__is_active=True, followee__is_active=True
    ).exists()


def inbox_backfill_followee(*, follower_id: int, followee_id: int) -> int:
    """After ``follower_id`` followed ``followee_id``: add the followee's newest
    ``INBOX_MAX_LEN`` visible notes to the follower's inbox, at their publish times.

    Nothing when the follow is gone again, the followee is a pull author
    (merged at read time) or the follower is not seen within
    ``FEED_ACTIVE_DAYS`` (skipped like at fan-out; rebuilt when back). A
    re-follow backfills like a first follow.

    :returns: the number of notes added.
    :raises: Redis errors (REDIS_ERRORS) so the task retries.
    """
    if not _follows(follower_id, followee_id):
        return 0
    if not User.objects.filter(pk=follower_id, last_seen_at__gte=delivery.active_cutoff()).exists():
        return 0
    client = get_redis()
    if client.sismember(redis_keys.pull_authors_key(), followee_id):
        return 0
    entries = recent_entries([followee_id], redis_keys.inbox_max_len())
    delivery.deliver(client, [follower_id], entries)
    if not _follows(follower_id, followee_id):  # unfollowed meanwhile
        inbox_remove_followee(follower_id=follower_id, followee_id=followee_id)
        return 0
    return len(entries)


def inbox_remove_followee(*, follower_id: int, followee_id: int) -> int:
    """After ``follower_id`` unfollowed ``followee_id``: remove every note of the
    followee from the follower's inbox (read from the inbox, so notes older
    than the followee's outbox go too).

    Nothing when the follow exists again (a re-follow came first).

    :returns: the number of inbox members removed.
    :raises: Redis errors (REDIS_ERRORS) so the task retries.
    """
    if Follow.objects.filter(follower_id=follower_id, followee_id=followee_id).exists():
        return 0
    client = get_redis()
    key = redis_keys.inbox_key(follower_id)
    members = [int(member) for member in client.zrange(key, 0, -1)]
    theirs = list(Note.objects.filter(pk__in=members, author_id=followee_id).values_list("pk", flat=True))
    removed = delivery.withdraw(client, [follower_id], theirs)
    if Follow.objects.filter(follower_id=follower_id, followee_id=followee_id).exists():  # re-followed meanwhile
        inbox_backfill_followee(follower_id=follower_id, followee_id=followee_id)
    return removed


def author_feed_refresh(*, author_id: int) -> int:
    """After ``author_id`` was deactivated or reactivated: take its notes out of
    its followers' inboxes, or put its newest ones back (and rebuild its outbox).

    Readers already hide a deactivated author's notes; this reclaims the
    inbox space or restores the entries. Followers come from the Follow rows,
    which deactivation keeps.

    :returns: the number of inbox members removed or written.
    :raises: Redis errors (REDIS_ERRORS) so the task retries.
    """
    row = User.objects.filter(pk=author_id).values_list("is_active", flat=True).first()
    client = get_redis()
    outbox = redis_keys.outbox_key(author_id)
    if not row:
        note_ids = [int(member) for member in client.zrange(outbox, 0, -1)]
        note_ids += list(Note.objects.filter(author_id=author_id).order_by("-created_at")[: redis_keys.inbox_max_len()].values_list("pk", flat=True))
        note_ids = sorted(set(note_ids))
        removed = 0
        for batch in delivery.follower_batches(client, author_id, only_active=False, source="database"):
            removed += delivery.withdraw(client, batch, note_ids)
        client.unlink(outbox)
        return removed
    outbox_rebuild(author_id=author_id)
    if client.sismember(redis_keys.pull_authors_key(), author_id):
        return 0
    entries = recent_entries([author_id], redis_keys.inbox_max_len())
    _, writes = delivery.fan_out_to_followers(client, author_id, entries, source="database")
    return writes


# --- readers coming back ----------------------------------------------------------


def inbox_catch_up_request(*, user_id: int) -> bool:
    """Queue a rebuild of ``user_id``'s inbox unless one is queued or running.

    :returns: True when a rebuild was queued; False when one already was,
        or Redis is unreachable (the reader uses the database meanwhile).
    """
    try:
        client = get_redis()
        if not client.set(redis_keys.inbox_rebuilding_key(user_id), "1", nx=True, ex=redis_keys.REBUILDING_TTL_SECONDS):
            return False
    except REDIS_ERRORS as exc:
        redis_failed(exc)
        return False
    enqueue("feed_inbox_rebuild", user_id=user_id)
    return True


def inbox_keep_synced(*, user_id: int, last_seen_at: datetime | None) -> bool:
    """Extend ``user_id``'s synced marker to match ``last_seen_at``, or queue a
    rebuild when the inbox is not synced (sign-in, and visits that moved last_seen_at).

    :returns: True when the inbox is synced now; never raises for Redis.
    """
    until = synced_until(last_seen_at)
    try:
        client = get_redis()
        key = redis_keys.inbox_synced_key(user_id)
        synced = bool(client.expireat(key, int(until.timestamp()))) if until else bool(client.exists(key))
    except REDIS_ERRORS as exc:
        redis_failed(exc)
        return False
    if not synced:
        inbox_catch_up_request(user_id=user_id)
    return synced


def feed_visit(*, user: Any) -> None:
    """A reader opens the home feed: record the visit (``users.services.user_touch_seen``),
    keep the synced marker in step with it, and queue a catch-up if the inbox is not synced.

    Never raises for Redis (the page then reads the database).
    """
    from users.services import user_touch_seen

    touched = user_touch_seen(user=user)
    if touched:
        inbox_keep_synced(user_id=user.pk, last_seen_at=user.last_seen_at)
        return
    try:
        synced = bool(get_redis().exists(redis_keys.inbox_synced_key(user.pk)))
    except REDIS_ERRORS as exc:
        redis_failed(exc)
        return
    if not synced:
        inbox_catch_up_request(user_id=user.pk)


def inbox_sign_in(*, user_id: int) -> bool:
    """After sign-in: keep the inbox synced, or queue its rebuild (catch-up).

    :returns: True when the inbox was already synced.
    """
    last_seen_at = User.objects.filter(pk=user_id).values_list("last_seen_at", flat=True).first()
    return inbox_keep_synced(user_id=user_id, last_seen_at=last_seen_at)

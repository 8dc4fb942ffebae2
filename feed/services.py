"""Every write of notes and feeds.

A note commits with its ``feed.note`` outbox entry; delivery runs after commit (Celery, or the
drain when Redis or the broker failed), never inside the transaction.
Design: docs/architecture.md#notes-and-the-home-feed.
"""

from __future__ import annotations

import logging
from datetime import datetime
from functools import partial

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core import limits, outbox
from core.errors import DomainError, Forbidden, InvalidInput
from core.parsing import parse_text
from core.redis import REDIS_ERRORS, get_redis, redis_failed
from users.models import User
from users.services import user_touch_seen

from . import note_cache, redis_keys
from . import outbox as feed_outbox
from .models import FEED_VISIBILITIES, PUBLIC, SPOILER_MAX_LENGTH, VISIBILITIES, Note, now_whole_ms
from .note_counts import count_change
from .rebuild import synced_until

logger = logging.getLogger(__name__)


class NoteError(DomainError):
    """A note action that cannot be done (its ``status`` is the HTTP status to answer)."""


class NoteInvalidError(NoteError, InvalidInput):
    """Empty or too long body (HTTP 400)."""


class NoteForbiddenError(NoteError, Forbidden):
    """The actor may not do this to the note (HTTP 403)."""


# --- notes ------------------------------------------------------------------


def note_create(
    *, author: User, body: str, created_at: datetime | None = None, visibility: str = PUBLIC, spoiler_text: str = ""
) -> Note:
    """Publish a note by ``author`` and schedule its fan-out after commit.

    :param body: the text; surrounding whitespace is stripped.
    :param visibility: ``public``, ``unlisted``, ``private`` (followers only) or ``direct``
        (the author only: never fanned out).
    :param spoiler_text: a content warning (empty: none).
    :param created_at: publish time (replays and tests); default now,
        truncated to the millisecond.
    :returns: the saved ``Note``.
    :raises NoteInvalidError: empty (nothing visible), a control character,
        or longer than ``NOTE_MAX_LENGTH`` characters (400).
    :raises NoteForbiddenError: ``author`` is deactivated (403).
    :raises RateLimited: more than ``NOTE_RATE`` notes (429).
    """
    try:
        text = parse_text(body, name="A note", max_length=int(settings.NOTE_MAX_LENGTH))
    except InvalidInput as exc:
        raise NoteInvalidError(exc.message) from None
    if visibility not in dict(VISIBILITIES):
        raise NoteInvalidError(f"Visibility must be one of {', '.join(dict(VISIBILITIES))}.")
    warning = ""
    if spoiler_text.strip():
        try:
            warning = parse_text(spoiler_text, name="A content warning", max_length=SPOILER_MAX_LENGTH)
        except InvalidInput as exc:
            raise NoteInvalidError(exc.message) from None
    if not author.is_active:
        raise NoteForbiddenError("Your account is deactivated.")
    limits.hit("notes", str(author.pk), "NOTE_RATE", message="You published too many notes for now; try again later.")
    at = created_at or now_whole_ms()
    at = at.replace(microsecond=at.microsecond // 1000 * 1000)
    with transaction.atomic():
        note = Note.objects.create(author_id=author.pk, body=text, created_at=at, visibility=visibility, spoiler_text=warning)
        if visibility in FEED_VISIBILITIES:
            count_change(author_id=author.pk, delta=1)
        outbox.record(feed_outbox.NOTE, subject_id=note.pk, object_id=author.pk)
    return note


def note_hide(*, note: Note, hidden: bool) -> bool:
    """Hide (moderation) or unhide ``note``: readers stop showing it at once, a task retracts it after
    commit; unhiding delivers it again at its place in time.

    :returns: True when the flag changed.
    """
    with transaction.atomic():
        counted = _counted(note.pk)
        changed = Note.objects.filter(pk=note.pk, is_hidden=not hidden).update(is_hidden=hidden)
        note.is_hidden = hidden
        if changed:
            if counted is not None and counted[1]:
                count_change(author_id=note.author_id, delta=-1 if hidden else 1)
            _forget_after_commit(note.pk)
            outbox.record(feed_outbox.NOTE, subject_id=note.pk, object_id=note.author_id)
    return bool(changed)


def note_delete(*, note: Note, actor: User | None = None) -> bool:
    """Delete ``note`` (soft: ``deleted_at``), then remove it from every feed after commit.

    :param actor: when given, must be the author.
    :returns: True when the note was not deleted before.
    :raises NoteForbiddenError: ``actor`` is not the author (403).
    """
    if actor is not None and actor.pk != note.author_id:
        raise NoteForbiddenError("Only the author can delete a note.")
    with transaction.atomic():
        now = timezone.now()
        counted = _counted(note.pk)
        changed = Note.objects.filter(pk=note.pk, deleted_at__isnull=True).update(deleted_at=now)
        if changed:
            if counted is not None and counted[0]:
                count_change(author_id=note.author_id, delta=-1)
            note.deleted_at = now
            _forget_after_commit(note.pk)
            outbox.record(feed_outbox.NOTE, subject_id=note.pk, object_id=note.author_id)
    return bool(changed)


def _counted(note_id: int) -> tuple[bool, bool] | None:
    """Whether note ``note_id`` (locked for the caller's transaction) counts now, and whether it
    would count were it shown (not hidden): (counted, counted unhidden), or None when missing."""
    row = Note.objects.select_for_update().filter(pk=note_id).values_list("is_hidden", "deleted_at", "visibility").first()
    if row is None:
        return None
    is_hidden, deleted_at, visibility = row
    shown_kind = deleted_at is None and visibility in FEED_VISIBILITIES
    return shown_kind and not is_hidden, shown_kind


def _forget_after_commit(note_id: int) -> None:
    # Readers stop showing a hidden or deleted note at once; the entry's own
    # job forgets it again, retried until it succeeds. Registered before the
    # entry's own after-commit work, so an unhide's fan-out (which caches the
    # note again) runs after this tombstone, not before it.
    transaction.on_commit(partial(note_cache.cache_forget_now, note_ids=[note_id]))


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
    outbox.record(feed_outbox.INBOX, subject_id=user_id)
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


def feed_visit(*, user: User) -> None:
    """A reader opens the home feed: record the visit, keep the synced marker in step, queue a
    catch-up if the inbox is not synced. Never raises for Redis.
    """
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

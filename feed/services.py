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
from core.errors import DomainError, Forbidden, InvalidInput, NotFound
from core.parsing import parse_label, parse_text
from core.redis import REDIS_ERRORS, breaker_node, get_redis, redis_available, redis_failed, redis_succeeded
from social.models import Follow
from social.selectors import active_follows
from users.models import User
from users.services import user_touch_seen

from . import note_cache, redis_keys
from . import outbox as feed_outbox
from .models import (
    FEED_VISIBILITIES,
    LIST_TITLE_MAX_LENGTH,
    PUBLIC,
    REPLIES_POLICIES,
    SPOILER_MAX_LENGTH,
    VISIBILITIES,
    List,
    ListMember,
    Note,
    now_whole_ms,
)
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
    synced = _synced_now(user_id=user_id, until=synced_until(last_seen_at))
    if synced is None:
        return False
    if not synced:
        inbox_catch_up_request(user_id=user_id)
    return synced


def _synced_now(*, user_id: int, until: datetime | None) -> bool | None:
    """Whether ``user_id``'s inbox is synced, its marker extended to ``until`` when given; None when
    Redis was not asked (the breaker of the marker's master is open: a page with Redis down must
    not wait for it) or failed."""
    key = redis_keys.inbox_synced_key(user_id)
    node = breaker_node(key)
    if not redis_available(node):
        return None
    try:
        client = get_redis()
        synced = bool(client.expireat(key, int(until.timestamp()))) if until else bool(client.exists(key))
    except REDIS_ERRORS as exc:
        redis_failed(exc, node)
        return None
    redis_succeeded(node)
    return synced


def feed_visit(*, user: User, synced: bool | None = None) -> None:
    """A reader opens the home feed: record the visit, keep the synced marker in step, queue a
    catch-up if the inbox is not synced. Never raises for Redis.

    :param synced: whether a page read just now found the inbox synced (None: not known, asked of Redis).
    """
    touched = user_touch_seen(user=user)
    if touched:
        inbox_keep_synced(user_id=user.pk, last_seen_at=user.last_seen_at)
        return
    if synced is None:
        synced = _synced_now(user_id=user.pk, until=None)
        if synced is None:
            return
    if not synced:
        inbox_catch_up_request(user_id=user.pk)


def inbox_sign_in(*, user_id: int) -> bool:
    """After sign-in: keep the inbox synced, or queue its rebuild (catch-up).

    :returns: True when the inbox was already synced.
    """
    last_seen_at = User.objects.filter(pk=user_id).values_list("last_seen_at", flat=True).first()
    return inbox_keep_synced(user_id=user_id, last_seen_at=last_seen_at)


# --- lists ----------------------------------------------------------------------------


def list_timeline_keep(*, user: User, list_id: int) -> bool:
    """After ``user``'s read of its list ``list_id`` found the list's timeline not kept: count the
    read as a visit (``feed_visit``: a kept timeline lives while its reader is active) and queue
    the build (``feed.rebuild.list_timeline_rebuild``) unless one is queued or running. Never
    raises for Redis.

    :returns: True when a build was queued.
    """
    feed_visit(user=user)
    try:
        # The queued build's lock: deliveries write the build copy from now on.
        key = redis_keys.list_build_key(user.pk, list_id)
        if not get_redis().set(key, "queued", nx=True, ex=redis_keys.REBUILDING_TTL_SECONDS):
            return False
    except REDIS_ERRORS as exc:
        redis_failed(exc)
        return False
    outbox.record(feed_outbox.LIST_TIMELINE, subject_id=user.pk, object_id=list_id)
    return True


# Accounts one list holds at most: a list timeline reads every member's outbox.
LIST_MAX_MEMBERS = 500
# Lists one reader has at most (Mastodon's default is 50 too).
LISTS_MAX = 50


class ListNotFoundError(NoteError, NotFound):
    """No such list of this reader, or no such account (HTTP 404)."""


class ListInvalidError(NoteError, InvalidInput):
    """A bad title or policy, an account not followed, too many lists or members (HTTP 422, as Mastodon)."""

    status = 422


def _list_fields(title: str | None, replies_policy: str | None) -> tuple[str | None, str | None]:
    text = None
    if title is not None:
        try:
            text = parse_label(title, name="A list's title", max_length=LIST_TITLE_MAX_LENGTH)
        except InvalidInput as exc:
            raise ListInvalidError(f"Validation failed: {exc.message}") from None
    if replies_policy is not None and replies_policy not in dict(REPLIES_POLICIES):
        raise ListInvalidError(f"Validation failed: replies_policy must be one of {', '.join(dict(REPLIES_POLICIES))}")
    return text, replies_policy


def _locked(list_: List) -> List:
    """``list_``'s row, locked for this transaction: members and ``exclusive`` change under one lock.

    :raises ListNotFoundError: deleted meanwhile (404).
    """
    row = List.objects.select_for_update().filter(pk=list_.pk).first()
    if row is None:
        raise ListNotFoundError("Record not found")
    return row


def list_create(*, owner: User, title: str, replies_policy: str = "list", exclusive: bool = False) -> List:
    """Create a list of ``owner``'s (empty; its keys written after commit).

    :raises ListInvalidError: empty or too long title, unknown policy, ``LISTS_MAX`` lists already (422).
    """
    text, policy = _list_fields(title, replies_policy)
    with transaction.atomic():
        # Lock the owner's row: two concurrent creates must not pass the count together.
        User.objects.select_for_update().filter(pk=owner.pk).first()
        if List.objects.filter(owner_id=owner.pk).count() >= LISTS_MAX:
            raise ListInvalidError(f"Validation failed: you have {LISTS_MAX} lists already")
        created = List.objects.create(owner_id=owner.pk, title=str(text), replies_policy=str(policy), exclusive=exclusive)
        feed_outbox.lists_record(reader_ids=[owner.pk])
    return created


def list_update(
    *, list_: List, title: str | None = None, replies_policy: str | None = None, exclusive: bool | None = None
) -> List:
    """Rename ``list_`` or change its policy or ``exclusive`` (None: unchanged); making it (not)
    exclusive takes its members' notes out of the owner's home feed (or back) after commit.

    :raises ListInvalidError: empty or too long title, unknown policy (422).
    :raises ListNotFoundError: the list was deleted meanwhile (404).
    """
    text, policy = _list_fields(title, replies_policy)
    with transaction.atomic():
        row = _locked(list_)
        toggled = exclusive is not None and exclusive != row.exclusive
        row.title = text if text is not None else row.title
        row.replies_policy = policy if policy is not None else row.replies_policy
        row.exclusive = exclusive if exclusive is not None else row.exclusive
        row.save(update_fields=["title", "replies_policy", "exclusive"])
        members = list(ListMember.objects.filter(list_id=row.pk).values_list("account_id", flat=True)) if toggled else []
        feed_outbox.lists_record(reader_ids=[row.owner_id], account_ids=members)
    return row


def list_delete(*, list_: List) -> None:
    """Delete ``list_`` and its memberships; an exclusive list's members come back to the home feed after commit."""
    with transaction.atomic():
        row = List.objects.select_for_update().filter(pk=list_.pk).first()
        if row is None:
            return  # deleted meanwhile: done
        members = list(ListMember.objects.filter(list_id=row.pk).values_list("account_id", flat=True)) if row.exclusive else []
        row.delete()
        feed_outbox.lists_record(reader_ids=[row.owner_id], account_ids=members)


def list_members_add(*, list_: List, account_ids: list[int]) -> int:
    """Add ``account_ids`` to ``list_`` (all or none); members already there are kept.

    :returns: the number of accounts added.
    :raises ListNotFoundError: an unknown or deactivated account, or the list was deleted meanwhile (404).
    :raises ListInvalidError: an account the owner does not follow, or more than ``LIST_MAX_MEMBERS`` (422).
    """
    wanted = sorted(set(account_ids))
    if not wanted:
        return 0
    with transaction.atomic():
        row = _locked(list_)
        known = set(User.objects.filter(pk__in=wanted, is_active=True).values_list("pk", flat=True))
        if missing := [account_id for account_id in wanted if account_id not in known]:
            raise ListNotFoundError(f"Record not found: account {missing[0]}")
        followed = set(
            active_follows().filter(follower_id=row.owner_id, followee_id__in=wanted).values_list("followee_id", flat=True)
        )
        if unfollowed := [account_id for account_id in wanted if account_id not in followed]:
            raise ListInvalidError(f"Validation failed: you do not follow account {unfollowed[0]}")
        held = set(ListMember.objects.filter(list_id=row.pk).values_list("account_id", flat=True))
        new = [account_id for account_id in wanted if account_id not in held]
        if len(held) + len(new) > LIST_MAX_MEMBERS:
            raise ListInvalidError(f"Validation failed: a list holds at most {LIST_MAX_MEMBERS} accounts")
        ListMember.objects.bulk_create([ListMember(list_id=row.pk, account_id=account_id) for account_id in new])
        # bulk_create fires no signal: the mirror's entries are recorded here.
        feed_outbox.lists_record(reader_ids=[row.owner_id], account_ids=new if row.exclusive else [])
    return len(new)


def list_members_remove(*, list_: List, account_ids: list[int]) -> int:
    """Remove ``account_ids`` from ``list_`` (accounts not in it are ignored).

    :returns: the number of accounts removed.
    :raises ListNotFoundError: the list was deleted meanwhile (404).
    """
    wanted = sorted(set(account_ids))
    if not wanted:
        return 0
    with transaction.atomic():
        row = _locked(list_)
        removed, _ = ListMember.objects.filter(list_id=row.pk, account_id__in=wanted).delete()
        if removed:
            feed_outbox.lists_record(reader_ids=[row.owner_id], account_ids=wanted if row.exclusive else [])
    return int(removed)


def list_members_unfollowed(*, follower_id: int, followee_id: int) -> int:
    """In the transaction of a follow's end (unfollow, block, removal): take ``followee_id`` out of
    every list of ``follower_id`` unless the follow is still there (a follow signal).

    :returns: the memberships removed.
    """
    if Follow.objects.filter(follower_id=follower_id, followee_id=followee_id).exists():
        return 0
    removed, _ = ListMember.objects.filter(list__owner_id=follower_id, account_id=followee_id).delete()
    if removed:
        feed_outbox.lists_record(reader_ids=[follower_id])
    return int(removed)


def lists_member_changed(*, account_id: int) -> int:
    """In the transaction of ``account_id``'s (de)activation or deletion: re-derive the list keys of
    every reader whose lists hold it.

    :returns: the entries recorded.
    """
    owners = list(ListMember.objects.filter(account_id=account_id).values_list("list__owner_id", flat=True).distinct())
    return feed_outbox.lists_record(reader_ids=owners) if owners else 0

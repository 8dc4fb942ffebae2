"""The feed's outbox kinds: every delivery job, recorded in the transaction that causes it.

Each kind's handler re-reads the database and makes Redis agree with it,
so a job that runs twice, late or out of order is harmless:

- ``feed.note`` (``NOTE``, note id, author id): a note was published,
  hidden, unhidden or deleted. A visible note is fanned out (its author's
  outbox, then every follower's maintained inbox, or only the outbox for
  pull authors); a note that is not visible is retracted from all of them.
- ``feed.note_part`` (``NOTE_PART``, note id, packed part): one part of a
  big author's fan-out (the followers whose id is the part's index modulo
  the part count), recorded by ``feed.note`` when the author has more than
  ``FEED_FANOUT_PART_FOLLOWERS`` followers, one task message each.
- ``feed.pair`` (``PAIR``, follower id, followee id): a follow or an
  unfollow. While the follow exists the followee's newest notes are
  backfilled into the follower's inbox, otherwise the followee's notes
  (and notes whose rows are gone) are removed from it.
- ``feed.author`` (``AUTHOR``, user id): an account was deactivated or
  reactivated. As an author its notes leave every follower's inbox or come
  back; as a reader its inbox is dropped, or rebuilt (it missed every
  fan-out while away).
- ``feed.inbox`` (``INBOX``, reader id): a reader's inbox is rebuilt
  (catch-up after a long absence).
- ``feed.purge`` (``PURGE``, user id): an account was deleted; every feed
  key of it goes. Its followers' inboxes are cleaned by ``feed.pair``
  entries recorded with it (the follow rows are gone after the delete).
- ``feed.author_cache`` (``AUTHOR_CACHE``, user id; applied inline after
  commit): an account was renamed, deactivated, reactivated or deleted; its
  entry in the note cache is forgotten (``feed.note_cache``).

``feed.note`` also keeps the note cache: a fan-out writes the note's entry
before any inbox gets the id, a retraction forgets it.

A job that depends on the follow mirror (a backfill decides from the
reader's following set) first applies and marks the mirror entries of the
same change still pending (``core.outbox.apply_pending_before``): the
request applied them already and left the marking to this job. If one
cannot be applied the handler raises ``EntryNotApplied`` and the drain
applies both, the mirror first. All are applied by the
``core.tasks.outbox_apply`` task after commit, and by the drain when that
message was refused or its worker died.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from core import outbox
from core.cluster import pipeline
from core.errors import EntryNotApplied
from core.metrics import observe_fan_out_lag
from core.models import OutboxEntry
from core.redis import get_redis
from social.models import OUTBOX_PAIR, OUTBOX_USER, Follow, Mute, live_mutes
from social.selectors import follow_counts
from users.models import User

from . import delivery, note_cache, redis_keys
from .models import Note
from .rebuild import inbox_rebuild, outbox_rebuild, pull_authors_rebuild, rebuild_all_outboxes, recent_entries
from .selectors import forget_pull_authors

logger = logging.getLogger(__name__)

# Kind names, stored in ``core.OutboxEntry.kind``.
NOTE_KIND = "feed.note"
NOTE_PART_KIND = "feed.note_part"
PAIR_KIND = "feed.pair"
AUTHOR_KIND = "feed.author"
INBOX_KIND = "feed.inbox"
PURGE_KIND = "feed.purge"
AUTHOR_CACHE_KIND = "feed.author_cache"


# --- notes ------------------------------------------------------------------


@dataclass(frozen=True)
class FanOut:
    """Outcome of a fan-out: ``mode`` is ``push``, ``pull``, ``split`` (into ``parts``
    entries, delivered by their own tasks) or ``skipped``; ``followers`` walked and
    ``inbox_writes`` made."""

    mode: str
    followers: int = 0
    inbox_writes: int = 0
    parts: int = 1


def note_fan_out(*, note_id: int) -> FanOut:
    """Deliver note ``note_id``: its author's outbox, then every follower's maintained inbox.

    Pull authors get only the outbox. A follower's inbox takes the note only
    while it is maintained (synced or being rebuilt; others are rebuilt
    when they come back) and the follower still follows the author, both
    decided in Redis by ``DELIVER_LUA``. Idempotent: a re-run after a crash
    or a partial run writes the same members with the same scores. Marks
    ``fanned_out_at``. If the note was hidden or deleted meanwhile, the
    delivery is withdrawn again.

    :returns: ``FanOut``; ``skipped`` when the note is gone or not visible.
    :raises: ``REDIS_ERRORS`` (the entry stays pending).
    """
    note = Note.objects.select_related("author").filter(pk=note_id).first()
    if note is None:
        return FanOut(mode="skipped")
    if not note.is_visible:
        Note.objects.filter(pk=note_id, fanned_out_at__isnull=True).update(fanned_out_at=timezone.now())
        return FanOut(mode="skipped")
    client = get_redis()
    entry = [(note.pk, note.published_ms)]
    pipe = pipeline(client)
    # The note cache first: every inbox that gets the id finds the note there.
    note_cache.queue_cache_fill(pipe, [note], replace=True)
    delivery.queue_add(pipe, redis_keys.outbox_key(note.author_id), entry)
    pipe.execute()
    if delivery.is_pull_author(client, note.author_id):
        result = FanOut(mode="pull")
    elif (parts := delivery.fan_out_parts(follow_counts(user_id=note.author_id).followers)) > 1:
        # One entry (so one task message) per part: any worker takes any part.
        with transaction.atomic():
            for index in range(parts):
                outbox.record(NOTE_PART, subject_id=note.pk, object_id=pack_part(delivery.Part(parts, index)))
        result = FanOut(mode="split", parts=parts)
    else:
        followers, writes = delivery.fan_out_to_followers(client, note.author_id, entry)
        result = FanOut(mode="push", followers=followers, inbox_writes=writes)
        observe_fan_out_lag(published_ms=note.published_ms, mode="push")
    Note.objects.filter(pk=note_id, fanned_out_at__isnull=True).update(fanned_out_at=timezone.now())
    # Verify: hidden or deleted while we delivered -> take it back.
    if not Note.objects.filter(pk=note_id, is_hidden=False, deleted_at__isnull=True).exists():
        note_retract(note_id=note_id)
    return result


# A part's object id packs the part count above the index, so a part is
# applied as it was split even if FEED_FANOUT_PART_FOLLOWERS changed since.
PART_INDEX_BITS = 16


def pack_part(part: delivery.Part) -> int:
    """``part`` as the ``object_id`` of a ``feed.note_part`` entry."""
    return (part.parts << PART_INDEX_BITS) | part.index


def unpack_part(object_id: int) -> delivery.Part:
    """The ``Part`` packed by ``pack_part``."""
    return delivery.Part(object_id >> PART_INDEX_BITS, object_id & ((1 << PART_INDEX_BITS) - 1))


def note_fan_out_part(*, note_id: int, part: delivery.Part) -> FanOut:
    """Deliver note ``note_id`` to one part of its author's followers (a split fan-out).

    The same checks as ``note_fan_out`` for each reader (``DELIVER_LUA``),
    and the same verify-then-retract when the note was hidden or deleted
    while the part delivered; parts run in any order, on any worker, twice.

    :returns: ``FanOut(mode="push")`` with this part's figures; ``skipped`` when the note is gone or not visible.
    :raises: ``REDIS_ERRORS`` (the entry stays pending).
    """
    note = Note.objects.filter(pk=note_id).first()
    if note is None or not note.is_visible:
        return FanOut(mode="skipped")
    followers, writes = delivery.fan_out_to_followers(get_redis(), note.author_id, [(note.pk, note.published_ms)], part=part)
    observe_fan_out_lag(published_ms=note.published_ms, mode="part")
    if not Note.objects.filter(pk=note_id, is_hidden=False, deleted_at__isnull=True).exists():
        note_retract(note_id=note_id)
    return FanOut(mode="push", followers=followers, inbox_writes=writes)


def note_retract(*, note_id: int, author_id: int | None = None) -> int:
    """Remove note ``note_id`` from the note cache, its author's outbox and every follower's inbox.

    A note that is visible again (unhidden meanwhile) is left alone.
    Followers are found as at fan-out, from the Follow rows when the
    author is deactivated (the mirror no longer lists them).

    :param author_id: needed when the row is gone (hard delete).
    :returns: the number of inbox members removed.
    :raises: ``REDIS_ERRORS`` (the entry stays pending).
    """
    note = Note.objects.select_related("author").filter(pk=note_id).first()
    if note is not None and note.is_visible:
        return 0
    client = get_redis()
    note_cache.cache_forget(client, note_ids=[note_id])
    author = note.author_id if note is not None else author_id
    if author is None:
        return 0
    client.zrem(redis_keys.outbox_key(author), redis_keys.note_member(note_id))
    source = "auto" if note is not None and note.author.is_active else "database"
    removed = 0
    for batch in delivery.follower_batches(client, author, source=source):
        removed += delivery.withdraw(client, batch, [note_id])
    return removed


def note_apply(*, note_id: int, author_id: int | None = None) -> None:
    """Make every feed agree with note ``note_id``'s state: fan it out while visible, else retract it.

    :raises: ``REDIS_ERRORS``.
    """
    note = Note.objects.select_related("author").filter(pk=note_id).first()
    if note is not None and note.is_visible:
        note_fan_out(note_id=note_id)
    else:
        note_retract(note_id=note_id, author_id=author_id)


# --- follow graph changes ---------------------------------------------------------


def _follows(follower_id: int, followee_id: int) -> bool:
    return Follow.objects.filter(
        follower_id=follower_id, followee_id=followee_id, follower__is_active=True, followee__is_active=True
    ).exists()


def inbox_backfill_followee(*, follower_id: int, followee_id: int) -> int:
    """After ``follower_id`` followed ``followee_id``: add the followee's newest
    ``INBOX_MAX_LEN`` visible notes to the follower's inbox, at their publish times.

    Nothing when the follow is gone again, the followee is a pull author
    (merged at read time) or the follower's inbox is not maintained (it is
    rebuilt when the reader comes back). A re-follow backfills like a
    first follow.

    :returns: the number of notes added.
    :raises: ``REDIS_ERRORS``.
    """
    if not _follows(follower_id, followee_id):
        return 0
    client = get_redis()
    # The fan-out's rule, not only the pull set: an account that crossed the
    # threshold before its next note is pulled already (its notes never
    # enter an inbox, where a later pull would not remove them).
    if delivery.is_pull_author(client, followee_id):
        return 0
    entries = recent_entries([followee_id], redis_keys.inbox_max_len())
    return delivery.deliver(client, [follower_id], followee_id, entries)


def _mutes(muter_id: int, muted_id: int) -> bool:
    live = live_mutes()
    return Mute.objects.filter(live, muter_id=muter_id, muted_id=muted_id).exists()


def inbox_remove_followee(*, follower_id: int, followee_id: int, muted: bool = False) -> int:
    """After ``follower_id`` unfollowed ``followee_id``: remove every note of the
    followee from the follower's inbox (read from the inbox, so notes older
    than the followee's outbox go too), and ids whose note row is gone.

    The removal happens in Redis only while the follower does not follow
    the followee there (a re-follow since keeps them, ``WITHDRAW_LUA``).

    :returns: the number of inbox members removed.
    :raises: ``REDIS_ERRORS``.
    """
    client = get_redis()
    members = delivery.member_ids(client.zrange(redis_keys.inbox_key(follower_id), 0, -1))
    rows = dict(Note.objects.filter(pk__in=members).values_list("pk", "author_id"))
    theirs = [member for member in members if member not in rows or rows[member] == followee_id]
    # Muted: removed whether or not the reader follows (it does); else only while it does not.
    return delivery.withdraw(client, [follower_id], theirs, unless_following=None if muted else followee_id)


def inbox_follow_apply(*, follower_id: int, followee_id: int) -> int:
    """Make ``follower_id``'s inbox agree with whether it follows (and does not mute)
    ``followee_id`` now: after a follow, an unfollow, a mute or an unmute.

    :returns: notes added (backfill) or removed.
    :raises: ``REDIS_ERRORS``.
    """
    if not _follows(follower_id, followee_id):
        return inbox_remove_followee(follower_id=follower_id, followee_id=followee_id)
    if _mutes(follower_id, followee_id):
        # A muted followee's notes leave the inbox (reads skip them anyway), so the inbox
        # stays what a rebuild makes it; an unmute brings them back through the backfill.
        return inbox_remove_followee(follower_id=follower_id, followee_id=followee_id, muted=True)
    return inbox_backfill_followee(follower_id=follower_id, followee_id=followee_id)


def author_feed_refresh(*, author_id: int) -> int:
    """After ``author_id`` was deactivated or reactivated: take its notes out of
    its followers' inboxes, or put its newest ones back (and rebuild its outbox);
    as a reader, drop its inbox, or rebuild it (it missed every fan-out while away).

    Followers come from the Follow rows, which deactivation keeps.

    :returns: the number of inbox members removed or written.
    :raises: ``REDIS_ERRORS``.
    """
    row = User.objects.filter(pk=author_id).values_list("is_active", flat=True).first()
    client = get_redis()
    outbox_key = redis_keys.outbox_key(author_id)
    if not row:
        note_ids = delivery.member_ids(client.zrange(outbox_key, 0, -1))
        note_ids += list(
            Note.objects.filter(author_id=author_id).order_by("-created_at")[: redis_keys.inbox_max_len()].values_list("pk", flat=True)
        )
        note_ids = sorted(set(note_ids))
        removed = 0
        for batch in delivery.follower_batches(client, author_id, source="database"):
            removed += delivery.withdraw(client, batch, note_ids)
        client.unlink(outbox_key, redis_keys.inbox_key(author_id), redis_keys.inbox_synced_key(author_id), redis_keys.inbox_floor_key(author_id))
        return removed
    outbox_rebuild(author_id=author_id)
    inbox_rebuild(user_id=author_id)
    if client.sismember(redis_keys.pull_authors_key(), str(author_id)):
        return 0
    entries = recent_entries([author_id], redis_keys.inbox_max_len())
    _, writes = delivery.fan_out_to_followers(client, author_id, entries, source="database")
    return writes


def account_purge(*, user_id: int) -> int:
    """After account ``user_id`` was deleted: unlink every feed key of it (its note cache entry
    too) and take it out of the pull set.

    Nothing when the account exists (the id was not deleted after all).

    :returns: the number of keys removed.
    :raises: ``REDIS_ERRORS``.
    """
    if User.objects.filter(pk=user_id).exists():
        return 0
    client = get_redis()
    client.srem(redis_keys.pull_authors_key(), str(user_id))
    forget_pull_authors()
    return int(client.unlink(*redis_keys.all_user_keys(user_id), redis_keys.author_cache_key(user_id)))


def deletion_record(*, user_id: int) -> int:
    """Inside the transaction that deletes account ``user_id`` (before the cascade): record the
    ``feed.purge`` of its keys and a ``feed.pair`` per follower, which removes its notes (their
    rows gone by then) from that follower's inbox.

    :returns: the number of entries recorded.
    """
    followers = list(Follow.objects.filter(followee_id=user_id).values_list("follower_id", flat=True))
    outbox.record_many(PAIR, [(follower_id, user_id) for follower_id in followers])
    outbox.record(PURGE, subject_id=user_id)
    return len(followers) + 1


# --- the note cache's authors ------------------------------------------------------


def author_cache_forget(*, user_ids: Sequence[int]) -> int:
    """Forget the cached display fields of accounts ``user_ids`` (``feed.author_cache``: an
    account was renamed, deactivated, reactivated or deleted), so pages read its row again and
    show none of its notes while it is deactivated or gone.

    :returns: the number of accounts forgotten.
    :raises: ``REDIS_ERRORS`` (the entries stay pending).
    """
    return note_cache.cache_forget(get_redis(), author_ids=sorted(set(user_ids)))


def _apply_author_cache(entries: Sequence[OutboxEntry]) -> None:
    author_cache_forget(user_ids=[entry.subject_id for entry in entries])


# --- registration -------------------------------------------------------------


def _each(apply: Callable[[OutboxEntry], object]) -> Callable[[Sequence[OutboxEntry]], None]:
    """A handler applying entries one by one (each is its own Redis work), duplicates once: the
    newest of them, whose ``apply_pending_before`` confirms what every one of them depends on
    (one message may carry several commits of one pair)."""

    def handler(entries: Sequence[OutboxEntry]) -> None:
        newest: dict[tuple[int, int | None], OutboxEntry] = {}
        for entry in sorted(entries, key=lambda e: e.pk):
            newest.pop((entry.subject_id, entry.object_id), None)
            newest[(entry.subject_id, entry.object_id)] = entry
        for entry in newest.values():
            apply(entry)

    return handler


def _apply_pair(entry: OutboxEntry) -> int:
    followee_id = int(entry.object_id or 0)
    # The follow mirror first: a feed job decides from it.
    outbox.apply_pending_before(entry, OUTBOX_PAIR, subject_id=entry.subject_id, object_id=followee_id)
    return inbox_follow_apply(follower_id=entry.subject_id, followee_id=followee_id)


def _apply_author(entry: OutboxEntry) -> int:
    outbox.apply_pending_before(entry, OUTBOX_USER, subject_id=entry.subject_id)
    return author_feed_refresh(author_id=entry.subject_id)


def _apply_inbox(entry: OutboxEntry) -> None:
    if inbox_rebuild(user_id=entry.subject_id).busy:
        raise EntryNotApplied(f"another rebuild of {entry.subject_id}'s inbox is under way")


# Stage 1: after the follow mirror's entries (stage 0) in the same batch.
NOTE = outbox.register(NOTE_KIND, apply=_each(lambda e: note_apply(note_id=e.subject_id, author_id=e.object_id)), stage=1)
# Alone: one message per part, so any worker takes any part.
NOTE_PART = outbox.register(
    NOTE_PART_KIND, apply=_each(lambda e: note_fan_out_part(note_id=e.subject_id, part=unpack_part(int(e.object_id or 0)))), stage=1, alone=True
)
PAIR = outbox.register(PAIR_KIND, apply=_each(_apply_pair), stage=1)
AUTHOR = outbox.register(AUTHOR_KIND, apply=_each(_apply_author), stage=1)
INBOX = outbox.register(INBOX_KIND, apply=_each(_apply_inbox), stage=2)
PURGE = outbox.register(PURGE_KIND, apply=_each(lambda e: account_purge(user_id=e.subject_id)), stage=2)
# Inline: the at-once half of "a deactivated author's notes are never shown".
AUTHOR_CACHE = outbox.register(AUTHOR_CACHE_KIND, apply=_apply_author_cache, inline=True)


def _rebuild_feeds(renew: Callable[[], None]) -> None:
    pull_authors_rebuild()
    renew()
    rebuild_all_outboxes(on_progress=lambda users: renew())


outbox.register_rebuild("feed.outboxes", rebuild=_rebuild_feeds, order=1)

"""The feed's outbox kinds (``feed.note``, ``.note_part``, ``.pair``, ``.author``, ``.inbox``,
``.purge``, ``.author_cache``, ``.lists``, ``.list_timeline``) and their handlers: each re-reads the database and makes Redis
agree, so a repeated, late or out-of-order job is harmless. A fan-out writes the note cache
entry before any inbox gets the id. Kinds: docs/architecture.md#the-outbox-and-its-kinds;
delivery: #notes-and-the-home-feed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from core import outbox, streaming
from core import redis_keys as core_keys
from core.cluster import pipeline
from core.errors import EntryNotApplied
from core.metrics import observe_fan_out_lag
from core.models import OutboxEntry
from core.redis import get_redis
from social.models import OUTBOX_PAIR, OUTBOX_USER, Follow, Mute, live_mutes
from social.selectors import follow_counts
from users.models import User
from users.redis_keys import account_key

from . import delivery, note_cache, redis_keys
from .models import DIRECT, ListMember, Note
from .rebuild import (
    inbox_rebuild,
    list_timeline_rebuild,
    lists_rebuild,
    outbox_rebuild,
    pull_authors_rebuild,
    rebuild_all_lists,
    rebuild_all_outboxes,
    recent_entries,
)
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
LISTS_KIND = "feed.lists"
LIST_TIMELINE_KIND = "feed.list_timeline"


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
    """Deliver note ``note_id``: its author's outbox, then every follower's maintained inbox (pull
    authors: the outbox only); idempotent; marks ``fanned_out_at``; withdrawn again if the
    note was hidden or deleted meanwhile.

    :returns: ``FanOut``; ``skipped`` when the note is gone or not visible.
    :raises: ``REDIS_ERRORS`` (the entry stays pending).
    """
    note = Note.objects.select_related("author").filter(pk=note_id).first()
    if note is None:
        return FanOut(mode="skipped")
    if not note.is_visible:
        if note.is_direct_and_shown:
            # A direct note is its author's alone: its home (the API's has its own notes) and stream.
            streaming.publish(get_redis(), [core_keys.stream_channel(note.author_id)], streaming.Event(streaming.UPDATE, note.pk))
        Note.objects.filter(pk=note_id, fanned_out_at__isnull=True).update(fanned_out_at=timezone.now())
        return FanOut(mode="skipped")
    client = get_redis()
    entry = [(note.pk, note.published_ms)]
    pipe = pipeline(client)
    # The note cache first: every inbox that gets the id finds the note there.
    note_cache.queue_cache_fill(pipe, [note], replace=True)
    delivery.queue_add(pipe, redis_keys.outbox_key(note.author_id), entry)
    pipe.execute()
    # The note is in the author's outbox now, where list timelines read it: the list streams
    # (and, for a pulled author, its followers' user streams) listen on the author's channel.
    streaming.publish(client, [core_keys.author_stream_channel(note.author_id)], streaming.Event(streaming.UPDATE, note.pk))
    # The author's own stream shows the note as its home feed does (the API's home has its own notes).
    own = [core_keys.stream_channel(note.author_id)]
    if delivery.is_pull_author(client, note.author_id):
        streaming.publish(client, own, streaming.Event(streaming.UPDATE, note.pk))
        result = FanOut(mode="pull")
    elif (parts := delivery.fan_out_parts(follow_counts(user_id=note.author_id).followers)) > 1:
        # One entry (so one task message) per part: any worker takes any part.
        with transaction.atomic():
            for index in range(parts):
                outbox.record(NOTE_PART, subject_id=note.pk, object_id=pack_part(delivery.Part(parts, index)))
        streaming.publish(client, own, streaming.Event(streaming.UPDATE, note.pk))
        result = FanOut(mode="split", parts=parts)
    else:
        followers, writes = delivery.fan_out_to_followers(client, note.author_id, entry)
        streaming.publish(client, own, streaming.Event(streaming.UPDATE, note.pk))
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
    """Deliver note ``note_id`` to one part of its author's followers (a split fan-out), with
    ``note_fan_out``'s checks; parts run in any order, on any worker, twice.

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
    """Remove note ``note_id`` from the note cache, its author's outbox and every follower's inbox
    (followers from the Follow rows when the author is deactivated), and publish its ``delete`` to
    the streams its ``update`` could have reached: none for a note no fan-out started announcing
    (``fanned_out_at`` unset), the author's alone for a direct note; a note visible again is left alone.

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
    gone = streaming.Event(streaming.DELETE, note_id)
    if note is not None and note.visibility == DIRECT:
        # Never in an outbox or inbox (a note's visibility does not change): only its author saw it.
        streaming.publish(client, [core_keys.stream_channel(author)], gone)
        return 0
    client.zrem(redis_keys.outbox_key(author), redis_keys.note_member(note_id))
    source = "auto" if note is not None and note.author.is_active else "database"
    # A note no fan-out finished reached no stream: telling of its deletion would tell of the note.
    # (A fan-out under way now retracts it again when it finishes, announcing then.)
    announce = note is None or note.fanned_out_at is not None
    removed = 0
    if announce:
        streaming.publish(client, [core_keys.stream_channel(author), core_keys.author_stream_channel(author)], gone)
    for batch in delivery.follower_batches(client, author, source=source):
        removed += delivery.withdraw(client, batch, [note_id])
        if announce:
            streaming.publish(client, [core_keys.stream_channel(reader) for reader in batch], gone)
    return removed


def note_apply(*, note_id: int, author_id: int | None = None) -> None:
    """Make every feed agree with note ``note_id``'s state: fan it out while visible (a direct note:
    to its author's stream), else retract it.

    :raises: ``REDIS_ERRORS``.
    """
    note = Note.objects.select_related("author").filter(pk=note_id).first()
    if note is not None and note.is_live:
        note_fan_out(note_id=note_id)
    else:
        note_retract(note_id=note_id, author_id=author_id)


# --- follow graph changes ---------------------------------------------------------


def _follows(follower_id: int, followee_id: int) -> bool:
    return Follow.objects.filter(
        follower_id=follower_id, followee_id=followee_id, follower__is_active=True, followee__is_active=True
    ).exists()


def inbox_backfill_followee(*, follower_id: int, followee_id: int) -> int:
    """After ``follower_id`` followed ``followee_id``: add the followee's newest ``INBOX_MAX_LEN``
    visible notes to the follower's inbox. Nothing when the follow is gone, the followee is a
    pull author or the inbox is not maintained.

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
    return delivery.deliver(client, [follower_id], followee_id, entries, announce=False)


def _mutes(muter_id: int, muted_id: int) -> bool:
    live = live_mutes()
    return Mute.objects.filter(live, muter_id=muter_id, muted_id=muted_id).exists()


def inbox_remove_followee(*, follower_id: int, followee_id: int, muted: bool = False) -> int:
    """After ``follower_id`` unfollowed ``followee_id``: remove the followee's notes (read from the
    inbox) and ids whose row is gone, only while Redis says the follower does not follow it (``WITHDRAW_LUA``).

    :returns: the number of inbox members removed.
    :raises: ``REDIS_ERRORS``.
    """
    client = get_redis()
    members = delivery.member_ids(client.zrange(redis_keys.inbox_key(follower_id), 0, -1))
    rows = dict(Note.objects.filter(pk__in=members).values_list("pk", "author_id"))
    theirs = [member for member in members if member not in rows or rows[member] == followee_id]
    # Muted: removed whether or not the reader follows (it does); else only while it does not.
    if muted:
        return delivery.withdraw(client, [follower_id], theirs, inbox_only=True)
    return delivery.withdraw(client, [follower_id], theirs, unless_following=followee_id)


def _excludes(reader_id: int, account_id: int) -> bool:
    return ListMember.objects.filter(list__owner_id=reader_id, list__exclusive=True, account_id=account_id).exists()


def inbox_follow_apply(*, follower_id: int, followee_id: int) -> int:
    """Make ``follower_id``'s inbox agree with whether it follows (and neither mutes nor holds in
    an exclusive list) ``followee_id`` now: after a follow, an unfollow, a mute or an unmute, a
    change of an exclusive list.

    :returns: notes added (backfill) or removed.
    :raises: ``REDIS_ERRORS``.
    """
    if not _follows(follower_id, followee_id):
        return inbox_remove_followee(follower_id=follower_id, followee_id=followee_id)
    if _mutes(follower_id, followee_id) or _excludes(follower_id, followee_id):
        # A muted followee's notes leave the inbox (reads skip them anyway), so the inbox
        # stays what a rebuild makes it; an unmute brings them back through the backfill.
        return inbox_remove_followee(follower_id=follower_id, followee_id=followee_id, muted=True)
    return inbox_backfill_followee(follower_id=follower_id, followee_id=followee_id)


def author_feed_refresh(*, author_id: int) -> int:
    """After ``author_id`` was (de)activated: take its notes out of its followers' inboxes (from the
    Follow rows) or put its newest back and rebuild its outbox; drop or rebuild its own inbox.

    :returns: the number of inbox members removed or written.
    :raises: ``REDIS_ERRORS``.
    """
    row = User.objects.filter(pk=author_id).values_list("is_active", flat=True).first()
    client = get_redis()
    outbox_key = redis_keys.outbox_key(author_id)
    if not row:
        note_ids = delivery.member_ids(client.zrange(outbox_key, 0, -1))
        note_ids += list(
            Note.objects.filter(author_id=author_id)
            .order_by("-created_at")[: redis_keys.inbox_max_len()]
            .values_list("pk", flat=True)
        )
        note_ids = sorted(set(note_ids))
        removed = 0
        for batch in delivery.follower_batches(client, author_id, source="database"):
            removed += delivery.withdraw(client, batch, note_ids)
        client.unlink(
            outbox_key,
            redis_keys.inbox_key(author_id),
            redis_keys.inbox_synced_key(author_id),
            redis_keys.inbox_floor_key(author_id),
        )
        return removed
    outbox_rebuild(author_id=author_id)
    inbox_rebuild(user_id=author_id)
    if client.sismember(redis_keys.pull_authors_key(), str(author_id)):
        return 0
    entries = recent_entries([author_id], redis_keys.inbox_max_len())
    _, writes = delivery.fan_out_to_followers(client, author_id, entries, source="database", announce=False)
    return writes


def account_purge(*, user_id: int) -> int:
    """After account ``user_id`` was deleted: unlink its feed keys and note cache entry, take it out
    of the pull set; nothing when the account exists.

    :returns: the number of keys removed.
    :raises: ``REDIS_ERRORS``.
    """
    if User.objects.filter(pk=user_id).exists():
        return 0
    client = get_redis()
    client.srem(redis_keys.pull_authors_key(), str(user_id))
    forget_pull_authors()
    lists = [
        key
        for list_id in client.smembers(redis_keys.list_index_key(user_id))
        for key in (redis_keys.list_members_key(user_id, int(list_id)), *redis_keys.list_timeline_keys(user_id, int(list_id)))
    ]
    return int(client.unlink(*redis_keys.all_user_keys(user_id), *lists, account_key(user_id)))


def deletion_record(*, user_id: int) -> int:
    """In the transaction deleting ``user_id`` (before the cascade): record its ``feed.purge`` and a
    ``feed.pair`` per follower.

    :returns: the number of entries recorded.
    """
    followers = list(Follow.objects.filter(followee_id=user_id).values_list("follower_id", flat=True))
    outbox.record_many(PAIR, [(follower_id, user_id) for follower_id in followers])
    outbox.record(PURGE, subject_id=user_id)
    return len(followers) + 1


# --- lists ----------------------------------------------------------------------------


def lists_apply(*, reader_ids: Sequence[int]) -> int:
    """Make the list keys of ``reader_ids`` agree with the database (``feed.rebuild.lists_rebuild``);
    the inboxes follow through the ``feed.pair`` entries the change recorded beside.

    :returns: the number of readers written.
    :raises: ``REDIS_ERRORS`` (the entries stay pending).
    """
    return len(lists_rebuild(sorted(set(reader_ids))))


def lists_record(*, reader_ids: Sequence[int], account_ids: Sequence[int] = ()) -> int:
    """In a list change's transaction: record ``feed.lists`` of each of ``reader_ids``, and a
    ``feed.pair`` of each (reader, account) pair whose exclusion from the home feed may change.

    :returns: the number of entries recorded.
    """
    readers = sorted(set(reader_ids))
    outbox.record_many(LISTS, [(reader_id, None) for reader_id in readers])
    pairs = [(reader_id, account_id) for reader_id in readers for account_id in sorted(set(account_ids))]
    outbox.record_many(PAIR, pairs)
    return len(readers) + len(pairs)


# --- the note cache's authors ------------------------------------------------------


def author_cache_forget(*, user_ids: Sequence[int]) -> int:
    """Forget the cached display fields of accounts ``user_ids`` (renamed, (de)activated, deleted).

    :returns: the number of accounts forgotten.
    :raises: ``REDIS_ERRORS`` (the entries stay pending).
    """
    return note_cache.cache_forget(get_redis(), author_ids=sorted(set(user_ids)))


def _apply_author_cache(entries: Sequence[OutboxEntry]) -> None:
    author_cache_forget(user_ids=[entry.subject_id for entry in entries])


# --- registration -------------------------------------------------------------


def _each(apply: Callable[[OutboxEntry], object]) -> Callable[[Sequence[OutboxEntry]], None]:
    """A handler applying entries one by one, duplicates once: the newest, whose
    ``apply_pending_before`` confirms what all of them depend on.
    """

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
    # The reader's excluded set too: deliveries decide from it.
    outbox.apply_pending_before(entry, LISTS_KIND, subject_id=entry.subject_id)
    return inbox_follow_apply(follower_id=entry.subject_id, followee_id=followee_id)


def _apply_author(entry: OutboxEntry) -> int:
    outbox.apply_pending_before(entry, OUTBOX_USER, subject_id=entry.subject_id)
    return author_feed_refresh(author_id=entry.subject_id)


def _apply_lists(entries: Sequence[OutboxEntry]) -> None:
    lists_apply(reader_ids=[entry.subject_id for entry in entries])


def _apply_inbox(entry: OutboxEntry) -> None:
    if inbox_rebuild(user_id=entry.subject_id).busy:
        raise EntryNotApplied(f"another rebuild of {entry.subject_id}'s inbox is under way")


# Stage 1: after the follow mirror's entries (stage 0) in the same batch.
NOTE = outbox.register(NOTE_KIND, apply=_each(lambda e: note_apply(note_id=e.subject_id, author_id=e.object_id)), stage=1)
# Alone: one message per part, so any worker takes any part.
NOTE_PART = outbox.register(
    NOTE_PART_KIND,
    apply=_each(lambda e: note_fan_out_part(note_id=e.subject_id, part=unpack_part(int(e.object_id or 0)))),
    stage=1,
    alone=True,
)
PAIR = outbox.register(PAIR_KIND, apply=_each(_apply_pair), stage=1)
AUTHOR = outbox.register(AUTHOR_KIND, apply=_each(_apply_author), stage=1)
INBOX = outbox.register(INBOX_KIND, apply=_each(_apply_inbox), stage=2)
PURGE = outbox.register(PURGE_KIND, apply=_each(lambda e: account_purge(user_id=e.subject_id)), stage=2)
# Stage 0: a reader's excluded set is written before the feed jobs of the same batch.
LISTS = outbox.register(LISTS_KIND, apply=_apply_lists, stage=0)
# A list's kept timeline built from the database (object: the list id); a read asked for it.
LIST_TIMELINE = outbox.register(
    LIST_TIMELINE_KIND,
    apply=_each(lambda e: list_timeline_rebuild(reader_id=e.subject_id, list_id=int(e.object_id or 0))),
    stage=2,
)
# Inline: the at-once half of "a deactivated author's notes are never shown".
AUTHOR_CACHE = outbox.register(AUTHOR_CACHE_KIND, apply=_apply_author_cache, inline=True)


def _rebuild_feeds(renew: Callable[[], None]) -> None:
    pull_authors_rebuild()
    renew()
    rebuild_all_outboxes(on_progress=lambda users: renew())


outbox.register_rebuild("feed.outboxes", rebuild=_rebuild_feeds, order=1)


def _rebuild_lists(renew: Callable[[], None]) -> None:
    rebuild_all_lists(on_progress=lambda readers: renew())


outbox.register_rebuild("feed.lists", rebuild=_rebuild_lists, order=1)

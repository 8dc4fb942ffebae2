"""Rebuild feeds in Redis from the database: one inbox, or every outbox, the pull set and active inboxes.

Sets are built aside and swapped in; an inbox under its build lock (deliveries write the copy
too) with its ``rebuilding`` flag set meanwhile (cleared at the end, expiring if the worker
dies); an outbox gets notes published since its start (minus ``REBUILD_OVERLAP``) again after
the swap. Every step is idempotent. Design: docs/architecture.md#notes-and-the-home-feed.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import redis
from django.conf import settings
from django.db.models import Count, Exists, F, Max, OuterRef, QuerySet, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from core.cluster import Pipe, lua, node_client, pipeline, queue_script
from core.redis import RedisLock, RedisLockLost, get_redis
from core.replica import primary_reads
from social.models import Follow, Mute, live_mutes
from social.selectors import active_follows
from users.models import User
from users.selectors import id_ranges

from . import redis_keys
from .delivery import Entry, active_cutoff, queue_add
from .fallback import visible_notes
from .models import FEED_VISIBILITIES, List, ListMember, to_ms
from .selectors import forget_pull_authors, shown_members

logger = logging.getLogger(__name__)

# Notes published this long before an outbox rebuild started are added again
# after its swaps: a transaction that commits late is still covered (seconds).
REBUILD_OVERLAP = timedelta(seconds=60)
# Notes per script call while an inbox is built aside.
BUILD_CHUNK = 500
# The synced marker expires this long before the reader would start being
# skipped at fan-out, so a marker never outlives the reader's deliveries.
SYNC_MARGIN = timedelta(hours=1)


def synced_until(last_seen_at: datetime | None) -> datetime | None:
    """Until when an inbox rebuilt now stays complete: the reader's last visit plus ``FEED_ACTIVE_DAYS``
    minus ``SYNC_MARGIN``; None when already past (or never seen).
    """
    if last_seen_at is None:
        return None
    until = last_seen_at + timedelta(days=int(settings.FEED_ACTIVE_DAYS)) - SYNC_MARGIN
    return until if until > timezone.now() else None


def recent_entries(author_ids: Collection[int], limit: int, *, since: datetime | None = None) -> list[Entry]:
    """The newest ``limit`` visible notes of ``author_ids``: ``[(note_id, score_ms)]``."""
    if not author_ids:
        return []
    rows = visible_notes().filter(author_id__in=list(author_ids))
    if since is not None:
        rows = rows.filter(created_at__gte=since)
    return [(note_id, to_ms(at)) for note_id, at in rows.order_by("-created_at", "id").values_list("id", "created_at")[:limit]]


@dataclass
class InboxRebuild:
    """Outcome of one inbox rebuild: ``entries`` written, ``synced`` marker set; ``busy`` when
    another rebuild of the same inbox holds its build lock (nothing was done)."""

    entries: int
    synced: bool
    busy: bool = False


# KEYS: the build copy, the removed-during-build set, the build lock. ARGV:
# the build's token, the cap, then score, member pairs read from the
# database. A member removed since the build started (an unfollow, a
# deleted note) is not brought back; a build whose lock is no longer its
# own (dropped, taken over) writes nothing: the copy may be the next build's.
BUILD_ADD_LUA = """
if redis.call('GET', KEYS[3]) ~= ARGV[1] then return -1 end
local cap = tonumber(ARGV[2])
for i = 3, #ARGV, 2 do
  if redis.call('SISMEMBER', KEYS[2], ARGV[i + 1]) == 0 then redis.call('ZADD', KEYS[1], ARGV[i], ARGV[i + 1]) end
end
if redis.call('ZCARD', KEYS[1]) > cap then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(cap + 1)) end
return redis.call('ZCARD', KEYS[1])
"""
# KEYS: inbox, build copy, build lock, removed set, synced marker, floor.
# ARGV: the build's token, the synced marker's expiry (unix seconds; 0: not
# synced), the cap, the lowest score of a database read that filled the cap
# (-1: it did not), and for a list timeline the synced marker's value and
# "expire" (the set and its floor expire with the marker). Swaps the copy in
# only while the lock is still this build's. Older notes were left out when
# the read filled the cap, or when the copy did (deliveries meanwhile), even
# if withdrawals during the build left it short: that lowest score becomes
# the floor (``DELIVER_LUA``).
SWAP_INBOX_LUA = """
if redis.call('GET', KEYS[3]) ~= ARGV[1] then return 0 end
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('RENAME', KEYS[2], KEYS[1]) else redis.call('UNLINK', KEYS[1]) end
redis.call('DEL', KEYS[3], KEYS[4], KEYS[6])
local floor = tonumber(ARGV[4])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  floor = math.max(floor, tonumber(redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2]))
end
if floor >= 0 then redis.call('SET', KEYS[6], floor) end
local expiry = tonumber(ARGV[2])
if expiry > 0 then
  redis.call('SET', KEYS[5], ARGV[5] or '1', 'EXAT', expiry)
  if ARGV[6] == 'expire' then
    redis.call('EXPIREAT', KEYS[1], expiry)
    redis.call('EXPIREAT', KEYS[6], expiry)
  end
else
  redis.call('DEL', KEYS[5])
end
return 1
"""


def read_floor(entries: Sequence[Entry]) -> int:
    """The floor a build's database read sets: its lowest score when it filled the cap (older
    notes were left out), else -1. ``entries`` newest first."""
    return int(entries[-1][1]) if len(entries) >= redis_keys.inbox_max_len() else -1


def _queue_build_add(pipe: Pipe, copy: str, removed: str, lock: RedisLock, entries: Sequence[Entry]) -> None:
    """Queue ``BUILD_ADD_LUA`` calls adding ``entries`` to a build's ``copy``, ``BUILD_CHUNK`` a call."""
    for start in range(0, len(entries), BUILD_CHUNK):
        args: list[int | str] = [lock.token.decode(), redis_keys.inbox_max_len()]
        for note_id, score in entries[start : start + BUILD_CHUNK]:
            args += (score, redis_keys.note_member(note_id))
        queue_script(pipe, lua(BUILD_ADD_LUA), [copy, removed, lock.key], args)


def database_inboxes(reader_ids: Sequence[int], pulled: Collection[int]) -> dict[int, list[Entry]]:
    """What each reader's inbox must hold: ``{reader_id: [(note_id, score_ms)]}``, newest first: the
    newest ``INBOX_MAX_LEN`` visible notes of active followees, less ``pulled`` and muted authors
    and the members of the reader's exclusive lists.
    One query (a ROW_NUMBER window per reader).
    """
    truth: dict[int, list[Entry]] = {int(reader_id): [] for reader_id in reader_ids}
    if not truth:
        return truth
    rows = (
        Follow.objects.filter(
            follower_id__in=list(truth),
            followee__is_active=True,
            followee__notes__is_hidden=False,
            followee__notes__deleted_at__isnull=True,
            followee__notes__visibility__in=FEED_VISIBILITIES,
        )
        .exclude(followee_id__in=sorted(pulled))
        .exclude(
            Exists(Mute.objects.filter(muter_id=OuterRef("follower_id"), muted_id=OuterRef("followee_id")).filter(live_mutes()))
        )
        .exclude(
            Exists(
                ListMember.objects.filter(
                    list__owner_id=OuterRef("follower_id"), list__exclusive=True, account_id=OuterRef("followee_id")
                )
            )
        )
        .annotate(
            note_id=F("followee__notes__id"),
            published=F("followee__notes__created_at"),
            rank=Window(
                RowNumber(),
                partition_by=[F("follower_id")],
                order_by=[F("followee__notes__created_at").desc(), F("followee__notes__id").asc()],
            ),
        )
        .filter(rank__lte=redis_keys.inbox_max_len())
        .order_by("follower_id", "rank")
        .values_list("follower_id", "note_id", "published")
    )
    for reader_id, note_id, published in rows:
        truth[int(reader_id)].append((int(note_id), to_ms(published)))
    return truth


def pull_authors(client: redis.Redis) -> set[int]:
    """The pull set: authors whose notes are merged at read time (SMEMBERS)."""
    return {int(member) for member in client.smembers(redis_keys.pull_authors_key())}


@primary_reads()
def inboxes_rebuild(reader_ids: Sequence[int]) -> dict[int, InboxRebuild]:
    """Rebuild the inboxes of ``reader_ids`` from the database, pipelined (three round trips, two queries).

    Each build lock is taken before the database read; the swap script sets or clears the
    synced marker (``synced_until``); a deactivated or deleted reader's inbox is dropped.

    :returns: ``{reader_id: InboxRebuild}``; ``busy`` for a reader whose inbox another rebuild holds.
    :raises: Redis errors (REDIS_ERRORS) and database errors propagate; the rebuilding flags
        and the build locks taken are released either way.
    """
    client = get_redis()
    ids = list(dict.fromkeys(int(reader_id) for reader_id in reader_ids))
    ttl = redis_keys.REBUILDING_TTL_SECONDS
    locks = {
        reader_id: RedisLock(client=client, key=redis_keys.inbox_build_key(reader_id), milliseconds=ttl * 1000)
        for reader_id in ids
    }
    pipe = pipeline(client)
    for reader_id in ids:
        pipe.set(redis_keys.inbox_rebuilding_key(reader_id), "1", ex=ttl)
        pipe.set(locks[reader_id].key, locks[reader_id].token, nx=True, px=ttl * 1000)
    replies = pipe.execute()
    held = [reader_id for index, reader_id in enumerate(ids) if replies[2 * index + 1]]
    results = {reader_id: InboxRebuild(entries=0, synced=False, busy=True) for reader_id in ids}
    try:
        pipe = pipeline(client)
        for reader_id in held:
            pipe.delete(
                redis_keys.rebuild_tmp_key(redis_keys.inbox_key(reader_id)), redis_keys.inbox_build_removed_key(reader_id)
            )
        pipe.execute()
        seen = dict(User.objects.filter(pk__in=held, is_active=True).values_list("pk", "last_seen_at"))
        truth = database_inboxes([reader_id for reader_id in held if reader_id in seen], pull_authors(client))
        pipe = pipeline(client)
        order: list[int] = []
        for reader_id in held:
            inbox = redis_keys.inbox_key(reader_id)
            copy = redis_keys.rebuild_tmp_key(inbox)
            removed = redis_keys.inbox_build_removed_key(reader_id)
            entries = truth.get(reader_id, [])
            _queue_build_add(pipe, copy, removed, locks[reader_id], entries)
            # A deactivated or deleted reader: the copy stays empty and no synced marker is set.
            until = synced_until(seen[reader_id]) if reader_id in seen else None
            expiry = int(until.timestamp()) if until is not None else 0
            keys = [
                inbox,
                copy,
                locks[reader_id].key,
                removed,
                redis_keys.inbox_synced_key(reader_id),
                redis_keys.inbox_floor_key(reader_id),
            ]
            swap_args = [locks[reader_id].token, expiry, redis_keys.inbox_max_len(), read_floor(entries)]
            queue_script(pipe, lua(SWAP_INBOX_LUA), keys, swap_args)
            order.append(reader_id)
            results[reader_id] = InboxRebuild(entries=len(entries), synced=until is not None)
        swapped = pipe.execute()[-len(order) :] if order else []
        lost = [reader_id for reader_id, ok in zip(order, swapped) if not ok]
        if lost:
            raise RedisLockLost(f"the build lock of the inboxes of {lost[:5]} expired during their rebuild")
        return results
    finally:
        pipe = pipeline(client)
        for reader_id in ids:
            pipe.delete(redis_keys.inbox_rebuilding_key(reader_id))
        for reader_id in held:
            locks[reader_id].queue_release(pipe)  # a no-op where the swap already deleted it
        pipe.execute()


def inbox_rebuild(*, user_id: int) -> InboxRebuild:
    """Rebuild ``user_id``'s inbox from the database (``inboxes_rebuild`` of one reader).

    :returns: an ``InboxRebuild`` (``busy`` when another rebuild holds the lock).
    :raises: as ``inboxes_rebuild``.
    """
    return inboxes_rebuild([user_id])[user_id]


def _queue_replace(pipe: Pipe, key: str, entries: list[Entry]) -> None:
    tmp = redis_keys.rebuild_tmp_key(key)
    pipe.delete(tmp)
    if entries:
        queue_add(pipe, tmp, entries)
        pipe.rename(tmp, key)
    else:
        pipe.unlink(key)


def _replace(client: redis.Redis, key: str, entries: list[Entry]) -> None:
    # MULTI on the server of the key's slot: tmp and key share the hash tag.
    pipe = node_client(client, key).pipeline(transaction=True)
    _queue_replace(pipe, key, entries)
    pipe.execute()


@primary_reads()
def outbox_rebuild(*, author_id: int) -> int:
    """Rebuild ``author_id``'s outbox from the database; returns the entries written."""
    client = get_redis()
    entries = recent_entries([author_id], redis_keys.inbox_max_len())
    _replace(client, redis_keys.outbox_key(author_id), entries)
    return len(entries)


@primary_reads()
def pull_authors_rebuild() -> set[int]:
    """Re-derive the pull set from the database: authors with at least
    ``FANOUT_PULL_THRESHOLD`` active followers. Returns the set written."""
    client = get_redis()
    threshold = int(settings.FANOUT_PULL_THRESHOLD)
    authors = set(
        active_follows()
        .values("followee_id")
        .annotate(n=Count("follower_id"))
        .filter(n__gte=threshold)
        .values_list("followee_id", flat=True)
    )
    key = redis_keys.pull_authors_key()
    pipe = node_client(client, key).pipeline(transaction=True)
    tmp = redis_keys.rebuild_tmp_key(key)
    pipe.delete(tmp)
    if authors:
        pipe.sadd(tmp, *sorted(authors))
        pipe.rename(tmp, key)
    else:
        pipe.unlink(key)
    # Kept list timelines left out the authors pulled until now: they are built again.
    pipe.incr(redis_keys.pull_generation_key())
    pipe.execute()
    forget_pull_authors()
    return authors


def _outboxes_range(client: redis.Redis, low: int, high: int) -> int:
    cap = redis_keys.inbox_max_len()
    # Top-N per author in one query (ROW_NUMBER over the author index).
    ranked = (
        visible_notes()
        .filter(author_id__gt=low, author_id__lte=high)
        .annotate(rank=Window(RowNumber(), partition_by=[F("author_id")], order_by=[F("created_at").desc(), F("id").asc()]))
        .filter(rank__lte=cap)
        .values_list("author_id", "id", "created_at")
    )
    by_author: dict[int, list[Entry]] = defaultdict(list)
    for author_id, note_id, at in ranked:
        by_author[author_id].append((note_id, to_ms(at)))
    user_ids = list(User.objects.filter(pk__gt=low, pk__lte=high).values_list("pk", flat=True))
    pipe = pipeline(client)
    for user_id in user_ids:
        _queue_replace(pipe, redis_keys.outbox_key(user_id), by_author.get(user_id, []))
    pipe.execute()
    return sum(len(entries) for entries in by_author.values())


@dataclass
class FeedRebuildStats:
    """What a full rebuild did: ``pull_authors``, ``outbox_entries``, ``inboxes`` rebuilt,
    ``inbox_entries`` written, ``last_user_id`` reached."""

    pull_authors: int = 0
    outbox_entries: int = 0
    inboxes: int = 0
    inbox_entries: int = 0
    last_user_id: int = 0


def readers_to_rebuild(*, start_after: int = 0, include_inactive: bool = False) -> QuerySet[User, int]:
    """Ids of the accounts whose inboxes a full rebuild writes: active, and seen within
    ``FEED_ACTIVE_DAYS`` unless ``include_inactive`` (a queryset, ascending ids)."""
    users = User.objects.filter(is_active=True, pk__gt=start_after)
    if not include_inactive:
        users = users.filter(last_seen_at__gte=active_cutoff())
    return users.order_by("pk").values_list("pk", flat=True)


@primary_reads()
def rebuild_all_outboxes(
    *, start_after: int = 0, batch_users: int = 2000, on_progress: Callable[[int], None] | None = None
) -> int:
    """Rebuild every author's outbox from the database, ``batch_users`` accounts at a time (``users.selectors.id_ranges``).

    :param start_after: skip accounts with ids up to this one (resume).
    :param on_progress: called with the number of ids walked after each batch.
    :returns: the outbox entries written.
    """
    client = get_redis()
    started = timezone.now()
    written = 0
    top = User.objects.aggregate(top=Max("pk"))["top"] or 0
    for low, high in id_ranges(start_after=start_after, top=top, batch_users=batch_users):
        written += _outboxes_range(client, low, high)
        if on_progress is not None:
            on_progress(high - low)
    late = visible_notes().filter(created_at__gte=started - REBUILD_OVERLAP, author_id__gt=start_after)
    pipe = pipeline(client)
    for author_id, note_id, at in late.values_list("author_id", "id", "created_at"):
        queue_add(pipe, redis_keys.outbox_key(author_id), [(note_id, to_ms(at))])
    pipe.execute()
    return written


@primary_reads()
def rebuild_all_inboxes(
    *,
    start_after: int = 0,
    batch_users: int = 2000,
    include_inactive: bool = False,
    on_progress: Callable[[str, int], None] | None = None,
) -> FeedRebuildStats:
    """Rebuild every feed structure: the pull set, every outbox, the inbox of every reader seen
    within ``FEED_ACTIVE_DAYS``.

    :param start_after: skip accounts with ids up to this one (resume).
    :param on_progress: called with ``("outboxes", users_in_batch)`` and ``("inboxes", readers_in_batch)``.
    :returns: ``FeedRebuildStats``.
    """
    stats = FeedRebuildStats(last_user_id=start_after)
    stats.pull_authors = len(pull_authors_rebuild())
    stats.outbox_entries = rebuild_all_outboxes(
        start_after=start_after,
        batch_users=batch_users,
        on_progress=(lambda users: on_progress("outboxes", users)) if on_progress is not None else None,
    )
    top = User.objects.aggregate(top=Max("pk"))["top"] or 0
    readers = readers_to_rebuild(start_after=start_after, include_inactive=include_inactive)
    low = start_after
    while True:
        batch = list(readers.filter(pk__gt=low)[:batch_users])
        if not batch:
            break
        for result in inboxes_rebuild(batch).values():
            stats.inboxes += 1
            stats.inbox_entries += result.entries
        stats.last_user_id = low = batch[-1]
        if on_progress is not None:
            on_progress("inboxes", len(batch))
    stats.last_user_id = max(stats.last_user_id, top)
    logger.info("feeds rebuilt: %s", stats)
    return stats


# --- lists ----------------------------------------------------------------------------

# KEYS: the reader's list index, its excluded set, then per list (every list to drop or write)
# its members set and its kept timeline's keys (``LIST_KEYS_PER_LIST`` in all). ARGV: e
# (excluded count), e account ids, then per list in KEYS' order: 1 (written) or 0 (gone), its
# id, m, m member ids. One script per reader: its keys change at once, so a delivery
# (``DELIVER_LUA`` reads the excluded set and the lists) sees the old or the new state, never
# half. A list gone, or whose members change, loses its kept timeline (and a build under way):
# the next read builds it again from the database.
REPLACE_LISTS_LUA = """
local per = 7
local function same_members(key, from, count)
  if redis.call('SCARD', key) ~= count then return false end
  for j = from, from + count - 1 do
    if redis.call('SISMEMBER', key, ARGV[j]) == 0 then return false end
  end
  return true
end
local e = tonumber(ARGV[1])
local lists = {}
local i, k = 2 + e, 3
while i <= #ARGV do
  local written, list_id, m = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  if written == '0' or not same_members(KEYS[k], i + 3, m) then redis.call('DEL', unpack(KEYS, k + 1, k + per - 1)) end
  lists[#lists + 1] = {k, written, list_id, i + 3, m}
  i, k = i + 3 + m, k + per
end
redis.call('DEL', KEYS[1], KEYS[2])
if e > 0 then redis.call('SADD', KEYS[2], unpack(ARGV, 2, 1 + e)) end
for _, list in ipairs(lists) do
  local key, written, list_id, from, m = KEYS[list[1]], list[2], list[3], list[4], list[5]
  redis.call('DEL', key)
  if written == '1' then
    redis.call('SADD', KEYS[1], list_id)
    if m > 0 then redis.call('SADD', key, unpack(ARGV, from, from + m - 1)) end
  end
end
return 1
"""
# Keys per list in ``REPLACE_LISTS_LUA``: the members set and ``redis_keys.list_timeline_keys``.
LIST_KEYS_PER_LIST = 7


@dataclass(frozen=True)
class ListsTruth:
    """What a reader's list keys must hold: ``lists`` ``{list_id: shown member ids}`` and
    ``excluded`` (the members of its exclusive lists)."""

    lists: dict[int, set[int]]
    excluded: set[int]


def database_lists(reader_ids: Sequence[int]) -> dict[int, ListsTruth]:
    """Each reader's lists as the database has them (two queries): ``{reader_id: ListsTruth}``."""
    truth = {int(reader_id): ListsTruth(lists={}, excluded=set()) for reader_id in reader_ids}
    if not truth:
        return truth
    for owner_id, list_id in List.objects.filter(owner_id__in=list(truth)).values_list("owner_id", "pk"):
        truth[owner_id].lists[list_id] = set()
    for owner_id, list_id, account_id in (
        shown_members().filter(list__owner_id__in=list(truth)).values_list("list__owner_id", "list_id", "account_id")
    ):
        truth[owner_id].lists[list_id].add(account_id)
    exclusive = ListMember.objects.filter(list__owner_id__in=list(truth), list__exclusive=True)
    for owner_id, account_id in exclusive.values_list("list__owner_id", "account_id"):
        truth[owner_id].excluded.add(account_id)
    return truth


def redis_lists(client: redis.Redis, reader_ids: Sequence[int]) -> dict[int, ListsTruth]:
    """Each reader's list keys as Redis holds them (two pipelines): ``{reader_id: ListsTruth}``."""
    ids = [int(reader_id) for reader_id in reader_ids]
    pipe = pipeline(client)
    for reader_id in ids:
        pipe.smembers(redis_keys.list_index_key(reader_id))
        pipe.smembers(redis_keys.excluded_key(reader_id))
    replies = pipe.execute()
    indexes = {reader_id: sorted(int(member) for member in replies[2 * i]) for i, reader_id in enumerate(ids)}
    pipe = pipeline(client)
    for reader_id in ids:
        for list_id in indexes[reader_id]:
            pipe.smembers(redis_keys.list_members_key(reader_id, list_id))
    members = iter(pipe.execute())
    found = {}
    for i, reader_id in enumerate(ids):
        lists = {list_id: {int(member) for member in next(members)} for list_id in indexes[reader_id]}
        found[reader_id] = ListsTruth(lists=lists, excluded={int(member) for member in replies[2 * i + 1]})
    return found


@primary_reads()
def lists_rebuild(reader_ids: Sequence[int]) -> dict[int, ListsTruth]:
    """Write the list keys of ``reader_ids`` (``list_index_key``, ``list_members_key`` of each list,
    ``excluded_key``) from the database, dropping those of lists gone; one script per reader.

    :returns: ``{reader_id: ListsTruth}`` written.
    :raises: ``REDIS_ERRORS``.
    """
    client = get_redis()
    ids = list(dict.fromkeys(int(reader_id) for reader_id in reader_ids))
    truth = database_lists(ids)
    pipe = pipeline(client)
    for reader_id in ids:
        pipe.smembers(redis_keys.list_index_key(reader_id))
    held = dict(zip(ids, pipe.execute()))
    pipe = pipeline(client)
    for reader_id in ids:
        wanted = truth[reader_id]
        list_ids = sorted(set(wanted.lists) | {int(member) for member in held[reader_id]})
        keys = [redis_keys.list_index_key(reader_id), redis_keys.excluded_key(reader_id)]
        args: list[int | str] = [len(wanted.excluded), *sorted(wanted.excluded)]
        for list_id in list_ids:
            keys += [redis_keys.list_members_key(reader_id, list_id), *redis_keys.list_timeline_keys(reader_id, list_id)]
            members = sorted(wanted.lists.get(list_id, ()))
            args += [1 if list_id in wanted.lists else 0, list_id, len(members), *members]
        queue_script(pipe, lua(REPLACE_LISTS_LUA), keys, args)
    pipe.execute()
    return truth


@primary_reads()
def rebuild_all_lists(*, batch_users: int = 2000, on_progress: Callable[[int], None] | None = None) -> int:
    """Write the list keys of every reader who has lists (``lists_rebuild`` per batch of owners).

    :returns: the readers written.
    """
    owners = List.objects.values_list("owner_id", flat=True).distinct().order_by("owner_id")
    written = low = 0
    while True:
        batch = list(owners.filter(owner_id__gt=low)[:batch_users])
        if not batch:
            return written
        lists_rebuild(batch)
        written += len(batch)
        low = batch[-1]
        if on_progress is not None:
            on_progress(len(batch))


@dataclass(frozen=True)
class ListTimelineBuild:
    """Outcome of a list timeline build: ``entries`` written, ``kept`` (its synced marker set);
    ``lost`` when the list's members changed during it (their change dropped the build)."""

    entries: int
    kept: bool
    lost: bool = False


def list_timeline_truth(member_ids: Collection[int], pulled: Collection[int]) -> list[Entry]:
    """What a list's kept timeline with members ``member_ids`` must hold: the newest
    ``INBOX_MAX_LEN`` visible notes of active members less ``pulled`` authors (reads pull those),
    ``[(note_id, score_ms)]``."""
    return recent_entries(set(member_ids) - set(pulled), redis_keys.inbox_max_len())


@primary_reads()
def list_timeline_rebuild(*, reader_id: int, list_id: int) -> ListTimelineBuild:
    """Build list ``list_id``'s kept timeline (``redis_keys.list_inbox_key``) from the database: the
    truth (``list_timeline_truth``) of the member set Redis holds when the build takes its lock
    (a later change of that set drops the lock, so the swap fails), built aside (deliveries
    meanwhile write the copy), then swapped in with a synced marker holding the pull set's
    generation (``pull_generation_key``) and expiring as an inbox's would (``synced_until``).
    A list gone or not mirrored, or a reader inactive, leaves no timeline kept.

    :raises: ``REDIS_ERRORS`` and database errors; the lock expires if the worker dies.
    """
    client = get_redis()
    ttl = redis_keys.REBUILDING_TTL_SECONDS
    inbox = redis_keys.list_inbox_key(reader_id, list_id)
    copy, removed = redis_keys.list_copy_key(reader_id, list_id), redis_keys.list_removed_key(reader_id, list_id)
    lock = RedisLock(client=client, key=redis_keys.list_build_key(reader_id, list_id), milliseconds=ttl * 1000)
    generation = int(client.get(redis_keys.pull_generation_key()) or 0)
    # The lock is taken over from a queued request ("queued") or an earlier build, in one
    # transaction with the read of the member set the truth is made of.
    pipe = node_client(client, inbox).pipeline(transaction=True)
    pipe.set(lock.key, lock.token, px=ttl * 1000)
    pipe.delete(copy, removed)
    pipe.sismember(redis_keys.list_index_key(reader_id), str(list_id))
    pipe.smembers(redis_keys.list_members_key(reader_id, list_id))
    _, _, mirrored, members = pipe.execute()
    last_seen = User.objects.filter(pk=reader_id, is_active=True, lists__pk=list_id).values_list("last_seen_at", flat=True)
    found = list(last_seen[:1])
    until = synced_until(found[0]) if found and mirrored else None
    entries: list[Entry] = []
    if until is not None:
        entries = list_timeline_truth({int(member) for member in members}, pull_authors(client))
    pipe = pipeline(client)
    _queue_build_add(pipe, copy, removed, lock, entries)
    keys = [
        inbox,
        copy,
        lock.key,
        removed,
        redis_keys.list_synced_key(reader_id, list_id),
        redis_keys.list_floor_key(reader_id, list_id),
    ]
    expiry = int(until.timestamp()) if until is not None else 0
    swap_args = [lock.token, expiry, redis_keys.inbox_max_len(), read_floor(entries), generation, "expire"]
    queue_script(pipe, lua(SWAP_INBOX_LUA), keys, swap_args)
    swapped = bool(pipe.execute()[-1])
    if not swapped:
        lock.release()
        return ListTimelineBuild(entries=0, kept=False, lost=True)
    return ListTimelineBuild(entries=len(entries), kept=until is not None)

"""Low-level Redis writes of feeds: inbox and outbox entries, follower iteration, pull authors.

Callers (``feed.outbox``, ``feed.rebuild``) decide from the database what to write; what must
not race is decided in scripts on the reader's slot: ``DELIVER_LUA`` (adds only while the reader
follows the author and its inbox is maintained; writes the build copy too) and ``WITHDRAW_LUA``.
Writes are idempotent. Design: docs/architecture.md#notes-and-the-home-feed.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import redis
from django.conf import settings
from django.db.models import Q
from django.db.models.functions import Mod
from django.utils import timezone

from core import redis_keys as core_keys
from core import streaming
from core.cluster import Pipe, is_cluster, lua, pipeline, queue_script, slot_of, tag_template
from core.redis import mirror_ready
from social import layout
from social import redis_keys as social_keys
from social.models import Follow
from social.selectors import follow_counts

from . import redis_keys
from .selectors import forget_pull_authors

Entry = tuple[int, int]  # (note_id, score in unix ms)

# Followers read per SSCAN call.
SSCAN_COUNT = 1000

# ARGV: author id, cap, now (unix ms), m, then m score, member pairs, then
# the (head, tail) templates of a reader's keys (``core.cluster.tag_template``,
# in the order of ``READER_KEYS``: following set, inbox, synced marker,
# build lock, build copy, removed-during-build set, floor, mutes, excluded,
# then the list index and the heads of the per-list keys), then the reader
# ids. The script builds each reader's keys itself: one argument per
# reader instead of eight keys. On a cluster every reader of one call
# hashes to one slot and KEYS holds one of their inboxes (the call's
# route); on one server KEYS is empty. Returns the ids of the readers who
# got the notes in their inbox (their streams are told). A reader who mutes the author (a mute expiring after now) gets
# nothing, nor does one whose exclusive list holds the author (the excluded
# set). A note older than the floor (the highest score trimmed at the
# cap) is not added: above its lowest score an inbox must hold every note,
# and reads take what lies at or below that from the database. Each kept
# list timeline of the reader that holds the author gets the notes the
# same way (mutes are skipped by its reads, not here).
DELIVER_LUA = """
local author, cap, now, m = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local first = 5
local last = 4 + 2 * m
local lowest = math.huge
for j = first, last, 2 do lowest = math.min(lowest, tonumber(ARGV[j])) end
local t = last + 1
local fh, ft, ih, it, sh, st = ARGV[t], ARGV[t + 1], ARGV[t + 2], ARGV[t + 3], ARGV[t + 4], ARGV[t + 5]
local bh, bt, ch, ct, rh, rt = ARGV[t + 6], ARGV[t + 7], ARGV[t + 8], ARGV[t + 9], ARGV[t + 10], ARGV[t + 11]
local lh, lt, mh, mt = ARGV[t + 12], ARGV[t + 13], ARGV[t + 14], ARGV[t + 15]
local xh, xt = ARGV[t + 16], ARGV[t + 17]
local list_heads = {}
for j = t + 18, t + 33 do list_heads[#list_heads + 1] = ARGV[j] end
-- Add the notes to a sorted set kept complete above its lowest score: none below the floor; the
-- cap trims the oldest and raises the floor. Returns whether any was added.
local function add_capped(inbox, floor_key)
  local floor = tonumber(redis.call('GET', floor_key) or '-1')
  local added = false
  if lowest >= floor then
    redis.call('ZADD', inbox, unpack(ARGV, first, last))
    added = true
  else
    local add = {}
    for j = first, last, 2 do
      if tonumber(ARGV[j]) >= floor then add[#add + 1] = ARGV[j]; add[#add + 1] = ARGV[j + 1] end
    end
    if #add > 0 then redis.call('ZADD', inbox, unpack(add)); added = true end
  end
  if added then
    local over = redis.call('ZCARD', inbox) - cap
    if over > 0 then
      local trimmed = redis.call('ZRANGE', inbox, over - 1, over - 1, 'WITHSCORES')
      redis.call('ZREMRANGEBYRANK', inbox, 0, over - 1)
      if tonumber(trimmed[2]) > floor then redis.call('SET', floor_key, trimmed[2]) end
    end
  end
  return added
end
-- Into the copy of a build under way; a note withdrawn during the build comes back with it.
local function add_to_copy(copy, removed)
  redis.call('ZADD', copy, unpack(ARGV, first, last))
  for j = first + 1, last, 2 do redis.call('SREM', removed, ARGV[j]) end
end
local delivered = {}
for r = t + 34, #ARGV do
  local tag = '{' .. ARGV[r] .. '}'
  local build = bh .. tag .. bt
  -- EXISTS counts a key named twice twice: 2 x build lock + synced marker.
  local state = redis.call('EXISTS', build, build, sh .. tag .. st)
  local building = state >= 2
  local muted = false
  if state > 0 then
    local until_ms = redis.call('ZSCORE', mh .. tag .. mt, author)
    muted = until_ms and tonumber(until_ms) > now
    if not muted then muted = redis.call('SISMEMBER', xh .. tag .. xt, author) == 1 end
  end
  local follows = nil
  if state > 0 and not muted then
    follows = redis.call('SISMEMBER', fh .. tag .. ft, author) == 1
    if follows then
      add_capped(ih .. tag .. it, lh .. tag .. lt)
      if building then add_to_copy(ch .. tag .. ct, rh .. tag .. rt) end
      delivered[#delivered + 1] = ARGV[r]
    end
  end
  local lists = redis.call('SMEMBERS', list_heads[1] .. tag .. list_heads[2])
  if #lists > 0 and follows == nil then follows = redis.call('SISMEMBER', fh .. tag .. ft, author) == 1 end
  if #lists > 0 and follows then
    local h = list_heads
    for _, list_id in ipairs(lists) do
      local s = ':' .. list_id
      if redis.call('SISMEMBER', h[3] .. tag .. h[4] .. s, author) == 1 then
        local lbuild = h[11] .. tag .. h[12] .. s
        local lstate = redis.call('EXISTS', lbuild, lbuild, h[5] .. tag .. h[6] .. s)
        if lstate == 1 or lstate == 3 then
          local linbox, lfloor = h[7] .. tag .. h[8] .. s, h[9] .. tag .. h[10] .. s
          if add_capped(linbox, lfloor) then
            -- The set and a floor the cap raised expire with the marker (a set built empty is made here).
            local left = redis.call('PTTL', h[5] .. tag .. h[6] .. s)
            if left > 0 then
              redis.call('PEXPIRE', linbox, left)
              redis.call('PEXPIRE', lfloor, left)
            end
          end
        end
        if lstate >= 2 then
          local lcopy = h[13] .. tag .. h[14] .. s
          add_to_copy(lcopy, h[15] .. tag .. h[16] .. s)
          -- Gone with the lock if its build never runs (a queued build's worker died).
          local held = redis.call('PTTL', lbuild)
          if held > 0 then redis.call('PEXPIRE', lcopy, held) end
        end
      end
    end
  end
end
return delivered
"""
# ARGV: mode ("gone": from the inbox and every kept list timeline, the notes
# are gone; "any": from the inbox only, a mute or an exclusive list;
# "unfollowed": from the inbox while the reader does not follow the author),
# author id, the removed set's lifetime (seconds), m, then m members, then
# the (head, tail) templates of a reader's keys (as for ``DELIVER_LUA``),
# then the reader ids; KEYS as for ``DELIVER_LUA``. Returns how many members
# left the inboxes (list timelines not counted). A list timeline keeps a
# muted or excluded member's notes (its reads skip muted ones), and one whose
# member is unfollowed is dropped whole (``feed.rebuild.REPLACE_LISTS_LUA``).
WITHDRAW_LUA = """
local mode, author, ttl, m = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local first, last = 5, 4 + m
local t = last + 1
local fh, ft, ih, it = ARGV[t], ARGV[t + 1], ARGV[t + 2], ARGV[t + 3]
local bh, bt, ch, ct, rh, rt = ARGV[t + 6], ARGV[t + 7], ARGV[t + 8], ARGV[t + 9], ARGV[t + 10], ARGV[t + 11]
local h = {}
for j = t + 18, t + 33 do h[#h + 1] = ARGV[j] end
-- Out of a timeline, and out of the copy of its build under way (not brought back by the build).
local function take_out(inbox, lock, copy, gone)
  local n = redis.call('ZREM', inbox, unpack(ARGV, first, last))
  if redis.call('EXISTS', lock) == 1 then
    redis.call('ZREM', copy, unpack(ARGV, first, last))
    redis.call('SADD', gone, unpack(ARGV, first, last))
    redis.call('EXPIRE', gone, ttl)
  end
  return n
end
local removed = 0
for r = t + 34, #ARGV do
  local tag = '{' .. ARGV[r] .. '}'
  if mode ~= 'unfollowed' or redis.call('SISMEMBER', fh .. tag .. ft, author) == 0 then
    removed = removed + take_out(ih .. tag .. it, bh .. tag .. bt, ch .. tag .. ct, rh .. tag .. rt)
  end
  if mode == 'gone' then
    for _, list_id in ipairs(redis.call('SMEMBERS', h[1] .. tag .. h[2])) do
      local s = ':' .. list_id
      take_out(h[7] .. tag .. h[8] .. s, h[11] .. tag .. h[12] .. s, h[13] .. tag .. h[14] .. s, h[15] .. tag .. h[16] .. s)
    end
  end
end
return removed
"""


def fan_out_batch_size() -> int:
    """Followers per fan-out script call (``FEED_FANOUT_BATCH_SIZE``, default 1000)."""
    return int(settings.FEED_FANOUT_BATCH_SIZE)


def fan_out_batch_pause() -> float:
    """Seconds to sleep between fan-out batches (``FEED_FANOUT_BATCH_PAUSE_SECONDS``, default 0)."""
    return float(settings.FEED_FANOUT_BATCH_PAUSE_SECONDS)


def active_cutoff() -> datetime:
    """Readers last seen before this datetime are not kept synced (``FEED_ACTIVE_DAYS`` ago)."""
    return timezone.now() - timedelta(days=int(settings.FEED_ACTIVE_DAYS))


def member_ids(reply: Iterable[object]) -> list[int]:
    """The note ids of a ZRANGE/SMEMBERS reply without scores (members are decimal strings).

    :raises ValueError: a member that is not a decimal id.
    """
    return [int(member) for member in reply if isinstance(member, (bytes, str))]


def queue_add(pipe: Pipe, key: str, entries: Iterable[Entry]) -> None:
    """Queue ``ZADD key`` of ``entries`` and the trim to ``INBOX_MAX_LEN`` on ``pipe`` (an outbox
    or a build copy, whose writes need no follow check).

    :param entries: ``[(note_id, score_ms)]``; nothing is queued when empty.
    """
    mapping = {redis_keys.note_member(note_id): int(score) for note_id, score in entries}
    if not mapping:
        return
    pipe.zadd(key, mapping)
    # Keep the newest INBOX_MAX_LEN: ranks 0..-(cap+1) are the oldest extras.
    pipe.zremrangebyrank(key, 0, -(redis_keys.inbox_max_len() + 1))


def is_pull_author(client: redis.Redis, author_id: int) -> bool:
    """Whether ``author_id``'s notes are pulled at read time: in the pull set already (sticky until a
    full rebuild), or at least ``FANOUT_PULL_THRESHOLD`` followers now (then added to it).
    """
    if client.sismember(redis_keys.pull_authors_key(), str(author_id)):
        return True
    if follow_counts(user_id=author_id).followers >= int(settings.FANOUT_PULL_THRESHOLD):
        client.sadd(redis_keys.pull_authors_key(), str(author_id))
        forget_pull_authors()
        return True
    return False


def _redis_follower_ids(client: redis.Redis, author_id: int) -> Iterator[list[int]]:
    cursors = dict.fromkeys(layout.every_set_key(author_id), 0)
    while cursors:
        pipe = pipeline(client)
        keys = list(cursors)
        for key in keys:
            pipe.sscan(key, cursors[key], count=SSCAN_COUNT)
        for key, (cursor, members) in zip(keys, pipe.execute()):
            if members:
                yield [int(member) for member in members]
            if int(cursor) == 0:
                del cursors[key]
            else:
                cursors[key] = int(cursor)


def _database_follower_ids(author_id: int, *, batch: int, part: Part | None = None) -> Iterator[list[int]]:
    rows = Follow.objects.filter(followee_id=author_id)
    if part is not None:
        rows = rows.annotate(part=Mod("follower_id", part.parts)).filter(part=part.index)
    # Keyset over the (followee, created_at, follower) index, never OFFSET.
    last: tuple[datetime, int] | None = None
    while True:
        page = rows.order_by("created_at", "follower_id")
        if last is not None:
            page = page.filter(Q(created_at__gt=last[0]) | Q(created_at=last[0], follower_id__gt=last[1]))
        chunk = list(page.values_list("created_at", "follower_id")[:batch])
        if not chunk:
            return
        yield [follower_id for _, follower_id in chunk]
        last = chunk[-1]


def follower_batches(
    client: redis.Redis, author_id: int, *, source: str = "auto", batch: int | None = None, part: Part | None = None
) -> Iterator[list[int]]:
    """Yield ``author_id``'s followers in batches of at most ``batch`` ids (SSCAN may repeat one: harmless).

    :param part: ``Part(parts, index)``: only followers whose id is ``index`` modulo ``parts``; None: all.
    :param source: ``"redis"`` (every layout), ``"database"`` (Follow rows, also of a
        deactivated author) or ``"auto"`` (Redis when the mirror is built).
    :raises: Redis errors (REDIS_ERRORS) propagate so the outbox entry stays pending.
    """
    size = batch or fan_out_batch_size()
    use_redis = source == "redis" or (source == "auto" and mirror_ready(client))
    if not use_redis:
        yield from _database_follower_ids(author_id, batch=size, part=part)
        return
    pending: list[int] = []
    for members in _redis_follower_ids(client, author_id):
        pending.extend(members if part is None else [member for member in members if member % part.parts == part.index])
        while len(pending) >= size:
            chunk, pending = pending[:size], pending[size:]
            yield chunk
    if pending:
        yield pending


# The keys of a reader that deliveries and removals touch, in one order.
READER_KEYS: tuple[Callable[[int], str], ...] = (
    social_keys.following_set_key,
    redis_keys.inbox_key,
    redis_keys.inbox_synced_key,
    redis_keys.inbox_build_key,
    lambda reader_id: redis_keys.rebuild_tmp_key(redis_keys.inbox_key(reader_id)),
    redis_keys.inbox_build_removed_key,
    redis_keys.inbox_floor_key,
    social_keys.mutes_key,
    redis_keys.excluded_key,
    # The list index, then the heads of the per-list keys (each key is head + ":" + list id).
    redis_keys.list_index_key,
    redis_keys.list_members_base,
    redis_keys.list_synced_base,
    redis_keys.list_inbox_base,
    redis_keys.list_floor_base,
    redis_keys.list_build_base,
    redis_keys.list_copy_base,
    redis_keys.list_removed_base,
)


def _per_reader(client: redis.Redis, source: str, args: Sequence[int | str], reader_ids: Sequence[int]) -> list[Any]:
    """Run script ``source`` with ``args``, the ``READER_KEYS`` templates and the reader ids: one call
    on one server; on a cluster one per hash slot, pipelined per master.

    :returns: the calls' replies.
    """
    script = lua(source)
    templates: list[str] = [part for build in READER_KEYS for part in tag_template(build)]
    if not is_cluster(client):
        return [script(keys=[], args=[*args, *templates, *reader_ids], client=client)]
    by_slot: dict[int, list[int]] = defaultdict(list)
    for reader_id in reader_ids:
        by_slot[slot_of(redis_keys.inbox_key(reader_id))].append(reader_id)
    pipe = pipeline(client)
    for readers in by_slot.values():
        queue_script(pipe, script, [redis_keys.inbox_key(readers[0])], [*args, *templates, *readers])
    return list(pipe.execute())


def deliver(
    client: redis.Redis, reader_ids: Sequence[int], author_id: int, entries: Sequence[Entry], *, announce: bool = True
) -> int:
    """Add ``author_id``'s ``entries`` to each reader's inbox that is maintained and still follows the
    author (``DELIVER_LUA``), and publish an ``update`` of each entry to the streams of the readers reached.

    :param announce: False for old notes put back (a backfill, a re-delivery): no stream is told.
    :returns: the number of inbox writes made (readers reached times entries).
    """
    if not reader_ids or not entries:
        return 0
    args: list[int | str] = [author_id, redis_keys.inbox_max_len(), int(time.time() * 1000), len(entries)]
    for note_id, score in entries:
        args += (int(score), redis_keys.note_member(note_id))
    reached = [int(reader) for reply in _per_reader(client, DELIVER_LUA, args, reader_ids) for reader in reply]
    # Told after the inbox write, so a stream that replays from the inbox meanwhile finds it there.
    for note_id, _ in entries if announce else ():
        streaming.publish(
            client, [core_keys.stream_channel(reader) for reader in reached], streaming.Event(streaming.UPDATE, note_id)
        )
    return len(reached) * len(entries)


def withdraw(
    client: redis.Redis,
    reader_ids: Sequence[int],
    note_ids: Sequence[int],
    *,
    unless_following: int | None = None,
    inbox_only: bool = False,
) -> int:
    """Remove ``note_ids`` from each reader's inbox (and a build under way) with ``WITHDRAW_LUA``,
    and from its kept list timelines unless ``inbox_only`` or ``unless_following``.

    :param unless_following: an author id whose re-followers keep the notes; None removes them always.
    :param inbox_only: the notes stay shown elsewhere (a mute, an exclusive list): lists keep them.
    :returns: the number of members removed from the inboxes.
    """
    if not reader_ids or not note_ids:
        return 0
    mode = "unfollowed" if unless_following is not None else "any" if inbox_only else "gone"
    members = [redis_keys.note_member(note_id) for note_id in note_ids]
    args: list[int | str] = [mode, unless_following or 0, redis_keys.REBUILDING_TTL_SECONDS, len(members), *members]
    return sum(int(reply) for reply in _per_reader(client, WITHDRAW_LUA, args, reader_ids))


@dataclass(frozen=True)
class Part:
    """One part of a split fan-out: the followers whose id is ``index`` modulo ``parts``."""

    parts: int
    index: int


def fan_out_parts(followers: int) -> int:
    """Into how many parts a fan-out to ``followers`` followers is split:
    ``ceil(followers / FEED_FANOUT_PART_FOLLOWERS)``, at most ``FEED_FANOUT_MAX_PARTS``, at least 1."""
    size = max(1, int(settings.FEED_FANOUT_PART_FOLLOWERS))
    return max(1, min(int(settings.FEED_FANOUT_MAX_PARTS), -(-followers // size)))


def fan_out_to_followers(
    client: redis.Redis,
    author_id: int,
    entries: Sequence[Entry],
    *,
    source: str = "auto",
    part: Part | None = None,
    announce: bool = True,
) -> tuple[int, int]:
    """Deliver ``entries`` to ``author_id``'s followers (or one ``part``), one script call per batch,
    sleeping ``FEED_FANOUT_BATCH_PAUSE_SECONDS`` between batches; ``announce`` as for ``deliver``.

    :returns: ``(followers_walked, inbox_writes)``.
    """
    followers = writes = 0
    pause = fan_out_batch_pause()
    for batch in follower_batches(client, author_id, source=source, part=part):
        writes += deliver(client, batch, author_id, entries, announce=announce)
        followers += len(batch)
        if pause:
            time.sleep(pause)
    return followers, writes

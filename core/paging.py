"""Keyset (cursor) paging over time-ordered sorted sets, in Redis and in the database.

Order: score descending, then member descending as a decimal string (Redis's order for equal
scores), on both paths, so a cursor of one is valid in the other. The cursor is the last item's
``(score, member)``, an opaque token parsed strictly at the edge; no OFFSET anywhere.
Design: docs/architecture.md#the-follow-graph.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import redis

from .cluster import Pipe, is_cluster, lua, pipeline, queue_eval
from .errors import InvalidInput

Item = tuple[int, int]  # (member id, score)

# The last second a datetime can hold (9999-12-31 23:59:59 UTC), and in ms:
# a cursor beyond them could never be turned into a database bound.
MAX_SECONDS = 253_402_300_799
MAX_MILLISECONDS = MAX_SECONDS * 1000 + 999
MAX_MEMBER = 2**63 - 1
# Equal-score runs longer than this are walked in chunks of this size.
TIE_CHUNK = 1000
# A cursor token is short; anything longer is not one of ours.
MAX_TOKEN_LENGTH = 64


class InvalidCursorError(InvalidInput):
    """The cursor string was not made by ``Cursor.token`` (HTTP 400)."""


@dataclass(frozen=True)
class Cursor:
    """The position after an item: its ``score`` and ``member`` id; ``token`` (also ``str(cursor)``) is
    ``v1:<score>:<member>`` in unpadded base64url.
    """

    score: int
    member: int

    @property
    def token(self) -> str:
        raw = f"v1:{int(self.score)}:{int(self.member)}".encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    def __str__(self) -> str:
        return self.token

    @classmethod
    def parse(cls, raw: str | None, *, max_score: int, min_member: int) -> Cursor | None:
        """The cursor a client sent (None or "" for the first page).

        :param max_score: the largest score of this kind of list (``MAX_SECONDS`` or ``MAX_MILLISECONDS``).
        :param min_member: the smallest member (1 for accounts, 0 for note positions).
        :raises InvalidCursorError: not a token ``Cursor.token`` made, a field out of range, or a
            time a datetime cannot hold.
        """
        if raw is None or raw == "":
            return None
        if len(raw) > MAX_TOKEN_LENGTH or not raw.isascii():
            raise InvalidCursorError("Malformed cursor.")
        try:
            text = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode("ascii")
        except (ValueError, binascii.Error, UnicodeDecodeError):
            raise InvalidCursorError("Malformed cursor.") from None
        parts = text.split(":")
        if len(parts) != 3 or parts[0] != "v1" or not all(_DIGITS.fullmatch(part) for part in parts[1:]):
            raise InvalidCursorError("Malformed cursor.")
        score, member = int(parts[1]), int(parts[2])
        if not (0 <= score <= max_score and min_member <= member <= MAX_MEMBER):
            raise InvalidCursorError("Malformed cursor.")
        return cls(score=score, member=member)


_DIGITS = re.compile(r"0|[1-9][0-9]{0,18}")


def follow_cursor(raw: str | None) -> Cursor | None:
    """The cursor of a followers or following list (scores in seconds, members account ids).

    :raises InvalidCursorError: see ``Cursor.parse``.
    """
    return Cursor.parse(raw, max_score=MAX_SECONDS, min_member=1)


def feed_cursor(raw: str | None) -> Cursor | None:
    """The cursor of a timeline (scores in ms, members note ids, 0 "before every note of that ms").

    :raises InvalidCursorError: see ``Cursor.parse``.
    """
    return Cursor.parse(raw, max_score=MAX_MILLISECONDS, min_member=0)


def request_cursor(raw: str | None) -> Cursor | None:
    """The cursor of a follow-requests list (scores in ms, members request ids).

    :raises InvalidCursorError: see ``Cursor.parse``.
    """
    return Cursor.parse(raw, max_score=MAX_MILLISECONDS, min_member=1)


def control_cursor(raw: str | None) -> Cursor | None:
    """The cursor of a list of blocked or muted accounts (scores in microseconds, members row ids).

    :raises InvalidCursorError: see ``Cursor.parse``.
    """
    return Cursor.parse(raw, max_score=MAX_MILLISECONDS * 1000, min_member=1)


def notification_cursor(raw: str | None) -> Cursor | None:
    """The cursor of the notifications page (scores in microseconds, members group ids).

    :raises InvalidCursorError: see ``Cursor.parse``.
    """
    return Cursor.parse(raw, max_score=MAX_MILLISECONDS * 1000, min_member=1)


def sort_key(item: Item) -> tuple[int, bytes]:
    """The total order of items: (score, member as decimal bytes), compared descending."""
    member, score = item
    return score, str(member).encode()


def after_cursor(item: Item, cursor: Cursor) -> bool:
    """Whether ``item`` comes strictly after the cursor position in the order."""
    return sort_key(item) < (cursor.score, str(cursor.member).encode())


def _decode(rows: Sequence[object]) -> list[Item]:
    """``[(member_id, score)]`` of a WITHSCORES reply (each row a ``(member, score)`` pair)."""
    return [(int(row[0]), int(row[1])) for row in rows if isinstance(row, (tuple, list))]


# The page past a cursor of one sorted set or the merge of several, on the server. Each key's
# rows past the cursor are one run of ranks: those scored above the cursor, then its ties (equal
# score, members in byte order, found by bisection, so a tie run of any length costs log2 of it),
# come first. Each key gives a chunk of its head; the merge takes the best head (score, then
# member bytes, descending) and refills an emptied chunk with what the page can still take.
# ``merged_page(keys, limit, score, member)`` returns ``{member, score, ...}``; score "" is the
# first page. Lua's ``<`` on strings follows the server's locale: members compare byte by byte.
PAGE_LUA = """
local function member_less(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

-- A member's place in byte order as an exact number: a decimal id of at most 15 digits read as
-- base 11 (digit d is d + 1, a missing digit 0) stays below 2^53; nil for any other member.
-- The merge compares its heads by this number, member_less only where it is nil.
local POWERS

local function byte_order(member)
  local n = #member
  if n > 15 then return nil end
  if not POWERS then
    POWERS = {}
    for i = 0, 15 do POWERS[i] = 11 ^ i end
  end
  local value = 0
  for i = 1, n do
    local digit = string.byte(member, i) - 47
    if digit < 1 or digit > 10 then return nil end
    value = value * 11 + digit
  end
  return value * POWERS[15 - n]
end

local function rank_after(key, score, member)
  local low = redis.call('ZCOUNT', key, '(' .. score, '+inf')
  local high = low + redis.call('ZCOUNT', key, score, score)
  while low < high do
    local middle = math.floor((low + high) / 2)
    if member_less(redis.call('ZREVRANGE', key, middle, middle)[1], member) then
      high = middle
    else
      low = middle + 1
    end
  end
  return low
end

local function merged_page(keys, limit, score, member)
  if limit < 1 then return {} end  -- ZREVRANGE key 0 -1 would be the whole key
  local count = #keys
  local chunk = limit
  if count > 1 then chunk = math.min(limit, math.max(4, math.ceil(2 * limit / count))) end
  local rows, next_rank, at, top, order = {}, {}, {}, {}, {}
  for k = 1, count do
    local start = 0
    if score ~= '' then start = rank_after(keys[k], score, member) end
    rows[k] = redis.call('ZREVRANGE', keys[k], start, start + chunk - 1, 'WITHSCORES')
    next_rank[k], at[k] = start + #rows[k] / 2, 1
    if #rows[k] > 0 then top[k] = tonumber(rows[k][2]) end
  end
  if count == 1 then return rows[1] end
  for k = 1, count do
    if top[k] then order[k] = byte_order(rows[k][1]) end
  end
  local page, taken = {}, 0
  while taken < limit do
    local best
    for k = 1, count do
      local t = top[k]
      if t and (not best or t > top[best]) then
        best = k
      elseif t and t == top[best] then
        -- A tie: the member later in byte order comes first (ZREVRANGE's order).
        local mine, theirs = order[k], order[best]
        if mine and theirs then
          if mine > theirs then best = k end
        elseif member_less(rows[best][at[best]], rows[k][at[k]]) then
          best = k
        end
      end
    end
    if not best then break end
    local list, i = rows[best], at[best]
    taken = taken + 1
    page[2 * taken - 1], page[2 * taken] = list[i], list[i + 1]
    i = i + 2
    if i > #list and #list == 2 * chunk and taken < limit then
      -- A full chunk ran out: the key may hold more; fetch what the page can still take.
      local wanted = limit - taken
      list = redis.call('ZREVRANGE', keys[best], next_rank[best], next_rank[best] + wanted - 1, 'WITHSCORES')
      rows[best], next_rank[best], i = list, next_rank[best] + #list / 2, 1
    end
    at[best] = i
    if i <= #list then
      top[best], order[best] = tonumber(list[i + 1]), byte_order(list[i])
    else
      top[best], order[best] = nil, nil
    end
  end
  return page
end
"""

_PAGE_SCRIPT = PAGE_LUA + "return merged_page(KEYS, tonumber(ARGV[1]), ARGV[2], ARGV[3])"


def page_arguments(cursor: Cursor | None, limit: int) -> list[int | str]:
    """The ``limit, score, member`` arguments of ``PAGE_LUA``'s ``merged_page`` (``""`` for no cursor)."""
    if cursor is None:
        return [int(limit), "", ""]
    return [int(limit), int(cursor.score), int(cursor.member)]


def decode_page(reply: Sequence[bytes]) -> list[Item]:
    """``[(member_id, score)]`` of a ``merged_page`` reply (a flat ``member, score, ...``)."""
    rows = iter(reply)
    return [(int(member), int(score)) for member, score in zip(rows, rows)]


def redis_page(client: redis.Redis, keys: Sequence[str], *, cursor: Cursor | None, limit: int) -> list[Item]:
    """Up to ``limit`` items after ``cursor`` from one sorted set or the merge of its shards, in one
    round trip (on a cluster, one per master holding the keys).

    :returns: ``[(member_id, score)]`` newest first.
    """
    if not is_cluster(client):
        return decode_page(lua(_PAGE_SCRIPT)(keys=list(keys), args=page_arguments(cursor, limit), client=client))
    pipe = pipeline(client)
    decode = queue_redis_page(pipe, keys, cursor=cursor, limit=limit)
    return decode(pipe.execute())


def queue_redis_page(
    pipe: Pipe, keys: Sequence[str], *, cursor: Cursor | None, limit: int
) -> Callable[[Sequence[Any]], list[Item]]:
    """Queue ``redis_page``'s reads on ``pipe``: one script per key (a cluster's keys may live on
    several masters), merged here.

    :returns: a function taking the replies of exactly these commands (queue order) and
        returning the page as ``redis_page`` does.
    """
    arguments = page_arguments(cursor, limit)
    for key in keys:
        queue_eval(pipe, _PAGE_SCRIPT, [key], arguments)

    def decode(replies: Sequence[Any]) -> list[Item]:
        if len(replies) == 1:
            return decode_page(replies[0])
        items = [item for reply in replies for item in decode_page(reply)]
        items.sort(key=sort_key, reverse=True)
        return items[:limit]

    return decode


def _second(score: int) -> datetime:
    return datetime.fromtimestamp(int(score), tz=UTC)


def _within_second(time_field: str, score: int) -> dict[str, datetime]:
    """The filter of the times inside whole second ``score``."""
    start = _second(score)
    if score >= MAX_SECONDS:
        # The last second a datetime holds has no next second to bound it: bound it by its last microsecond.
        return {f"{time_field}__gte": start, f"{time_field}__lte": datetime.max.replace(tzinfo=UTC)}
    return {f"{time_field}__gte": start, f"{time_field}__lt": start + timedelta(seconds=1)}


def db_page(
    queryset: Any,
    *,
    member_field: str,
    cursor: Cursor | None,
    limit: int,
    time_field: str = "created_at",
    score_of: Callable[[datetime], int] = lambda at: int(at.timestamp()),
) -> list[Item]:
    """The same page as ``redis_page`` from a queryset filtered to one owner (the (owner, created_at,
    member) index); runs of equal seconds are re-sorted by member string, the one cut by LIMIT re-read whole.

    :returns: ``[(member_id, score)]`` newest first, at most ``limit``.
    """
    ordered = queryset.order_by(f"-{time_field}", f"-{member_field}")
    fields = (member_field, time_field)
    items: list[Item] = []
    if cursor is not None:
        start = _second(cursor.score)
        ties = ordered.filter(**_within_second(time_field, cursor.score))
        items.extend(
            item for item in ((member, score_of(at)) for member, at in ties.values_list(*fields)) if after_cursor(item, cursor)
        )
        ordered = ordered.filter(**{f"{time_field}__lt": start})
    rows = [(member, score_of(at)) for member, at in ordered.values_list(*fields)[: limit + 1]]
    if len(rows) > limit:
        # The last second's run may be cut by LIMIT: read it whole.
        last = rows[-1][1]
        rows = [row for row in rows if row[1] != last]
        run = ordered.filter(**_within_second(time_field, last))
        rows.extend((member, score_of(at)) for member, at in run.values_list(*fields))
    items.extend(rows)
    items.sort(key=sort_key, reverse=True)
    return items[:limit]


# --- the other way: the page just above a cursor (Mastodon's ``min_id``) -----------------


def before_cursor(item: Item, cursor: Cursor) -> bool:
    """Whether ``item`` comes strictly before (is newer than) the cursor position in the order."""
    return sort_key(item) > (cursor.score, str(cursor.member).encode())


def redis_page_above(client: redis.Redis, keys: Sequence[str], *, cursor: Cursor, limit: int) -> list[Item]:
    """The ``limit`` items just before ``cursor`` (the newer ones closest to it) from one sorted set
    or the merge of its shards, in one round trip.

    :returns: ``[(member_id, score)]`` newest first (the order of ``redis_page``).
    """
    pipe = pipeline(client)
    score = cursor.score
    for key in keys:
        pipe.zrangebyscore(key, score, score, start=0, num=TIE_CHUNK, withscores=True)
        pipe.zrangebyscore(key, f"({score}", "+inf", start=0, num=limit, withscores=True)
    replies = pipe.execute()
    items: list[Item] = []
    for index in range(len(keys)):
        # A run of ties longer than TIE_CHUNK: its newest members are past the chunk read here.
        ties = _decode(replies[2 * index])
        if len(ties) == TIE_CHUNK:
            ties = _decode(client.zrangebyscore(keys[index], score, score, withscores=True))
        items.extend(item for item in ties if before_cursor(item, cursor))
        items.extend(_decode(replies[2 * index + 1]))
    items.sort(key=sort_key)
    return items[:limit][::-1]


def db_page_above(
    queryset: Any,
    *,
    member_field: str,
    cursor: Cursor,
    limit: int,
    time_field: str = "created_at",
    score_of: Callable[[datetime], int] = lambda at: int(at.timestamp()),
) -> list[Item]:
    """The same page as ``redis_page_above``, from a database queryset (as ``db_page``: one owner,
    scores in whole seconds, runs of equal seconds read whole).

    :returns: ``[(member_id, score)]`` newest first, at most ``limit``.
    """
    fields = (member_field, time_field)
    ties = queryset.filter(**_within_second(time_field, cursor.score))
    items = [item for item in ((member, score_of(at)) for member, at in ties.values_list(*fields)) if before_cursor(item, cursor)]
    if cursor.score < MAX_SECONDS:
        newer = queryset.filter(**{f"{time_field}__gte": _second(cursor.score + 1)}).order_by(time_field, member_field)
        rows = [(member, score_of(at)) for member, at in newer.values_list(*fields)[: limit + 1]]
        if len(rows) > limit:
            # The last second's run may be cut by LIMIT: read it whole.
            last = rows[-1][1]
            rows = [row for row in rows if row[1] != last]
            rows.extend(
                (member, score_of(at)) for member, at in newer.filter(**_within_second(time_field, last)).values_list(*fields)
            )
        items.extend(rows)
    items.sort(key=sort_key)
    return items[:limit][::-1]

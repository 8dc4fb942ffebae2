"""Every read of notifications: the unread count (Redis, O(1)) and the grouped page (database).

A line counts and names only what its reader may see now (checked against the database at read
time); the Redis count is a cache of the counter row, written only over an older version
(``counter_publish``). Behaviour: docs/behaviours.md (Notifications).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime

import redis
from django.db.models import Exists, OuterRef, Q, QuerySet

from core.cluster import lua
from core.paging import Cursor
from core.redis import redis_or_database
from social.models import Block
from users.account_rows import value_read_with_session
from users.models import User
from users.selectors import users_by_id

from . import redis_keys
from .models import GROUP_ACTORS, KINDS, Notification, NotificationGroup, UnreadCounter

LABELS = dict(KINDS)


# KEYS: a recipient's counter; ARGV: version, count, lifetime (s), and the mode.
# "newer" (the writers): the value is written only when its version is newer
# than the stored one, so writers that commit in one order and publish in
# another leave the newest count. "repair" (the reconcile): written over the
# same or an older version; a stored version newer than the database's (a
# write that committed since, or garbage) is deleted instead, and the next
# read sets it from the database.
PUBLISH_LUA = """
local stored = redis.call('GET', KEYS[1])
local version = tonumber(ARGV[1])
if stored then
  local seen = tonumber(string.match(stored, '^(%d+):'))
  if ARGV[4] == 'repair' then
    if seen and seen > version then redis.call('DEL', KEYS[1]); return 0 end
  elseif seen and seen >= version then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. ARGV[2], 'EX', ARGV[3])
return 1
"""


def counter_publish(client: redis.Redis, recipient_id: int, version: int, unread: int, *, repair: bool = False) -> bool:
    """Write ``unread`` (at ``version``) to ``recipient_id``'s Redis counter unless a newer version is
    there (``repair``: the reconcile's mode, ``PUBLISH_LUA``).

    :returns: whether it was written.
    :raises: ``REDIS_ERRORS``.
    """
    args = [version, unread, redis_keys.UNREAD_TTL_SECONDS, "repair" if repair else "newer"]
    return bool(lua(PUBLISH_LUA)(keys=[redis_keys.unread_key(recipient_id)], args=args, client=client))


def unread_database(*, user_id: int) -> int:
    """The unread notifications of ``user_id``: its counter row (one primary-key read)."""
    return UnreadCounter.objects.filter(pk=user_id).values_list("unread", flat=True).first() or 0


def unread_count(*, user_id: int) -> int:
    """The unread notifications of ``user_id``, O(1): what the request's session read brought
    (``users.account_rows.read_with_session``), else one GET; while missing, the counter row (then
    stored); the database alone while Redis is down.
    """
    found, value = value_read_with_session(redis_keys.unread_key(user_id))
    if found and (count := redis_keys.unread_count_of(value)) is not None:
        return count

    def from_redis(client: redis.Redis) -> int:
        key = redis_keys.unread_key(user_id)
        found = redis_keys.unread_count_of(client.get(key))
        if found is not None:
            return found
        version, unread = UnreadCounter.objects.filter(pk=user_id).values_list("version", "unread").first() or (0, 0)
        counter_publish(client, user_id, version, unread)
        return unread

    return redis_or_database(from_redis, lambda: unread_database(user_id=user_id), keys=[redis_keys.unread_key(user_id)])


@dataclass(frozen=True)
class GroupLine:
    """One line of the notifications page: ``count`` of ``kind`` on one day, newest ``actors`` first,
    and its ``text`` (forms: docs/behaviours.md, Notifications).
    """

    group_id: int
    kind: str
    count: int
    actors: list[User]
    updated_at: datetime
    unread: bool

    @property
    def text(self) -> str:
        names = [f"@{actor.username}" for actor in self.actors]
        others = self.count - len(names)
        if not names:
            # Every named actor was hidden since (its refresh pending): count, never an empty name.
            who = f"{self.count:,} account{'s' if self.count != 1 else ''}"
        elif others > 0:
            who = f"{', '.join(names)} and {others:,} other{'s' if others != 1 else ''}"
        elif len(names) > 1:
            who = f"{', '.join(names[:-1])} and {names[-1]}"
        else:
            who = names[0]
        return f"{who} {LABELS[self.kind]}"


@dataclass(frozen=True)
class GroupPage:
    """A page of lines newest first; ``next_cursor`` continues after the last (None: the end)."""

    lines: list[GroupLine]
    next_cursor: Cursor | None


def visible(rows: QuerySet[Notification]) -> QuerySet[Notification]:
    """``rows`` that their recipient may see: the actor's account is active and no block stands
    between actor and recipient either way."""
    blocks = Block.objects.filter(
        Q(blocker_id=OuterRef("recipient_id"), blocked_id=OuterRef("actor_id"))
        | Q(blocker_id=OuterRef("actor_id"), blocked_id=OuterRef("recipient_id"))
    )
    return rows.filter(actor__is_active=True).exclude(Exists(blocks))


@dataclass(frozen=True)
class DerivedGroup:
    """What a group's visible rows give: ``count``, the newest ``actor_ids`` (at most
    ``GROUP_ACTORS``), whether one is ``unread``, and the newest row's time (None: no row)."""

    count: int
    actor_ids: list[int]
    unread: bool
    updated_at: datetime | None

    def differs(self, group: NotificationGroup) -> bool:
        """Whether ``group`` holds other figures (its time only when it has rows)."""
        moved = self.updated_at is not None and self.updated_at != group.updated_at
        return (self.count, self.actor_ids, self.unread) != (group.count, list(group.latest_actor_ids), group.unread) or moved


def derive_group(group_id: int) -> DerivedGroup:
    """The figures of group ``group_id`` from its visible rows (index ``notification_group_rows``)."""
    rows = visible(Notification.objects.filter(group_id=group_id))
    newest = list(rows.order_by("-created_at", "-pk").values_list("actor_id", "created_at")[:GROUP_ACTORS])
    if not newest:
        return DerivedGroup(count=0, actor_ids=[], unread=False, updated_at=None)
    return DerivedGroup(
        count=rows.count(),
        actor_ids=[actor for actor, _ in newest],
        unread=rows.filter(read_at__isnull=True).exists(),
        updated_at=newest[0][1],
    )


def blocked_ids_database(*, user_id: int) -> set[int]:
    """The accounts a block separates from ``user_id``, either way, from the database (O(blocks))."""
    pairs = Block.objects.filter(Q(blocker_id=user_id) | Q(blocked_id=user_id)).values_list("blocker_id", "blocked_id")
    return {other for pair in pairs for other in pair if other != user_id}


def groups_page(*, user_id: int, cursor: Cursor | None, limit: int) -> GroupPage:
    """``user_id``'s notification lines, newest first, keyset-paged on ``(updated_at, id)``: three
    queries whatever the counts (a fourth while a block's rows await their refresh). Blocked rows
    and hidden actors are taken off each count; a line left with none is not shown.
    """
    rows = NotificationGroup.objects.filter(recipient_id=user_id, count__gt=0)
    if cursor is not None:
        at = datetime.fromtimestamp(cursor.score / 1_000_000, tz=UTC)
        rows = rows.filter(Q(updated_at__lt=at) | Q(updated_at=at, pk__lt=cursor.member))
    found = list(rows.order_by("-updated_at", "-pk")[: limit + 1])
    shown = found[:limit]
    # The database's blocks, not Redis's: a block that committed is in force on this read.
    hidden = blocked_ids_database(user_id=user_id) if shown else set()
    actors = users_by_id(sorted({actor for group in shown for actor in group.latest_actor_ids if actor not in hidden}))
    blocked_rows: Counter[int] = Counter()
    if hidden:
        blocked_rows.update(
            Notification.objects.filter(group_id__in=[group.pk for group in shown], actor_id__in=sorted(hidden)).values_list(
                "group_id", flat=True
            )
        )
    lines = []
    for group in shown:
        names = [actors[actor] for actor in group.latest_actor_ids if actor in actors]
        gone = sum(1 for actor in group.latest_actor_ids if actor not in actors and actor not in hidden)
        count = max(group.count - blocked_rows[group.pk] - gone, len(names))
        if count == 0:
            continue
        lines.append(
            GroupLine(
                group_id=group.pk, kind=group.kind, count=count, actors=names, updated_at=group.updated_at, unread=group.unread
            )
        )
    last = shown[-1] if shown else None
    more = len(found) > limit and last is not None
    next_cursor = (
        Cursor(score=int(last.updated_at.timestamp() * 1_000_000), member=last.pk) if more and last is not None else None
    )
    return GroupPage(lines=lines, next_cursor=next_cursor)

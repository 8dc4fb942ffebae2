"""Every read of notifications: the unread count (Redis, O(1)) and the grouped page (database).

The unread count's Redis mirror is a cache of the database's counter row: a
read that finds it missing sets it, and the writers' outbox entries set it
after their commits, each only over an older version (``counter_publish``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from datetime import timezone as dt_timezone

import redis
from django.db.models import Q

from core.cluster import lua
from core.paging import Cursor
from core.redis import redis_or_database
from social.visibility import hidden_ids
from users.models import User
from users.selectors import users_by_id

from . import redis_keys
from .models import KINDS, NotificationGroup, UnreadCounter

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
    """Write ``unread`` (at ``version``) to ``recipient_id``'s counter in Redis unless a newer
    version is there (``repair``: the reconcile's mode, see ``PUBLISH_LUA``).

    :returns: whether it was written.
    :raises: ``REDIS_ERRORS``.
    """
    args = [version, unread, redis_keys.UNREAD_TTL_SECONDS, "repair" if repair else "newer"]
    return bool(lua(PUBLISH_LUA)(keys=[redis_keys.unread_key(recipient_id)], args=args, client=client))


def unread_database(*, user_id: int) -> int:
    """The unread notifications of ``user_id``: its counter row (one primary-key read)."""
    return UnreadCounter.objects.filter(pk=user_id).values_list("unread", flat=True).first() or 0


def unread_count(*, user_id: int) -> int:
    """The unread notifications of ``user_id``: one GET; while the counter is missing, the
    database's counter row (one primary-key read, then stored for the next read unless a newer
    version got there first), and the database alone while Redis is down. O(1) either way."""

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
    """One line of the notifications page: ``count`` notifications of ``kind`` on one day, the
    newest ``actors`` first, ``text`` as shown ("B, C and 41 others followed you")."""

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
        if others > 0:
            who = f"{', '.join(names)} and {others:,} other{'s' if others != 1 else ''}"
        elif len(names) > 1:
            who = f"{', '.join(names[:-1])} and {names[-1]}"
        else:
            who = names[0] if names else "Someone"
        return f"{who} {LABELS[self.kind]}"


@dataclass(frozen=True)
class GroupPage:
    """A page of lines newest first; ``next_cursor`` continues after the last (None: the end)."""

    lines: list[GroupLine]
    next_cursor: Cursor | None


def groups_page(*, user_id: int, cursor: Cursor | None, limit: int) -> GroupPage:
    """``user_id``'s notification lines, newest first, keyset-paged on ``(updated_at, id)``: one
    query for the groups and one for their actors, whatever a group's count."""
    rows = NotificationGroup.objects.filter(recipient_id=user_id, count__gt=0)
    if cursor is not None:
        at = datetime.fromtimestamp(cursor.score / 1_000_000, tz=dt_timezone.utc)
        rows = rows.filter(Q(updated_at__lt=at) | Q(updated_at=at, pk__lt=cursor.member))
    found = list(rows.order_by("-updated_at", "-pk")[: limit + 1])
    shown = found[:limit]
    # Accounts a block separates from the reader since are not named.
    hidden = hidden_ids(viewer_id=user_id)
    actors = users_by_id(sorted({actor for group in shown for actor in group.latest_actor_ids if actor not in hidden}))
    lines = [
        GroupLine(
            group_id=group.pk,
            kind=group.kind,
            count=group.count,
            actors=[actors[actor] for actor in group.latest_actor_ids if actor in actors],
            updated_at=group.updated_at,
            unread=group.unread,
        )
        for group in shown
    ]
    last = shown[-1] if shown else None
    more = len(found) > limit and last is not None
    next_cursor = Cursor(score=int(last.updated_at.timestamp() * 1_000_000), member=last.pk) if more and last is not None else None
    return GroupPage(lines=lines, next_cursor=next_cursor)

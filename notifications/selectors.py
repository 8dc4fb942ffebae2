"""Every read of notifications: the unread count (Redis, O(1)) and the grouped page (database)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from datetime import timezone as dt_timezone

import redis
from django.db.models import Q

from core.paging import Cursor
from core.redis import redis_or_database
from social.visibility import hidden_ids
from users.models import User
from users.selectors import users_by_id

from . import redis_keys
from .models import KINDS, Notification, NotificationGroup

LABELS = dict(KINDS)


def unread_database(*, user_id: int) -> int:
    """The unread notifications of ``user_id``, counted in the database."""
    return Notification.objects.filter(recipient_id=user_id, read_at__isnull=True).count()


def unread_count(*, user_id: int) -> int:
    """The unread notifications of ``user_id``: one GET; counted in the database (and stored for
    the next read) when the counter is missing, and while Redis is down."""

    def from_redis(client: redis.Redis) -> int:
        key = redis_keys.unread_key(user_id)
        value = client.get(key)
        if value is not None:
            return max(0, int(value))
        counted = unread_database(user_id=user_id)
        # NX: an increment that created nothing meanwhile is not overwritten by an older count.
        client.set(key, counted, ex=redis_keys.UNREAD_TTL_SECONDS, nx=True)
        return counted

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

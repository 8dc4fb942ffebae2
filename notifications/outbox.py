"""The notification kinds of the outbox (``notifications.follow``, ``.request``, ``.approved``,
``.pair``, ``.refresh``, ``.actor``, ``.purge``) and their handlers, applied after
commit with the change's other entries; each re-reads the database.
Kinds: docs/architecture.md#the-outbox-and-its-kinds.
"""

from __future__ import annotations

from collections.abc import Sequence

from core import outbox
from core.models import OutboxEntry
from core.redis import get_redis

from . import redis_keys
from .models import APPROVED, FOLLOW, REQUEST
from .services import actor_refresh, notification_add, pair_refresh, recipient_refresh


def _handler(kind: str) -> outbox.Handler:
    def apply(entries: Sequence[OutboxEntry]) -> None:
        for entry in entries:
            if entry.object_id is not None:
                notification_add(kind, recipient_id=entry.subject_id, actor_id=entry.object_id)

    return apply


def _purge(entries: Sequence[OutboxEntry]) -> None:
    ids = sorted({entry.subject_id for entry in entries})
    get_redis().unlink(*[redis_keys.unread_key(user_id) for user_id in ids])


def _pairs(entries: Sequence[OutboxEntry]) -> None:
    for user_id, other_id in sorted({(entry.subject_id, entry.object_id) for entry in entries if entry.object_id is not None}):
        pair_refresh(user_id=user_id, other_id=other_id)


def _refresh(entries: Sequence[OutboxEntry]) -> None:
    groups: dict[int, set[int]] = {}
    for entry in entries:
        groups.setdefault(entry.subject_id, set()).update([entry.object_id] if entry.object_id is not None else [])
    for recipient_id, group_ids in sorted(groups.items()):
        recipient_refresh(recipient_id=recipient_id, group_ids=sorted(group_ids))


def _actors(entries: Sequence[OutboxEntry]) -> None:
    for actor_id in sorted({entry.subject_id for entry in entries}):
        actor_refresh(actor_id=actor_id)


# A deleted account's counter goes after commit (its rows go with the account).
PURGE = outbox.register("notifications.purge", apply=_purge, inline=True, stage=2)

# Stage 2: after the graph's (0) and the feed's entries of the same change.
FOLLOWED = outbox.register("notifications.follow", apply=_handler(FOLLOW), stage=2)
REQUESTED = outbox.register("notifications.request", apply=_handler(REQUEST), stage=2)
APPROVED_KIND = outbox.register("notifications.approved", apply=_handler(APPROVED), stage=2)

# Inline: the blocked account's name leaves the other's lines and count in the
# request that blocked (the page checks blocks at read time meanwhile).
PAIR = outbox.register("notifications.pair", apply=_pairs, inline=True, stage=2)
# Not inline by default: a deleted or deactivated account with many followers
# touches many recipients; the receivers choose inline for small ones.
REFRESH = outbox.register("notifications.refresh", apply=_refresh, stage=2)
ACTOR = outbox.register("notifications.actor", apply=_actors, stage=2)

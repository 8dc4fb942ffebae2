"""The notification kinds of the outbox: written by the job of the change, after commit.

- ``notifications.follow``: ``object_id`` followed ``subject_id``
- ``notifications.request``: ``object_id`` asked to follow ``subject_id``
- ``notifications.approved``: ``object_id`` approved ``subject_id``'s request
- ``notifications.purge``: account ``subject_id`` was deleted: its counter goes

Sent to the Celery task with the change's other entries (one message), so
a follow's request path pays nothing for its notification; each handler
checks the change still stands (``services.notification_add``).
"""

from __future__ import annotations

from collections.abc import Sequence

from core import outbox
from core.models import OutboxEntry
from core.redis import get_redis

from . import redis_keys
from .models import APPROVED, FOLLOW, REQUEST
from .services import notification_add


def _handler(kind: str) -> outbox.Handler:
    def apply(entries: Sequence[OutboxEntry]) -> None:
        for entry in entries:
            if entry.object_id is not None:
                notification_add(kind, recipient_id=entry.subject_id, actor_id=entry.object_id)

    return apply


def _purge(entries: Sequence[OutboxEntry]) -> None:
    ids = sorted({entry.subject_id for entry in entries})
    get_redis().unlink(*[redis_keys.unread_key(user_id) for user_id in ids])


# A deleted account's counter goes after commit (its rows go with the account).
PURGE = outbox.register("notifications.purge", apply=_purge, inline=True, stage=2)

# Stage 2: after the graph's (0) and the feed's entries of the same change.
FOLLOWED = outbox.register("notifications.follow", apply=_handler(FOLLOW), stage=2)
REQUESTED = outbox.register("notifications.request", apply=_handler(REQUEST), stage=2)
APPROVED_KIND = outbox.register("notifications.approved", apply=_handler(APPROVED), stage=2)

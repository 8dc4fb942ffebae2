"""The notification kinds of the outbox: written by the job of the change, after commit.

- ``notifications.follow``: ``object_id`` followed ``subject_id``
- ``notifications.request``: ``object_id`` asked to follow ``subject_id``
- ``notifications.approved``: ``object_id`` approved ``subject_id``'s request

Sent to the Celery task with the change's other entries (one message), so
a follow's request path pays nothing for its notification; each handler
checks the change still stands (``services.notification_add``).
"""

from __future__ import annotations

from collections.abc import Sequence

from core import outbox
from core.models import OutboxEntry

from .models import APPROVED, FOLLOW, REQUEST
from .services import notification_add


def _handler(kind: str) -> outbox.Handler:
    def apply(entries: Sequence[OutboxEntry]) -> None:
        for entry in entries:
            if entry.object_id is not None:
                notification_add(kind, recipient_id=entry.subject_id, actor_id=entry.object_id)

    return apply


# Stage 2: after the graph's (0) and the feed's entries of the same change.
FOLLOWED = outbox.register("notifications.follow", apply=_handler(FOLLOW), stage=2)
REQUESTED = outbox.register("notifications.request", apply=_handler(REQUEST), stage=2)
APPROVED_KIND = outbox.register("notifications.approved", apply=_handler(APPROVED), stage=2)

"""Thin receivers: record a notification's outbox entry inside the transaction of the change."""

from __future__ import annotations

from typing import Any

from core import outbox

from . import outbox as notifications_outbox
from .services import actor_row_count, actor_rows

# An account with at most this many notification rows as actor has its recipients refreshed
# right after commit in the request (a deletion or deactivation from the admin); more go to
# Celery (a request must not recount thousands of counters).
INLINE_ACTOR_ROWS = 200


def on_followed(sender: Any, *, follower_id: int, followee_id: int, **kwargs: Any) -> None:
    outbox.record(notifications_outbox.FOLLOWED, subject_id=followee_id, object_id=follower_id)


def on_follow_requested(sender: Any, *, requester_id: int, target_id: int, **kwargs: Any) -> None:
    outbox.record(notifications_outbox.REQUESTED, subject_id=target_id, object_id=requester_id)


def on_follow_request_ended(sender: Any, *, requester_id: int, target_id: int, **kwargs: Any) -> None:
    outbox.record(notifications_outbox.PAIR, subject_id=target_id, object_id=requester_id)


def on_block_created(sender: Any, *, blocker_id: int, blocked_id: int, **kwargs: Any) -> None:
    outbox.record(notifications_outbox.PAIR, subject_id=blocker_id, object_id=blocked_id)


def on_user_activity_changed(sender: Any, *, user_id: int, is_active: bool, **kwargs: Any) -> None:
    outbox.record(notifications_outbox.ACTOR, subject_id=user_id, inline=actor_row_count(actor_id=user_id) <= INLINE_ACTOR_ROWS)


def on_user_deleted(sender: Any, *, instance: Any, **kwargs: Any) -> None:
    # pre_delete: the rows naming the account are still there to say which groups lose them.
    outbox.record(notifications_outbox.PURGE, subject_id=instance.pk)
    pairs = actor_rows(actor_id=instance.pk)
    if len(pairs) <= INLINE_ACTOR_ROWS:
        for recipient_id, group_id in pairs:
            outbox.record(notifications_outbox.REFRESH, subject_id=recipient_id, object_id=group_id, inline=True)
    else:
        outbox.record_many(notifications_outbox.REFRESH, pairs)


def on_request_approved(sender: Any, *, requester_id: int, target_id: int, **kwargs: Any) -> None:
    outbox.record(notifications_outbox.APPROVED_KIND, subject_id=requester_id, object_id=target_id)

"""Thin receivers: record a notification's outbox entry inside the transaction of the change."""

from __future__ import annotations

from typing import Any

from core import outbox

from . import outbox as notifications_outbox


def on_followed(sender: Any, *, follower_id: int, followee_id: int, **kwargs: Any) -> None:
    outbox.record(notifications_outbox.FOLLOWED, subject_id=followee_id, object_id=follower_id)


def on_follow_requested(sender: Any, *, requester_id: int, target_id: int, **kwargs: Any) -> None:
    outbox.record(notifications_outbox.REQUESTED, subject_id=target_id, object_id=requester_id)


def on_user_deleted(sender: Any, *, instance: Any, **kwargs: Any) -> None:
    outbox.record(notifications_outbox.PURGE, subject_id=instance.pk)


def on_request_approved(sender: Any, *, requester_id: int, target_id: int, **kwargs: Any) -> None:
    outbox.record(notifications_outbox.APPROVED_KIND, subject_id=requester_id, object_id=target_id)

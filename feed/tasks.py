"""Celery tasks of the feed: thin, take ids, call one service.

All are ``acks_late`` (the message is acknowledged after the task ran, so a
worker killed mid-task leaves it to be redelivered; the services are
idempotent) and retry Redis errors with exponential backoff (1 s doubling up
to 10 minutes, 10 times: about an hour). A fan-out that still failed is
delivered by ``feed_fan_out_pending`` (beat).
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from social.redis_client import REDIS_ERRORS

from . import services
from .rebuild import inbox_rebuild

RETRY = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "autoretry_for": REDIS_ERRORS,
    "retry_backoff": True,
    "retry_backoff_max": 600,
    "max_retries": 10,
}


@shared_task(**RETRY)
def feed_note_fan_out(*, note_id: int) -> dict[str, Any]:
    """Fan out note ``note_id`` (``services.note_fan_out``); queued on commit by ``note_create``."""
    result = services.note_fan_out(note_id=note_id)
    return {"mode": result.mode, "followers": result.followers, "inbox_writes": result.inbox_writes}


@shared_task(**RETRY)
def feed_note_retract(*, note_id: int, author_id: int | None = None) -> int:
    """Remove a hidden or deleted note from every feed (``services.note_retract``)."""
    return services.note_retract(note_id=note_id, author_id=author_id)


@shared_task(**RETRY)
def feed_inbox_backfill(*, follower_id: int, followee_id: int) -> int:
    """Backfill the followee's notes after a follow (``services.inbox_backfill_followee``)."""
    return services.inbox_backfill_followee(follower_id=follower_id, followee_id=followee_id)


@shared_task(**RETRY)
def feed_inbox_remove_followee(*, follower_id: int, followee_id: int) -> int:
    """Remove the followee's notes after an unfollow (``services.inbox_remove_followee``)."""
    return services.inbox_remove_followee(follower_id=follower_id, followee_id=followee_id)


@shared_task(**RETRY)
def feed_author_refresh(*, author_id: int) -> int:
    """Withdraw or restore an author's notes after (de)activation (``services.author_feed_refresh``)."""
    return services.author_feed_refresh(author_id=author_id)


@shared_task(**RETRY)
def feed_inbox_rebuild(*, user_id: int) -> int:
    """Rebuild a returning reader's inbox (``feed.rebuild.inbox_rebuild``)."""
    return inbox_rebuild(user_id=user_id).entries


@shared_task(acks_late=True)
def feed_fan_out_pending() -> int:
    """Deliver notes whose fan-out never finished (beat, every FEED_PENDING_FAN_OUT_SECONDS)."""
    try:
        return services.fan_out_pending()
    except REDIS_ERRORS:
        return 0  # still down; the next beat tries again

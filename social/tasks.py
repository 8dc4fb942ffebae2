"""Celery tasks of the follow graph: thin, load by id, call one service."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from .mirror import outbox_apply, outbox_drain, outbox_purge
from .models import MirrorOutbox
from .redis_client import REDIS_ERRORS


@shared_task(bind=True, acks_late=True, autoretry_for=REDIS_ERRORS, retry_backoff=True, retry_backoff_max=60, max_retries=None)
def social_outbox_apply(self: Any, *, entry_ids: list[int]) -> int:
    """Apply the given outbox entries (retried with backoff while Redis is down)."""
    entries = list(MirrorOutbox.objects.filter(id__in=entry_ids, applied_at__isnull=True))
    return outbox_apply(entries)


@shared_task(acks_late=True)
def social_outbox_drain() -> int:
    """Apply every pending outbox entry (beat, every SOCIAL_OUTBOX_DRAIN_SECONDS); purge old applied ones."""
    try:
        applied = outbox_drain()
    except REDIS_ERRORS:
        return 0  # still down; the next beat tries again
    outbox_purge()
    return applied


@shared_task(acks_late=True)
def social_cache_reconcile() -> dict[str, int]:
    """Nightly reconcile of the whole mirror against the database (repairs drift)."""
    from .reconcile import reconcile_all

    return reconcile_all(repair=True).as_dict()

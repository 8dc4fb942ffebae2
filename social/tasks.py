"""Celery tasks of the follow graph: thin, load by id, call one service."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from .mirror import outbox_apply
from .models import MirrorOutbox
from .recovery import mirror_rebuild_locked, outbox_drain_pending
from .redis_client import REDIS_ERRORS
from .sharding import followers_layout_migrate


@shared_task(bind=True, acks_late=True, autoretry_for=REDIS_ERRORS, retry_backoff=True, retry_backoff_max=60, max_retries=None)
def social_outbox_apply(self: Any, *, entry_ids: list[int]) -> int:
    """Apply the given outbox entries (retried with backoff while Redis is down)."""
    entries = list(MirrorOutbox.objects.filter(id__in=entry_ids, applied_at__isnull=True))
    return outbox_apply(entries)


@shared_task(acks_late=True)
def social_outbox_drain() -> dict[str, Any]:
    """Apply every pending outbox entry (beat, every SOCIAL_OUTBOX_DRAIN_SECONDS); purge old applied ones.

    Also queues ``social_mirror_rebuild`` when the sentinel key is missing
    (Redis lost its data). Redis being down is not an error: the entries
    stay pending and the next beat tries again.

    :returns: ``DrainResult.as_dict()``.
    """
    return outbox_drain_pending().as_dict()


@shared_task(acks_late=True)
def social_mirror_rebuild() -> dict[str, Any]:
    """Rebuild the whole mirror after Redis lost its data; a no-op while another rebuild holds the lock."""
    return mirror_rebuild_locked()


@shared_task(acks_late=True, autoretry_for=REDIS_ERRORS, retry_backoff=True, retry_backoff_max=60, max_retries=20)
def social_followers_layout_migrate(*, user_id: int) -> dict[str, Any]:
    """Move ``user_id``'s followers between one key and shards as its count asks (``social.sharding``).

    Queued by the mirror when an account crosses a sharding threshold; a
    duplicate or late run finds the lock taken or the layout settled.
    """
    return followers_layout_migrate(user_id=user_id).as_dict()


@shared_task(acks_late=True)
def social_cache_reconcile() -> dict[str, int]:
    """Nightly reconcile of the whole mirror against the database (repairs drift), recorded as a
    ``ReconcileRun``; an interrupted nightly run is resumed from its checkpoint."""
    from .reconcile import reconcile_run

    _, report = reconcile_run(resume=True)
    return report.as_dict()

"""Celery tasks of the outbox, thin: ``outbox_apply`` (sent after commit for task kinds) and
``outbox_drain`` (beat: whatever is still pending, after rebuilding a lost mirror).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import F, QuerySet
from django.db.models.functions import Greatest

from . import outbox
from .celery import task
from .models import OutboxEntry
from .redis import REDIS_ERRORS, redis_available, redis_failed


@task(acks_late=True, reject_on_worker_lost=True)
def outbox_apply(*, entry_ids: list[int]) -> dict[str, int]:
    """Apply the pending entries ``entry_ids``; Redis down is not retried here (the drain applies them).

    ``acks_late`` with ``reject_on_worker_lost``: a worker killed mid-task leaves the message redelivered.

    :returns: ``{"applied": n, "stuck": m}`` (both 0 when Redis is down).
    """
    pending = OutboxEntry.objects.filter(pk__in=entry_ids, applied_at__isnull=True)
    if not redis_available():  # the breaker is open: no waiting for a Redis timeout
        _leave_to_the_drain(pending)
        return {"applied": 0, "stuck": 0}
    try:
        result = outbox.apply_entries(list(pending))
    except REDIS_ERRORS as exc:
        redis_failed(exc)
        _leave_to_the_drain(pending)
        return {"applied": 0, "stuck": 0}
    return {"applied": result.applied, "stuck": result.stuck}


def _leave_to_the_drain(pending: QuerySet[OutboxEntry]) -> None:
    # Counted as attempted: the drain takes them up at once instead of
    # leaving them to this task for OUTBOX_TASK_GRACE_SECONDS.
    pending.update(attempts=Greatest(F("attempts"), 1))


@task(acks_late=True, soft_time_limit=settings.LONG_TASK_TIME_LIMIT, time_limit=settings.LONG_TASK_TIME_LIMIT + 60)
def outbox_drain() -> dict[str, Any]:
    """Apply every pending outbox entry (beat, every SOCIAL_OUTBOX_DRAIN_SECONDS), rebuilding a lost
    mirror first; purge old applied ones. Redis down is not an error.

    :returns: ``DrainResult.as_dict()``.
    """
    return outbox.drain().as_dict()

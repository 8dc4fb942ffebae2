"""Celery tasks of the feed: thin, call one mechanism.

The feed's delivery jobs are outbox entries (``feed.outbox``), applied by
``core.tasks.outbox_apply``; this module holds the periodic work.
"""

from __future__ import annotations

from django.conf import settings

from core.celery import task

from .reconcile import note_counts_drift, reconcile_inboxes_run


@task(acks_late=True, soft_time_limit=settings.LONG_TASK_TIME_LIMIT, time_limit=settings.LONG_TASK_TIME_LIMIT + 60)
def feed_inboxes_reconcile() -> dict[str, int]:
    """Nightly reconcile of every active reader's inbox against the database (repairs drift),
    recorded as an ``InboxReconcileRun``; an interrupted nightly run is resumed from its checkpoint.

    :returns: ``InboxReport.as_dict()``.
    """
    _, report = reconcile_inboxes_run(resume=True)
    return report.as_dict()


@task(acks_late=True, soft_time_limit=settings.LONG_TASK_TIME_LIMIT, time_limit=settings.LONG_TASK_TIME_LIMIT + 60)
def feed_note_counts_reconcile() -> int:
    """Nightly reconcile of the authors' note counts (``feed.reconcile.note_counts_drift``).

    :returns: the rows that had drifted (deleted: reads count the notes again).
    """
    return note_counts_drift(repair=True)

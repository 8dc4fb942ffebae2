"""Celery tasks of notifications: thin."""

from __future__ import annotations

from django.conf import settings

from core.celery import task

from .services import unread_reconcile


@task(acks_late=True, soft_time_limit=settings.LONG_TASK_TIME_LIMIT, time_limit=settings.LONG_TASK_TIME_LIMIT + 60)
def notifications_unread_reconcile() -> int:
    """Nightly: repair the unread counters from the database.

    :returns: how many counters were repaired.
    """
    return unread_reconcile()

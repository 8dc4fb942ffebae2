"""Celery tasks of notifications: thin."""

from __future__ import annotations

from django.conf import settings

from core.celery import task

from .models import RECONCILE_FIGURES as FIGURES
from .services import notifications_reconcile_recorded


@task(acks_late=True, soft_time_limit=settings.LONG_TASK_TIME_LIMIT, time_limit=settings.LONG_TASK_TIME_LIMIT + 60)
def notifications_unread_reconcile() -> dict[str, int]:
    """Nightly: ``reconcile_notifications`` (rows, groups, counters and their Redis mirror),
    recorded for the admin's health page.

    :returns: the drift figures (``found``/``fixed`` of rows, groups, counters, mirrors).
    """
    run = notifications_reconcile_recorded()
    return {name: int(getattr(run, name)) for name in FIGURES}

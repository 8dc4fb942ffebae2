"""Celery tasks of the follow graph: thin, load by id, call one mechanism.

The outbox's own tasks (apply, drain, rebuild after data loss) are in
``core.tasks``.
"""

from __future__ import annotations

from django.conf import settings

from core.celery import task

from .controls import mutes_expire
from .reconcile import reconcile_run
from .suggestions import suggestions_reconcile_run, suggestions_refresh_active
from .transfer import imports_drift


@task(acks_late=True, soft_time_limit=settings.LONG_TASK_TIME_LIMIT, time_limit=settings.LONG_TASK_TIME_LIMIT + 60)
def social_cache_reconcile() -> dict[str, int]:
    """Nightly reconcile of the whole follow mirror against the database (repairs drift), recorded as
    a ``ReconcileRun``; an interrupted nightly run is resumed from its checkpoint.

    :returns: ``ReconcileReport.as_dict()``.
    """
    _, report = reconcile_run(resume=True)
    return report.as_dict()


@task(acks_late=True)
def social_mutes_expire() -> int:
    """Beat, every ``MUTE_EXPIRY_SECONDS``: delete expired mutes, drop them from Redis (reads ignore
    them already) and bring the muted authors' notes back into the inboxes.

    :returns: how many mutes were deleted.
    """
    return mutes_expire()


@task(acks_late=True, soft_time_limit=settings.LONG_TASK_TIME_LIMIT, time_limit=settings.LONG_TASK_TIME_LIMIT + 60)
def social_suggestions_refresh_active() -> int:
    """Recompute the suggestions of every reader seen within ``FEED_ACTIVE_DAYS`` (run by hand, e.g.
    after a change of the ranking; the nightly work is ``social_suggestions_reconcile``), going on
    from where an interrupted run stopped.

    :returns: how many readers were refreshed.
    """
    return suggestions_refresh_active(resume=True)


@task(acks_late=True, soft_time_limit=settings.LONG_TASK_TIME_LIMIT, time_limit=settings.LONG_TASK_TIME_LIMIT + 60)
def social_suggestions_reconcile() -> dict[str, int]:
    """Nightly: compare every stored who-to-follow set and reason, and the cached most-followed
    rankings, with a rebuild from the database and repair drift (renewing the sets that did
    not drift), recorded as a ``SuggestionReconcileRun``.

    :returns: ``SuggestionsDrift.as_dict()``.
    """
    _, drift = suggestions_reconcile_run()
    return drift.as_dict()


@task(acks_late=True)
def social_imports_reconcile() -> int:
    """Nightly: an unfinished import of an active account with no pending entry gets its entry again.

    :returns: how many imports were stalled.
    """
    return imports_drift(repair=True)

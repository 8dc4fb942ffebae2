"""Celery tasks of the follow graph: thin, load by id, call one mechanism (the outbox's are ``core.tasks``)."""

from __future__ import annotations

from django.conf import settings

from core.celery import task

from .controls import mutes_expire
from .reconcile import profile_samples_drift, reconcile_run
from .suggestions import suggestions_reconcile_run, suggestions_refresh_active
from .transfer import imports_drift


@task(acks_late=True, soft_time_limit=settings.LONG_TASK_TIME_LIMIT, time_limit=settings.LONG_TASK_TIME_LIMIT + 60)
def social_cache_reconcile() -> dict[str, int]:
    """Nightly reconcile of the whole follow mirror (repairs drift), recorded as a ``ReconcileRun``;
    resumes an interrupted nightly run.

    :returns: ``ReconcileReport.as_dict()``.
    """
    _, report = reconcile_run(resume=True)
    return report.as_dict()


@task(acks_late=True)
def social_mutes_expire() -> int:
    """Beat, every ``MUTE_EXPIRY_SECONDS``: delete expired mutes and make Redis and the inboxes agree.

    :returns: how many mutes were deleted.
    """
    return mutes_expire()


@task(acks_late=True, soft_time_limit=settings.LONG_TASK_TIME_LIMIT, time_limit=settings.LONG_TASK_TIME_LIMIT + 60)
def social_suggestions_refresh_active() -> int:
    """Recompute the suggestions of every reader seen within ``FEED_ACTIVE_DAYS`` (by hand; resumes).

    :returns: how many readers were refreshed.
    """
    return suggestions_refresh_active(resume=True)


@task(acks_late=True, soft_time_limit=settings.LONG_TASK_TIME_LIMIT, time_limit=settings.LONG_TASK_TIME_LIMIT + 60)
def social_suggestions_reconcile() -> dict[str, int]:
    """Nightly ``suggestions_reconcile``, recorded as a ``SuggestionReconcileRun``.

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


@task(acks_late=True)
def social_profile_samples_reconcile() -> int:
    """Nightly: the profile samples kept in Redis against the sets they were derived from (repairs).

    :returns: how many kept samples differed.
    """
    return profile_samples_drift(repair=True)

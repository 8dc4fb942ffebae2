"""The follow graph's sections of the admin's health page: the last whole-graph reconcile, and the last reconcile of who to follow and the rankings."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .models import ReconcileRun, SuggestionReconcileRun


@dataclass
class ReconcileHealth:
    """The newest whole-graph ``social.ReconcileRun``: ``state`` (``finished``, ``failed`` with ``error``,
    ``running or interrupted``), ``figures`` ``[(name, value)]``, ``last_finished_at``.
    """

    started_at: datetime | None = None
    finished_at: datetime | None = None
    last_finished_at: datetime | None = None
    state: str = ""
    error: str = ""
    figures: list[tuple[str, Any]] = field(default_factory=list)
    note: str = ""


RECONCILE_FIGURES = (
    "dry_run",
    "check_level",
    "sample",
    "users_checked",
    "users_drifted",
    "edges_checked",
    "edges_missing",
    "edges_extra",
    "scores_wrong",
    "pairs_repaired",
    "controls_drifted",
    "controls_repaired",
    "last_user_id",
)


def reconcile_health() -> ReconcileHealth:
    """The newest whole-graph ``ReconcileRun`` and its figures (two indexed queries; single-account runs left out)."""
    runs = ReconcileRun.objects.filter(only_user_id__isnull=True)
    run = runs.order_by("-started_at", "-id").first()
    if run is None:
        return ReconcileHealth(note="no reconcile of the whole graph has run yet")
    last_finished = (
        runs.filter(finished_at__isnull=False).order_by("-started_at", "-id").values_list("finished_at", flat=True).first()
    )
    if run.finished_at:
        state = "finished"
    elif run.error:
        state = "failed"
    else:
        state = "running or interrupted"
    return ReconcileHealth(
        started_at=run.started_at,
        finished_at=run.finished_at,
        last_finished_at=last_finished,
        state=state,
        error=run.error,
        figures=[(name, getattr(run, name)) for name in RECONCILE_FIGURES],
    )


SUGGESTION_FIGURES = (
    "dry_run",
    "readers_checked",
    "readers_drifted",
    "readers_fixed",
    "rankings_checked",
    "rankings_drifted",
    "rankings_fixed",
    "last_user_id",
)


def suggestions_reconcile_health() -> ReconcileHealth:
    """The newest ``SuggestionReconcileRun`` (who to follow and the rankings) and its drift figures."""
    run = SuggestionReconcileRun.objects.order_by("-started_at", "-id").first()
    if run is None:
        return ReconcileHealth(note="no reconcile of who to follow has run yet")
    last_finished = (
        SuggestionReconcileRun.objects.filter(finished_at__isnull=False)
        .order_by("-started_at", "-id")
        .values_list("finished_at", flat=True)
        .first()
    )
    state = "finished" if run.finished_at else "failed" if run.error else "running or interrupted"
    return ReconcileHealth(
        started_at=run.started_at,
        finished_at=run.finished_at,
        last_finished_at=last_finished,
        state=state,
        error=run.error,
        figures=[(name, getattr(run, name)) for name in SUGGESTION_FIGURES],
    )

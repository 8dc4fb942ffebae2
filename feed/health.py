"""The feed's section of the admin's health page: the last whole inbox reconcile."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from .models import InboxReconcileRun
from .reconcile import FIGURES


@dataclass
class InboxReconcileHealth:
    """The newest whole inbox reconcile (``feed.InboxReconcileRun``): its ``state`` (``finished``,
    ``failed`` or ``running or interrupted``), times and ``figures`` (``[(name, value)]``)."""

    started_at: datetime | None = None
    finished_at: datetime | None = None
    state: str = ""
    error: str = ""
    figures: list[tuple[str, int | float | bool]] = field(default_factory=list)
    note: str = ""


def inbox_reconcile_health() -> InboxReconcileHealth:
    """The newest whole-run ``InboxReconcileRun`` (single-reader runs left out), one indexed query."""
    run = InboxReconcileRun.objects.filter(only_user_id__isnull=True).order_by("-started_at", "-id").first()
    if run is None:
        return InboxReconcileHealth(note="no reconcile of the inboxes has run yet")
    state = "finished" if run.finished_at else "failed" if run.error else "running or interrupted"
    figures: list[tuple[str, int | float | bool]] = [("dry_run", run.dry_run), ("sample", run.sample)]
    figures += [(name, getattr(run, name)) for name in FIGURES]
    return InboxReconcileHealth(
        started_at=run.started_at, finished_at=run.finished_at, state=state, error=run.error, figures=figures
    )

"""The notifications' section of the admin's health page: the last ``reconcile_notifications``."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from .models import RECONCILE_FIGURES as FIGURES
from .models import NotificationsReconcileRun


@dataclass
class NotificationsReconcileHealth:
    """The newest ``NotificationsReconcileRun``: its ``state`` (``finished``, ``failed`` or
    ``running or interrupted``), times and ``figures`` (``[(name, value)]``)."""

    started_at: datetime | None = None
    finished_at: datetime | None = None
    state: str = ""
    error: str = ""
    figures: list[tuple[str, int | bool]] = field(default_factory=list)
    note: str = ""


def notifications_reconcile_health() -> NotificationsReconcileHealth:
    """The newest run and its drift figures (one indexed query)."""
    run = NotificationsReconcileRun.objects.order_by("-started_at", "-id").first()
    if run is None:
        return NotificationsReconcileHealth(note="no reconcile of the notifications has run yet")
    state = "finished" if run.finished_at else "failed" if run.error else "running or interrupted"
    figures: list[tuple[str, int | bool]] = [("dry_run", run.dry_run)]
    figures += [(name, int(getattr(run, name))) for name in FIGURES]
    return NotificationsReconcileHealth(
        started_at=run.started_at, finished_at=run.finished_at, state=state, error=run.error, figures=figures
    )

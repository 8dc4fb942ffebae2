"""A long walk over accounts recorded as a row (``ReconcileRun``, ``InboxReconcileRun``): checkpointed
after every batch, resumable; ``recorded_run`` does the bookkeeping for either.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from django.db import models
from django.utils import timezone

from .redis import REDIS_ERRORS


class Report(Protocol):
    """A walk's running figures: ``as_dict()`` holds every counter and ``last_user_id``."""

    last_user_id: int

    def as_dict(self) -> dict[str, int]: ...


RunT = TypeVar("RunT", bound=models.Model)
ReportT = TypeVar("ReportT", bound=Report)


def recorded_run(
    model: type[RunT],
    figures: Sequence[str],
    walk: Callable[[int, Callable[[ReportT], None]], ReportT],
    *,
    dry_run: bool,
    user_id: int | None,
    start_after: int | None,
    resume: bool,
    fields: dict[str, Any],
) -> tuple[RunT, ReportT]:
    """Run ``walk`` and record it as a row of ``model``.

    :param figures: the counters of ``model``, named as in the report's ``as_dict()``.
    :param walk: ``walk(start_after, on_batch)`` does the work from that id and
        calls ``on_batch(report)`` after every batch; returns the final report.
    :param resume: continue the latest unfinished whole run (no ``user_id``)
        of the same ``dry_run`` from its checkpoint, adding to its figures.
    :param start_after: walk ids above this one (overrides the checkpoint).
    :param fields: the other columns of a new row (``sample``, ``check_level``).
    :returns: ``(run, report)``; ``run.finished_at`` is set on success.
    :raises: Redis errors (``REDIS_ERRORS``) from ``walk``, after the row kept the
        error text and its checkpoint; any other error of ``walk`` as it is.
    """
    manager = model._default_manager
    run: RunT | None = None
    if resume and user_id is None:
        run = (
            manager.filter(finished_at__isnull=True, only_user_id__isnull=True, dry_run=dry_run)
            .order_by("-started_at", "-id")
            .first()
        )
    base = dict.fromkeys(figures, 0)
    if run is None:
        run = manager.create(dry_run=dry_run, only_user_id=user_id, **fields)
    else:
        base = {name: getattr(run, name) for name in figures}
    begin = start_after if start_after is not None else int(getattr(run, "last_user_id"))
    row = run

    def checkpoint(report: ReportT) -> None:
        counted = report.as_dict()
        for name, value in base.items():
            setattr(row, name, value + counted[name])
        setattr(row, "last_user_id", report.last_user_id)
        row.save(update_fields=[*figures, "last_user_id"])

    try:
        report = walk(begin, checkpoint)
    except REDIS_ERRORS as exc:
        setattr(row, "error", repr(exc)[:2000])
        row.save(update_fields=["error"])
        raise
    checkpoint(report)
    setattr(row, "finished_at", timezone.now())
    setattr(row, "error", "")
    row.save(update_fields=["finished_at", "error"])
    return row, report

"""Notifications in the admin: the health page's section of ``reconcile_notifications``."""

from __future__ import annotations

from core import health

from .health import notifications_reconcile_health

health.register_section("notifications_reconcile", notifications_reconcile_health)
health.register_reconcile(
    "notifications",
    notifications_reconcile_health,
    drift_figures=("rows_found", "groups_found", "counters_found", "mirrors_found"),
)

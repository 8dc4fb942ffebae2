"""``manage.py reconcile_notifications [--dry-run] [--batch-users N]``: check the notifications'
rows, grouped lines and unread counters (and their Redis mirror) against the database; repair."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from notifications.services import NotificationsDrift, notifications_reconcile_recorded


class Command(BaseCommand):
    help = (
        "Remove notification rows that no longer stand (a block, an ended request), derive every grouped line again "
        "from its visible rows, recount unread counters and rewrite Redis counters that differ (re-runnable)."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--batch-users", type=int, default=2000, help="account ids per batch (default 2000)")
        parser.add_argument("--dry-run", action="store_true", help="report the drift, change nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        batch = int(options["batch_users"])
        if batch < 1:
            raise CommandError("--batch-users must be at least 1")
        run = notifications_reconcile_recorded(dry_run=bool(options["dry_run"]), batch_users=batch)
        figures = NotificationsDrift(**{name: getattr(run, name) for name in NotificationsDrift().as_dict()})
        for name, value in figures.as_dict().items():
            self.stdout.write(f"  {name}: {value}")
        verb = "found (dry run, nothing changed)" if run.dry_run else "repaired"
        repaired = figures.rows_fixed + figures.groups_fixed + figures.counters_fixed + figures.mirrors_fixed
        found = figures.rows_found + figures.groups_found + figures.counters_found + figures.mirrors_found
        self.stdout.write(self.style.SUCCESS(f"{found if run.dry_run else repaired} notification drifts {verb}"))

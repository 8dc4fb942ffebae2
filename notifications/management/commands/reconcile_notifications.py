"""``manage.py reconcile_notifications``: repair the unread counters from the database."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from notifications.services import unread_reconcile


class Command(BaseCommand):
    help = "Set every unread-notifications counter in Redis that differs from the database (re-runnable)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--batch-users", type=int, default=2000, help="account ids per batch (default 2000)")

    def handle(self, *args: Any, **options: Any) -> None:
        batch = int(options["batch_users"])
        if batch < 1:
            from django.core.management.base import CommandError

            raise CommandError("--batch-users must be at least 1")
        walked = 0

        def progress(ids: int, fixes: int) -> None:
            nonlocal walked
            walked += ids
            self.stdout.write(f"  {walked:,} account ids walked, {fixes} counters repaired in this batch")

        repaired = unread_reconcile(batch_users=batch, on_progress=progress)
        self.stdout.write(self.style.SUCCESS(f"{repaired} unread counters repaired"))

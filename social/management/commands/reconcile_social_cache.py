"""manage.py reconcile_social_cache: compare Redis with the database and repair drift."""

from __future__ import annotations

import json
import time
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from social.reconcile import reconcile_all
from social.redis_client import REDIS_ERRORS


class Command(BaseCommand):
    help = (
        "Compare the Redis mirror with the database for every user (or --user N) and repair drift "
        "with the database as the truth; --dry-run only reports. Prints users checked, edges missing, "
        "edges extra, scores wrong and pairs repaired. Resumable with --start-after. "
        "Exit code 0 when no drift was left, 2 when --dry-run found drift, 1 on error."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", type=int, default=None, help="reconcile only this user id")
        parser.add_argument("--dry-run", action="store_true", help="report drift, repair nothing")
        parser.add_argument("--start-after", type=int, default=0, help="resume after this user id")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        started = time.perf_counter()
        total = get_user_model().objects.filter(pk__gt=options["start_after"]).count()
        try:
            with tqdm(total=total, desc="reconcile", unit="user", disable=options["verbosity"] == 0 or options["user"] is not None) as bar:
                report = reconcile_all(
                    repair=not options["dry_run"],
                    user_id=options["user"],
                    start_after=options["start_after"],
                    on_progress=bar.update,
                )
        except REDIS_ERRORS as exc:
            raise CommandError(f"Redis unreachable: {exc}") from exc
        figures = report.as_dict()
        figures["seconds"] = round(time.perf_counter() - started, 3)
        if options["json"]:
            self.stdout.write(json.dumps(figures))
        else:
            self.stdout.write(" ".join(f"{k}={v}" for k, v in figures.items()))
        drift = report.edges_missing + report.edges_extra + report.scores_wrong
        if options["dry_run"] and drift:
            raise SystemExit(2)

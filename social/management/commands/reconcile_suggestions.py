"""manage.py reconcile_suggestions: compare who to follow and the most-followed rankings with a rebuild from the database."""

from __future__ import annotations

import json
import logging
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.exit_codes import EXIT_CODES_HELP, EXIT_DRIFT_FOUND, EXIT_UNAVAILABLE
from core.redis import REDIS_ERRORS
from social.suggestions import suggestions_reconcile_run

logger = logging.getLogger("social.reconcile")


class Command(BaseCommand):
    help = (
        "Compare the stored who-to-follow sets, scores and reasons of every reader seen within "
        "FEED_ACTIVE_DAYS, and the cached most-followed rankings, with a rebuild from the database; "
        "repair drift unless --dry-run. Prints readers checked, drifted and fixed, rankings checked, "
        "drifted and fixed, and records the run (SuggestionReconcileRun, shown on the health page). "
        "Exit code 0: no drift left (none found, or all repaired). " + EXIT_CODES_HELP
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="report drift, repair nothing")
        parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            run, drift = suggestions_reconcile_run(dry_run=options["dry_run"])
        except REDIS_ERRORS as exc:
            raise CommandError(
                f"Redis unreachable: {exc!r}; nothing was lost, re-run later", returncode=EXIT_UNAVAILABLE
            ) from exc
        figures: dict[str, Any] = {"run": run.pk, **drift.as_dict(), "dry_run": run.dry_run}
        if options["json"]:
            self.stdout.write(json.dumps(figures))
        else:
            self.stdout.write(" ".join(f"{key}={value}" for key, value in figures.items()))
        logger.info("reconcile_suggestions %s", figures)
        if options["dry_run"] and (drift.readers_drifted or drift.rankings_drifted):
            raise SystemExit(EXIT_DRIFT_FOUND)

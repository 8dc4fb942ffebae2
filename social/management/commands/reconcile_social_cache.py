"""manage.py reconcile_social_cache: compare the Redis mirror with the database and repair drift."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from core.exit_codes import EXIT_CODES_HELP, EXIT_DRIFT_FOUND, EXIT_UNAVAILABLE
from core.management.arguments import fraction
from core.redis import REDIS_ERRORS
from social.models import ReconcileRun
from social.reconcile import CHECK_DIGEST, CHECKS, reconcile_run
from users.models import User

logger = logging.getLogger("social.reconcile")


class Command(BaseCommand):
    help = (
        "Compare the Redis mirror of the follow graph with the database for every account (or --user N, "
        "or a --sample fraction), in id order and bounded memory, cheap first (counts and a per-account "
        "digest, --check) and member by member only where they differ; each account's block and mute sets "
        "are compared whole. Repairs drift with the database as the truth unless --dry-run. Prints users "
        "checked, edges missing, edges extra, scores wrong, pairs repaired and the block and mute pairs "
        "drifted and repaired, records the run (ReconcileRun) after every batch, and resumes with --resume "
        "(the last interrupted run's checkpoint) or --start-after ID. "
        "Exit code 0: no drift left (none found, or all repaired). " + EXIT_CODES_HELP
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", type=int, default=None, help="reconcile only this user id")
        parser.add_argument(
            "--sample", type=fraction, default=1.0, help="check this fraction (0 < f <= 1) of accounts, chosen at random"
        )
        parser.add_argument("--dry-run", action="store_true", help="report drift, repair nothing")
        parser.add_argument(
            "--check",
            choices=CHECKS,
            default=CHECK_DIGEST,
            help="cheap check before the full diff (default digest; full diffs every account)",
        )
        parser.add_argument("--start-after", type=int, default=None, help="walk user ids above this one")
        parser.add_argument("--resume", action="store_true", help="continue the last interrupted run from its checkpoint")
        parser.add_argument("--batch", type=int, default=1000, help="user ids per batch (default 1000)")
        parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        user_id = options["user"]
        if user_id is not None and not User.objects.filter(pk=user_id).exists():
            raise CommandError(f"no user {user_id}")
        if options["batch"] < 1:
            raise CommandError("--batch must be at least 1")
        started = time.perf_counter()
        begin = options["start_after"]
        if begin is None and options["resume"]:
            last = (
                ReconcileRun.objects.filter(finished_at__isnull=True, only_user_id__isnull=True, dry_run=options["dry_run"])
                .order_by("-started_at", "-id")
                .first()
            )
            begin = last.last_user_id if last else 0
        total = 1 if user_id is not None else User.objects.filter(pk__gt=begin or 0).count()
        quiet = options["verbosity"] == 0 or user_id is not None
        try:
            with tqdm(total=total, desc="reconcile", unit="user", disable=quiet) as bar:
                run, report = reconcile_run(
                    dry_run=options["dry_run"],
                    user_id=user_id,
                    start_after=options["start_after"],
                    resume=options["resume"],
                    check=options["check"],
                    sample=options["sample"],
                    batch_users=options["batch"],
                    on_progress=lambda ids: bar.update(min(ids, bar.total - bar.n)),
                )
        except REDIS_ERRORS as exc:
            raise CommandError(
                f"Redis unreachable: {exc!r}; re-run with --resume to continue", returncode=EXIT_UNAVAILABLE
            ) from exc
        seconds = time.perf_counter() - started
        figures: dict[str, Any] = {
            "run": run.pk,
            "users_checked": run.users_checked,
            "users_drifted": run.users_drifted,
            "edges_checked": run.edges_checked,
            "edges_missing": run.edges_missing,
            "edges_extra": run.edges_extra,
            "scores_wrong": run.scores_wrong,
            "pairs_repaired": run.pairs_repaired,
            "controls_drifted": run.controls_drifted,
            "controls_repaired": run.controls_repaired,
            "last_user_id": run.last_user_id,
            "dry_run": run.dry_run,
            "check": run.check_level,
            "seconds": round(seconds, 3),
            "edges_per_second": round(report.edges_checked / seconds) if seconds else 0,
        }
        if options["json"]:
            self.stdout.write(json.dumps(figures))
        else:
            self.stdout.write(" ".join(f"{key}={value}" for key, value in figures.items()))
        logger.info("reconcile_social_cache %s", figures)
        if options["dry_run"] and (report.drift or report.controls_drifted):
            raise SystemExit(EXIT_DRIFT_FOUND)

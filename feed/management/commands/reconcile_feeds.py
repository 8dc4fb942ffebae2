"""manage.py reconcile_feeds: compare every active reader's inbox with the database's feed and repair it."""

from __future__ import annotations

import json
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from core.exit_codes import EXIT_CODES_HELP, EXIT_DRIFT_FOUND, EXIT_UNAVAILABLE
from core.management.arguments import fraction
from core.redis import REDIS_ERRORS
from feed.delivery import active_cutoff
from feed.reconcile import FIGURES, note_counts_drift, reconcile_inboxes_run
from users.models import User


class Command(BaseCommand):
    help = (
        "Compare the inbox of every active reader whose inbox is maintained (or --user N, or a --sample "
        "fraction) with the newest INBOX_MAX_LEN notes the database computes for it (ids and scores), in "
        "id order, one Redis pipeline and one query per batch. Rebuilds the inboxes that differ unless "
        "--dry-run. Prints readers checked and drifted, notes missing, notes extra, scores wrong and readers "
        "repaired, records the run (InboxReconcileRun) after every batch, resumes with --resume or "
        "--start-after ID. Exit code 0: no drift left. " + EXIT_CODES_HELP
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", type=int, default=None, help="reconcile only this reader's inbox")
        parser.add_argument(
            "--sample", type=fraction, default=1.0, help="check this fraction (0 < f <= 1) of readers, chosen at random"
        )
        parser.add_argument("--dry-run", action="store_true", help="report drift, repair nothing")
        parser.add_argument("--start-after", type=int, default=None, help="walk reader ids above this one")
        parser.add_argument("--resume", action="store_true", help="continue the last interrupted run from its checkpoint")
        parser.add_argument("--batch", type=int, default=500, help="readers per batch (default 500)")
        parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
        parser.add_argument(
            "--note-counts",
            action="store_true",
            help="instead: compare every author's stored note count (Mastodon's statuses_count) with its notes and remake the ones that differ",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        user_id = options["user"]
        if user_id is not None and not User.objects.filter(pk=user_id).exists():
            raise CommandError(f"no user {user_id}")
        if options["batch"] < 1:
            raise CommandError("--batch must be at least 1")
        started = time.perf_counter()
        if options["note_counts"]:
            drifted = note_counts_drift(repair=not options["dry_run"])
            self.stdout.write(
                f"note_counts_drifted={drifted} dry_run={options['dry_run']} seconds={time.perf_counter() - started:.3f}"
            )
            if options["dry_run"] and drifted:
                raise SystemExit(EXIT_DRIFT_FOUND)
            return
        readers = User.objects.filter(is_active=True, last_seen_at__gte=active_cutoff())
        total = 1 if user_id is not None else readers.filter(pk__gt=options["start_after"] or 0).count()
        quiet = options["verbosity"] == 0 or user_id is not None
        try:
            with tqdm(total=total, desc="reconcile inboxes", unit="reader", disable=quiet) as bar:
                run, report = reconcile_inboxes_run(
                    dry_run=options["dry_run"],
                    user_id=user_id,
                    sample=options["sample"],
                    start_after=options["start_after"],
                    resume=options["resume"],
                    batch=options["batch"],
                    on_progress=lambda readers_walked: bar.update(min(readers_walked, bar.total - bar.n)),
                )
        except REDIS_ERRORS as exc:
            raise CommandError(
                f"Redis unreachable: {exc!r}; re-run with --resume to continue", returncode=EXIT_UNAVAILABLE
            ) from exc
        seconds = time.perf_counter() - started
        figures: dict[str, Any] = {"run": run.pk, **{name: getattr(run, name) for name in FIGURES}}
        figures.update(last_user_id=run.last_user_id, dry_run=run.dry_run, seconds=round(seconds, 3))
        figures["readers_per_second"] = round(report.readers_checked / seconds) if seconds else 0
        if options["json"]:
            self.stdout.write(json.dumps(figures))
        else:
            self.stdout.write(" ".join(f"{key}={value}" for key, value in figures.items()))
        if options["dry_run"] and report.drift:
            raise SystemExit(EXIT_DRIFT_FOUND)

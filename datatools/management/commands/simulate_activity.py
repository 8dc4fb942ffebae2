"""manage.py simulate_activity [--notes N] [--if-empty]: replay Higgs posting activity as notes."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from core.exit_codes import EXIT_CODES_HELP, unavailable
from core.redis import REDIS_ERRORS
from datatools import simulate
from datatools.datasets import DatasetError, dataset_path
from feed.rebuild import rebuild_all_inboxes


class Command(BaseCommand):
    help = (
        "Publish notes for the imported accounts by replaying the real timing and skew of the SNAP Higgs "
        "Twitter activity (higgs-activity_time.txt.gz): the most prolific Higgs posters become the most "
        "followed accounts, every k-th row is kept so bursts keep their shape, and times are shifted so the "
        "last note is a minute old. Then the feeds are rebuilt. " + EXIT_CODES_HELP
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--notes",
            type=int,
            default=simulate.DEMO_NOTES,
            help=f"about how many notes to publish (default {simulate.DEMO_NOTES})",
        )
        parser.add_argument("--dataset", default=simulate.HIGGS_ACTIVITY, help="activity file name or path")
        parser.add_argument("--if-empty", action="store_true", help="do nothing when any note exists")
        parser.add_argument("--no-rebuild", action="store_true", help="skip the feed rebuild afterwards")
        parser.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar (also with --verbosity 0)")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["notes"] < 1:
            raise CommandError("--notes must be at least 1.")
        if options["if_empty"] and simulate.has_notes():
            self.stdout.write("Notes exist already; nothing to simulate.")
            return
        try:
            path = dataset_path(options["dataset"])
        except DatasetError as exc:
            raise CommandError(str(exc)) from exc
        started = time.perf_counter()
        accounts = simulate.accounts_by_followers()
        if not accounts:
            raise CommandError("No accounts: import a graph first (import_graph).")
        plan = simulate.plan_replay(path, notes=options["notes"], accounts=accounts, end=simulate.default_end())
        authors = len({row[0] for row in plan.rows})
        self.stdout.write(
            f"{path.name}: {plan.rows_read} rows, {plan.posters} posters; keeping every {plan.step}th row of "
            f"posters with an account: {len(plan.rows)} notes by {authors} accounts, shifted by {plan.shift} s"
        )
        if options["dry_run"]:
            return
        quiet = options["no_progress"] or options["verbosity"] == 0
        with tqdm(total=len(plan.rows), desc="notes", unit="note", disable=quiet) as bar:
            created = simulate.replay(plan, on_progress=bar.update)
        self.stdout.write(f"created {created} notes in {time.perf_counter() - started:.1f}s")
        if not options["no_rebuild"]:
            try:
                stats = rebuild_all_inboxes()
            except REDIS_ERRORS as exc:
                raise unavailable("Redis", exc) from exc
            self.stdout.write(
                f"feeds rebuilt: {stats.outbox_entries} outbox entries, {stats.inboxes} active inboxes "
                f"(others catch up at sign-in) in {time.perf_counter() - started:.1f}s"
            )

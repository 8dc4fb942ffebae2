"""manage.py import_graph PATH: import a SNAP edge list, then rebuild the Redis mirror."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from core.exit_codes import EXIT_CODES_HELP
from datatools.datasets import DatasetError, dataset_path
from datatools.importer import graph_import


class Command(BaseCommand):
    help = (
        "Import a follow graph from a SNAP edge list ('a b' per line = a follows b; '#' comments; .gz ok). "
        "Creates users u<node id>, inserts follows in batches with deterministic times, skips self-loops, "
        "and can be re-run safely (nothing is duplicated). PATH may be a file or a dataset name looked up "
        "in FOLLOWFEED_DATA_DIR (downloaded from SNAP and sha256-checked when absent). " + EXIT_CODES_HELP
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", nargs="?", default=None, help="edge-list file or dataset name (default FOLLOWFEED_DATASET)")
        parser.add_argument("--password", default=None, help="password for every created user (default: none, sign-in disabled)")
        parser.add_argument("--limit", type=int, default=None, help="import only the first N edges")
        parser.add_argument("--no-rebuild", action="store_true", help="skip rebuilding the Redis mirror afterwards")
        parser.add_argument("--dry-run", action="store_true", help="read and count the file, write nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            path = dataset_path(options["path"])
        except DatasetError as exc:
            raise CommandError(str(exc)) from exc
        if options["dry_run"]:
            from datatools.datasets import read_edges

            total = loops = 0
            with tqdm(desc="read edges", unit="edge", disable=options["verbosity"] == 0) as bar:
                for a, b in read_edges(path):
                    if options["limit"] is not None and total >= options["limit"]:
                        break
                    total += 1
                    loops += a == b
                    bar.update()
            self.stdout.write(f"{path}: {total} edges, {loops} self-loops (dry run, nothing written)")
            return
        started = time.perf_counter()
        with tqdm(desc="import follows", unit="edge", disable=options["verbosity"] == 0) as bar:
            try:
                stats = graph_import(
                    path,
                    password=options["password"],
                    limit=options["limit"],
                    on_progress=bar.update,
                    on_stage=bar.set_postfix_str,
                )
            except DatasetError as exc:
                raise CommandError(str(exc)) from exc
        elapsed = time.perf_counter() - started
        rate = (stats.edges_read - stats.self_loops) / elapsed if elapsed else 0.0
        self.stdout.write(
            f"imported {path.name}: {stats.users_created} users created, {stats.edges_read} edges read, "
            f"{stats.self_loops} self-loops skipped, {stats.duplicates} duplicates skipped, "
            f"{stats.edges_inserted} new follows in {elapsed:.1f}s ({rate:,.0f} edges/s)"
        )
        if not options["no_rebuild"]:
            from django.core.management import call_command

            call_command("rebuild_social_cache", verbosity=options["verbosity"], stdout=self.stdout)

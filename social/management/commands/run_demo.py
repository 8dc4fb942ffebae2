"""manage.py run_demo: the site on a real graph with the embedded default (no services)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from social.management.exit_codes import EXIT_CODES_HELP
from social.models import Follow

logger = logging.getLogger(__name__)
DEMO_PASSWORD = "followfeed"


class Command(BaseCommand):
    help = (
        "Serve the demo: migrate, import FOLLOWFEED_DATASET (default soc-Slashdot0902) on first run with "
        f"password '{DEMO_PASSWORD}' for every imported user, warm the Redis mirror in the background "
        "(pages read the database until it is ready), then run the development server without the reloader "
        "so the embedded Redis lives in this one process. --dry-run prints the plan. " + EXIT_CODES_HELP
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", default="8000", help="port to serve on (default 8000)")
        parser.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
        parser.add_argument("--dataset", default=None, help="dataset name or path (default FOLLOWFEED_DATASET)")
        parser.add_argument("--no-serve", action="store_true", help="prepare the data and exit")
        parser.add_argument("--dry-run", action="store_true", help="print what would be migrated and imported, change nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["dry_run"]:
            self._plan(options)
            return
        call_command("migrate", interactive=False, verbosity=0)
        if not Follow.objects.exists():
            self.stdout.write("First run: importing the graph (about a minute on SQLite)...")
            positional = [options["dataset"]] if options["dataset"] else []
            call_command("import_graph", *positional, password=DEMO_PASSWORD, no_rebuild=True, stdout=self.stdout)
        self._after_import(options)
        if settings.REDIS_EMBEDDED:
            threading.Thread(target=self._warm, name="warm-mirror", daemon=True).start()
        if options["no_serve"]:
            return
        self.stdout.write(f"Sign in as any imported user, e.g. u2494, password '{DEMO_PASSWORD}'.")
        call_command("runserver", f"{options['host']}:{options['port']}", use_reloader=False)

    def _after_import(self, options: dict[str, Any]) -> None:
        """Hook for the feed's demo data (notes replayed from the Higgs activity)."""
        try:
            call_command("simulate_activity", "--if-empty", stdout=self.stdout)
        except Exception as exc:  # noqa: BLE001 - the demo still serves the graph
            if "Unknown command" not in str(exc):
                raise

    def _warm(self) -> None:
        from social.rebuild import rebuild_all

        started = time.perf_counter()
        stats = rebuild_all()
        logger.info("embedded Redis warmed: %s edges in %.1fs", stats.edges, time.perf_counter() - started)
        try:
            from feed.rebuild import rebuild_all_inboxes  # type: ignore[import-not-found]

            rebuild_all_inboxes()
        except ImportError:
            pass

    def _plan(self, options: dict[str, Any]) -> None:
        """--dry-run: the pending migrations and whether the graph would be imported."""
        from django.db import connection
        from django.db.migrations.executor import MigrationExecutor

        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
        has_graph = Follow._meta.db_table in connection.introspection.table_names() and Follow.objects.exists()
        dataset = options["dataset"] or settings.FOLLOWFEED_DATASET
        self.stdout.write(f"would apply {len(pending)} migrations")
        self.stdout.write("the graph is imported already" if has_graph else f"would import {dataset}")
        self.stdout.write("would serve" if not options["no_serve"] else "would not serve (--no-serve)")

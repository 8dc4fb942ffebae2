"""manage.py run_demo: the site on a real graph with the embedded default (no services)."""

from __future__ import annotations

import logging
import time
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from core import embedded
from core.exit_codes import EXIT_CODES_HELP
from core.redis import forget_sentinel, get_redis, mirror_ready
from feed.rebuild import rebuild_all_inboxes
from social.models import Follow
from social.rebuild import rebuild_all

logger = logging.getLogger(__name__)
DEMO_PASSWORD = "followfeed"


class Command(BaseCommand):
    help = (
        "Serve the demo: migrate, import FOLLOWFEED_DATASET (default soc-Slashdot0902) on first run with "
        f"password '{DEMO_PASSWORD}' for every imported user, replay the Higgs activity as notes, build the "
        "Redis mirror when the embedded server does not hold it yet (it keeps it across restarts), then run "
        "the development server. --dry-run prints the plan. " + EXIT_CODES_HELP
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
        try:
            self._prepare(options)
            if options["no_serve"]:
                return
            self.stdout.write(f"Sign in as any imported user, e.g. u2494, password '{DEMO_PASSWORD}'.")
            call_command("runserver", f"{options['host']}:{options['port']}", use_reloader=False)
        finally:
            if settings.REDIS_EMBEDDED and embedded.started_here and not options["no_serve"]:
                embedded.EmbeddedRedis(settings.FOLLOWFEED_VAR_DIR).stop()

    def _prepare(self, options: dict[str, Any]) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        imported = False
        if not Follow.objects.exists():
            self.stdout.write("First run: importing the graph...")
            positional = [options["dataset"]] if options["dataset"] else []
            call_command("import_graph", *positional, password=DEMO_PASSWORD, no_rebuild=True, stdout=self.stdout)
            imported = True
        call_command("simulate_activity", "--if-empty", "--no-rebuild", stdout=self.stdout)
        forget_sentinel()
        if imported or not mirror_ready(get_redis()):
            started = time.perf_counter()
            self.stdout.write("Building the Redis mirror (kept across restarts)...")
            stats = rebuild_all()
            rebuild_all_inboxes()
            self.stdout.write(f"Mirror built: {stats.edges:,} follows in {time.perf_counter() - started:.1f} s.")

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

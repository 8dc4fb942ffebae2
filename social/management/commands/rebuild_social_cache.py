"""manage.py rebuild_social_cache [--user N]: rebuild the follow graph's Redis mirror from the database."""

from __future__ import annotations

import time
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from social.rebuild import rebuild_all, rebuild_user
from social.redis_client import REDIS_ERRORS


class Command(BaseCommand):
    help = (
        "Rebuild the Redis sets and sorted sets of the follow graph from the database (the truth). "
        "Keys are built aside and swapped in, so reads keep answering. Safe to interrupt and re-run; "
        "--start-after resumes. Exit code 1 if Redis is unreachable."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", type=int, default=None, help="rebuild only this user id")
        parser.add_argument("--start-after", type=int, default=0, help="resume after this user id")
        parser.add_argument("--batch", type=int, default=2000, help="user ids per batch")

    def handle(self, *args: Any, **options: Any) -> None:
        started = time.perf_counter()
        try:
            if options["user"] is not None:
                if not get_user_model().objects.filter(pk=options["user"]).exists():
                    raise CommandError(f"no user {options['user']}")
                edges = rebuild_user(options["user"])
                self.stdout.write(f"rebuilt user {options['user']}: {edges} edges")
                return
            total = get_user_model().objects.filter(pk__gt=options["start_after"]).count()
            with tqdm(total=total, desc="rebuild mirror", unit="user", disable=options["verbosity"] == 0) as bar:
                stats = rebuild_all(
                    batch_users=options["batch"],
                    start_after=options["start_after"],
                    on_progress=lambda users, edges: bar.update(users),
                )
        except REDIS_ERRORS as exc:
            raise CommandError(f"Redis unreachable: {exc}") from exc
        elapsed = time.perf_counter() - started
        rate = stats.edges / elapsed if elapsed else 0.0
        self.stdout.write(
            f"rebuilt {stats.users} users, {stats.edges} edges in {elapsed:.1f}s ({rate:,.0f} edges/s)"
        )

"""manage.py rebuild_social_cache [--user N]: rebuild the follow graph's Redis mirror from the database."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from core.exit_codes import EXIT_CODES_HELP, unavailable
from core.redis import REDIS_ERRORS
from social.rebuild import rebuild_all, rebuild_user
from users.models import User


class Command(BaseCommand):
    help = (
        "Rebuild the Redis sets and sorted sets of the follow graph from the database (the truth). "
        "Keys are built aside and swapped in, so reads keep answering. Safe to interrupt and re-run; "
        "--start-after resumes; --dry-run prints what would be rebuilt. " + EXIT_CODES_HELP
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", type=int, default=None, help="rebuild only this user id")
        parser.add_argument("--start-after", type=int, default=0, help="resume after this user id")
        parser.add_argument("--batch", type=int, default=2000, help="user ids per batch")
        parser.add_argument("--dry-run", action="store_true", help="count the accounts and follows to rebuild, write nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["dry_run"]:
            self._plan(options)
            return
        started = time.perf_counter()
        try:
            if options["user"] is not None:
                if not User.objects.filter(pk=options["user"]).exists():
                    raise CommandError(f"no user {options['user']}")
                edges = rebuild_user(options["user"])
                self.stdout.write(f"rebuilt user {options['user']}: {edges} edges")
                return
            total = User.objects.filter(pk__gt=options["start_after"]).count()
            with tqdm(total=total, desc="rebuild mirror", unit="user", disable=options["verbosity"] == 0) as bar:
                stats = rebuild_all(
                    batch_users=options["batch"],
                    start_after=options["start_after"],
                    on_progress=lambda users, edges: bar.update(users),
                )
        except REDIS_ERRORS as exc:
            raise unavailable("Redis", exc) from exc
        elapsed = time.perf_counter() - started
        rate = stats.edges / elapsed if elapsed else 0.0
        self.stdout.write(f"rebuilt {stats.users} users, {stats.edges} edges in {elapsed:.1f}s ({rate:,.0f} edges/s)")

    def _plan(self, options: dict[str, Any]) -> None:
        """--dry-run: how many accounts and active follows a rebuild would write (two COUNTs)."""
        from social.selectors import active_follows

        users = User.objects.all()
        follows = active_follows()
        if options["user"] is not None:
            if not users.filter(pk=options["user"]).exists():
                raise CommandError(f"no user {options['user']}")
            users = users.filter(pk=options["user"])
            edges = follows.filter(follower_id=options["user"]).count() + follows.filter(followee_id=options["user"]).count()
        else:
            users = users.filter(pk__gt=options["start_after"])
            edges = follows.filter(follower_id__gt=options["start_after"]).count()
        self.stdout.write(f"would rebuild {users.count()} users, {edges} follows (dry run, nothing written)")

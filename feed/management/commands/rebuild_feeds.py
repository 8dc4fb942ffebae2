"""manage.py rebuild_feeds [--user N] [--start-after ID] [--include-inactive]."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from core.exit_codes import EXIT_CODES_HELP, unavailable
from core.redis import REDIS_ERRORS
from feed.rebuild import (
    inbox_rebuild,
    outbox_rebuild,
    readers_to_rebuild,
    rebuild_all_inboxes,
)
from users.models import User


class Command(BaseCommand):
    help = (
        "Rebuild feeds in Redis from the database: the pull set, every author's outbox and the inbox of "
        "every reader seen within FEED_ACTIVE_DAYS (others catch up when they come back). Each key is built "
        "aside and swapped in; safe to interrupt and run again (--start-after resumes); --dry-run prints "
        "how many outboxes and inboxes would be written. " + EXIT_CODES_HELP
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", type=int, help="rebuild only this account's inbox and outbox")
        parser.add_argument("--start-after", type=int, default=0, help="resume after this user id")
        parser.add_argument("--include-inactive", action="store_true", help="also rebuild inboxes of inactive readers")
        parser.add_argument("--no-progress", action="store_true", help="no progress bars (also with --verbosity 0)")
        parser.add_argument("--dry-run", action="store_true", help="count the outboxes and inboxes to rebuild, write nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            self._handle(options)
        except REDIS_ERRORS as exc:
            raise unavailable("Redis", exc) from exc

    def _handle(self, options: dict[str, Any]) -> None:
        if options["dry_run"]:
            self._plan(options)
            return
        if options["user"] is not None:
            if not User.objects.filter(pk=options["user"]).exists():
                raise CommandError(f"No user with id {options['user']}.")
            result = inbox_rebuild(user_id=options["user"])
            outbox = outbox_rebuild(author_id=options["user"])
            self.stdout.write(
                f"user {options['user']}: inbox {result.entries} notes (synced: {result.synced}), outbox {outbox} notes"
            )
            return
        start_after = options["start_after"]
        disable = options["no_progress"] or options["verbosity"] == 0
        total_users = User.objects.filter(pk__gt=start_after).count()
        readers = readers_to_rebuild(start_after=start_after, include_inactive=options["include_inactive"]).count()
        bars = {
            "outboxes": tqdm(total=total_users, desc="outboxes", unit="user", disable=disable),
            "inboxes": tqdm(total=readers, desc="inboxes", unit="reader", disable=disable),
        }
        try:
            stats = rebuild_all_inboxes(
                start_after=start_after,
                include_inactive=options["include_inactive"],
                on_progress=lambda phase, n: bars[phase].update(n),
            )
        finally:
            for bar in bars.values():
                bar.close()
        self.stdout.write(
            f"pull authors {stats.pull_authors}, outbox entries {stats.outbox_entries}, "
            f"inboxes {stats.inboxes} ({stats.inbox_entries} entries), last user id {stats.last_user_id}"
        )

    def _plan(self, options: dict[str, Any]) -> None:
        """--dry-run: the accounts whose outbox and inbox a rebuild would write (two COUNTs)."""
        if options["user"] is not None:
            if not User.objects.filter(pk=options["user"]).exists():
                raise CommandError(f"No user with id {options['user']}.")
            self.stdout.write(f"would rebuild the inbox and outbox of user {options['user']} (dry run, nothing written)")
            return
        outboxes = User.objects.filter(pk__gt=options["start_after"]).count()
        readers = readers_to_rebuild(start_after=options["start_after"], include_inactive=options["include_inactive"]).count()
        self.stdout.write(f"would rebuild {outboxes} outboxes and {readers} inboxes (dry run, nothing written)")

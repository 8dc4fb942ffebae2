"""manage.py make_celebrity --followers N [--username NAME]: give one account N followers quickly."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from core.exit_codes import EXIT_CODES_HELP, unavailable
from core.redis import REDIS_ERRORS, get_redis
from datatools.celebrity import BATCH, celebrity_make
from social import layout, redis_keys
from social.selectors import follow_counts
from users.models import User

MAX_FOLLOWERS = 10_000_000


class Command(BaseCommand):
    help = (
        "Give account USERNAME (created if missing) N followers: fan accounts fan<id>_<n> and Follow rows "
        "inserted in batches (INSERT IGNORE on MariaDB), then the account's Redis keys rebuilt (sharded "
        "above FOLLOWERS_SHARD_THRESHOLD). Re-runnable: existing fans and follows are kept; interrupt "
        "and re-run to resume. For tests, benchmarks and demos. " + EXIT_CODES_HELP
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--followers", type=int, required=True, help=f"number of followers (0..{MAX_FOLLOWERS:,})")
        parser.add_argument("--username", default="celebrity", help="the account (default: celebrity)")
        parser.add_argument("--ties", type=int, default=4, help="followers per follow second (equal follow times)")
        parser.add_argument("--batch", type=int, default=BATCH, help="rows per INSERT")
        parser.add_argument("--no-rebuild", action="store_true", help="skip the Redis rebuild")
        parser.add_argument(
            "--dry-run", action="store_true", help="print how many fans and follows would be added, write nothing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        followers = options["followers"]
        if not 0 <= followers <= MAX_FOLLOWERS:
            raise CommandError(f"--followers must be between 0 and {MAX_FOLLOWERS:,}")
        if options["ties"] < 1 or options["batch"] < 1:
            raise CommandError("--ties and --batch must be at least 1")
        if options["dry_run"]:
            self._plan(options["username"], followers)
            return
        started = time.perf_counter()
        try:
            with tqdm(
                total=followers, desc=f"followers of {options['username']}", unit="fan", disable=options["verbosity"] == 0
            ) as bar:
                result = celebrity_make(
                    username=options["username"],
                    followers=followers,
                    ties=options["ties"],
                    batch=options["batch"],
                    rebuild=not options["no_rebuild"],
                    on_progress=bar.update,
                )
            live = layout.marker_layout(get_redis().get(redis_keys.followers_layout_key(result.user_id)))
            shown = follow_counts(user_id=result.user_id).followers
        except REDIS_ERRORS as exc:
            raise unavailable("Redis", exc) from exc
        self.stdout.write(
            f"user {result.user_id} ({options['username']}): {result.followers} followers in the database, "
            f"{shown} in Redis ({live.decode()} layout), {time.perf_counter() - started:.1f}s"
        )

    def _plan(self, username: str, followers: int) -> None:
        """--dry-run: how many of the wanted followers already follow ``username`` (one COUNT)."""

        from social.models import Follow

        account = User.objects.filter(username=username).first()
        have = Follow.objects.filter(followee=account).count() if account else 0
        missing = max(followers - have, 0)
        state = f"user {account.pk} has {have} followers" if account else "the account does not exist yet"
        self.stdout.write(f"{username}: {state}; would add about {missing} fans and follows (dry run, nothing written)")

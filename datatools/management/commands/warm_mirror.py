"""manage.py warm_mirror [--replay-notes]: bring the Redis mirror up to date with the database (run_demo runs it beside the server)."""

from __future__ import annotations

import signal
import sys
from types import FrameType
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.exit_codes import EXIT_CODES_HELP, EXIT_INTERRUPTED, unavailable
from core.redis import REDIS_ERRORS, get_redis
from datatools.datasets import DatasetError
from datatools.selectors import WarmupProgress, mirror_state, warmup_reason
from datatools.services import mirror_warm_up

# A progress line at most every this many percent of a stage.
PROGRESS_STEP_PERCENT = 10


class Command(BaseCommand):
    help = (
        "Bring the Redis mirror up to date with the database while the site serves from the database: "
        "rebuild it when it is missing or was built from other data (sentinel and watermark), apply the "
        "outbox entries still pending, then record the watermark. Does nothing when the mirror is current. "
        "With --replay-notes, first replay the Higgs activity as notes when there is no note (what "
        "simulate_activity --if-empty does). Progress is printed and shown on the pages run_demo serves. " + EXIT_CODES_HELP
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--replay-notes", action="store_true", help="replay the Higgs activity as notes first when there is none"
        )
        parser.add_argument("--dry-run", action="store_true", help="say whether a warm-up is needed and why, change nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        # run_demo stops it with SIGTERM: unwind (the rebuild lock is released) instead of dying.
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
        try:
            reason = warmup_reason(mirror_state(get_redis()), replay_notes=options["replay_notes"])
            if options["dry_run"]:
                self.stdout.write(f"would warm up: {reason}" if reason else "the Redis mirror is current")
                return
            if not reason:
                self.stdout.write("The Redis mirror is current; nothing to warm up.")
                return
            self.stdout.write(f"Warming up: {reason}.")
            result = mirror_warm_up(replay_notes=options["replay_notes"], on_progress=_Printer(self).show)
        except REDIS_ERRORS as exc:
            raise unavailable("Redis", exc) from exc
        except DatasetError as exc:
            raise CommandError(str(exc)) from exc
        except KeyboardInterrupt:
            raise CommandError("warm-up interrupted; the next run starts it again", returncode=EXIT_INTERRUPTED) from None
        done = "rebuilt" if result.rebuilt else "kept"
        self.stdout.write(
            f"Warmed up in {result.seconds:.1f} s: {result.notes} notes replayed, Redis mirror {done}, "
            f"{result.applied} pending outbox entries applied."
        )


class _Printer:
    """Prints a line when a stage starts and every ``PROGRESS_STEP_PERCENT`` percent of it."""

    def __init__(self, command: BaseCommand) -> None:
        self.command = command
        self.stage = ""
        self.shown = -1

    def show(self, progress: WarmupProgress) -> None:
        step = progress.percent // PROGRESS_STEP_PERCENT
        if progress.stage == self.stage and step == self.shown:
            return
        self.stage, self.shown = progress.stage, step
        counted = f" ({progress.done:,} of {progress.total:,})" if progress.total else ""
        self.command.stdout.write(f"warm-up: {progress.stage} {progress.percent}%{counted}")


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    sys.exit(128 + signum)

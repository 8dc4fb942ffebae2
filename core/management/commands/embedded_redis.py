"""manage.py embedded_redis start|stop|status: the embedded Valkey server of the no-services default."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.embedded import EmbeddedRedis, EmbeddedRedisError
from core.exit_codes import EXIT_CODES_HELP, EXIT_UNAVAILABLE


class Command(BaseCommand):
    help = (
        "Start, stop or show the embedded Valkey server that serves as Redis when REDIS_URL is unset "
        "(socket and data in FOLLOWFEED_VAR_DIR). " + EXIT_CODES_HELP
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["start", "stop", "status"], help="what to do")
        parser.add_argument("--dry-run", action="store_true", help="say what would be done, start or stop nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        server = EmbeddedRedis(settings.FOLLOWFEED_VAR_DIR)
        if options["dry_run"]:
            state = "running" if server.answers() else "not running"
            self.stdout.write(f"would {options['action']} the server on {server.socket} ({state} now)")
            return
        try:
            if options["action"] == "start":
                started = server.ensure_running()
                self.stdout.write(f"{'started' if started else 'already running'} on {server.socket}")
            elif options["action"] == "stop":
                self.stdout.write("stopped" if server.stop() else "was not running")
            else:
                self.stdout.write(f"{'running' if server.answers() else 'not running'} on {server.socket}")
        except EmbeddedRedisError as exc:
            raise CommandError(str(exc), returncode=EXIT_UNAVAILABLE) from exc

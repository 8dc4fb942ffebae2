"""Exit codes of followfeed's management commands, for scripts, cron and CI.

0 done, 1 error, 2 usage (argparse's), 3 a reconcile's ``--dry-run`` found drift, 4 a service is
unreachable (retry), 130 interrupted. Table: docs/operations.md#management-commands.
"""

from __future__ import annotations

from django.core.management.base import CommandError

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_DRIFT_FOUND = 3
EXIT_UNAVAILABLE = 4
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = (
    "Exit codes: 0 done (or dry run printed its plan / found no drift); 1 error (bad value, missing file or "
    "account); 2 usage error; 3 dry run found drift; 4 Redis or broker unreachable, retry later; "
    "130 interrupted, re-run to continue."
)


def unavailable(service: str, exc: BaseException) -> CommandError:
    """A ``CommandError`` exiting with ``EXIT_UNAVAILABLE`` (4) for an unreachable ``service``."""
    return CommandError(f"{service} unreachable: {exc!r}; nothing is lost, re-run later", returncode=EXIT_UNAVAILABLE)

"""Exit codes of followfeed's management commands, for scripts, cron and CI.

=====  ==============================================================
code   meaning
=====  ==============================================================
0      done; for a ``--dry-run``: the plan was printed, or no drift
1      error: a bad value, a missing file or account (``CommandError``)
2      usage error: unknown option or malformed argument (argparse)
3      ``reconcile_social_cache --dry-run`` found drift (nothing repaired)
4      a service is unreachable (Redis, the broker): retry later; every
       command is safe to re-run and the long ones resume
130    interrupted (Ctrl-C, SIGINT); re-run to continue
=====  ==============================================================

2 is argparse's own code for usage errors, so "drift found" gets 3, and
"try again later" gets its own code so a scheduler can retry it without
paging anyone. 130 is the shell's 128 + SIGINT, which Python itself
returns for an unhandled KeyboardInterrupt.
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

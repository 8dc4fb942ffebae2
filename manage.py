#!/usr/bin/env python
"""Django's command-line utility for followfeed."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    finally:
        _say_if_the_embedded_server_is_left_running()


def _say_if_the_embedded_server_is_left_running() -> None:
    """One line on stderr when this command started the embedded Valkey server and leaves it running."""
    embedded = sys.modules.get("core.embedded")  # not imported: nothing started it
    notice = embedded.left_running_notice() if embedded is not None else None
    if notice:
        print(notice, file=sys.stderr)


if __name__ == "__main__":
    main()

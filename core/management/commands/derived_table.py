"""manage.py derived_table [--write]: the table of derived state, as docs/architecture.md shows it."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from core.derived import markdown

START, END = "<!-- derived-table:start -->", "<!-- derived-table:end -->"


class Command(BaseCommand):
    help = "Print the table of changes x derived structures (core.derived); --write puts it into docs/architecture.md."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--write", action="store_true", help="replace the table in docs/architecture.md")

    def handle(self, *args: Any, write: bool = False, **options: Any) -> None:
        table = markdown()
        if not write:
            self.stdout.write(table)
            return
        path = settings.BASE_DIR / "docs" / "architecture.md"
        text = path.read_text()
        head, _, rest = text.partition(START)
        _, _, tail = rest.partition(END)
        path.write_text(f"{head}{START}\n{table}\n{END}{tail}")
        self.stdout.write(f"wrote the table into {path}")

"""The Jinja2 environment of the row partials (``templates/jinja2/``): the rows a page repeats
(notes, accounts, follow-list rows), rendered by Django's Jinja2 backend, which costs a fraction
of the Django template language per row. The site's display filters are the same functions
(``core.templatetags.formatting``), so both languages print counts, times and paths alike. Rows
are rendered through ``core.templatetags.rows``; docs/performance.md#issue-26-cheaper-pages.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.template.defaultfilters import linebreaksbr
from django.utils import timezone
from jinja2 import Environment

from .templatetags.formatting import avatar_hue_class_filter, path_of_filter, time_ago_filter, utc_title_filter


def iso_datetime(value: datetime | None) -> str:
    """``value`` in ISO 8601 in the current time zone, as Django's ``date:'c'`` prints it ("" for None)."""
    if value is None:
        return ""
    return timezone.localtime(value).isoformat() if timezone.is_aware(value) else value.isoformat()


def environment(**options: Any) -> Environment:
    """The environment Django's Jinja2 backend builds (``TEMPLATES``' ``environment`` option)."""
    env = Environment(**options)  # noqa: S701 - the backend passes autoescape=True
    env.filters.update(
        {
            "path_of": path_of_filter,
            "avatar_hue_class": avatar_hue_class_filter,
            "time_ago": time_ago_filter,
            "utc_title": utc_title_filter,
            "iso_datetime": iso_datetime,
            "linebreaksbr": linebreaksbr,
        }
    )
    return env

"""The Jinja2 environment of the row partials (``templates/jinja2/``): the rows a page repeats
(notes, accounts, follow-list rows), rendered by Django's Jinja2 backend, which costs a fraction
of the Django template language per row. The site's display filters are the same functions
(``core.templatetags.formatting``), so both languages print counts, times and paths alike. Rows
are rendered through ``core.templatetags.rows``; docs/performance.md#issue-26-cheaper-pages.
"""

from __future__ import annotations

import functools
import html
import re
from datetime import datetime
from typing import Any

from django.utils import timezone
from jinja2 import Environment, pass_context
from jinja2.runtime import Context
from markupsafe import Markup

from .http import route_path
from .templatetags.formatting import avatar_hue_class_filter, path_of_filter, relative_time, utc_title_filter


@pass_context
def iso_datetime(context: Context, value: datetime | None) -> str:
    """``value`` in ISO 8601 in the current time zone, as Django's ``date:'c'`` prints it ("" for None).

    The zone is the context's ``time_zone`` (``core.templatetags.rows`` reads it once a render:
    reading it is a thread-local lookup, a large part of a row's cost when done per value).
    """
    if value is None:
        return ""
    if timezone.is_naive(value):
        return value.isoformat()
    zone = context.get("time_zone") or timezone.get_current_timezone()
    return value.astimezone(zone).isoformat()


@pass_context
def time_ago(context: Context, value: datetime | None) -> str:
    """``relative_time`` against the context's ``now`` (read once a render: ``timezone.now`` reads a
    setting through its lazy wrapper), else the current time."""
    return relative_time(value, now=context.get("now") or timezone.now())


def linebreaksbr(value: Any) -> Markup:
    """Django's ``linebreaksbr`` for text that is not safe: escaped as Django escapes, each line end
    (``\r\n``, ``\r``, ``\n``) a ``<br>``; without Django's lazy-string wrappers, once per row."""
    return Markup(html.escape(_LINE_ENDS.sub("\n", str(value))).replace("\n", "<br>"))  # noqa: S704 - escaped on the line


_LINE_ENDS = re.compile(r"\r\n|\r")


# How many accounts' fragments (``person``, ``byline``) one process keeps: a page's rows render each
# account's part once, then reuse it. Keyed by every value the fragment prints, so a rename or a
# new display name is a new key, never a stale fragment.
ACCOUNT_FRAGMENTS = 20_000


def environment(**options: Any) -> Environment:
    """The environment Django's Jinja2 backend builds (``TEMPLATES``' ``environment`` option)."""
    env = Environment(**options)  # noqa: S701 - the backend passes autoescape=True

    @functools.lru_cache(maxsize=ACCOUNT_FRAGMENTS)
    def fragment(name: str, pk: int, username: str, display_name: str) -> Markup:
        shown = {"pk": pk, "username": username, "shown_name": display_name or username}
        return Markup(env.get_template(name).render(shown))  # noqa: S704 - Jinja2 escaped every value

    def person(user: Any) -> Markup:
        """An account's avatar, shown name linked to its profile, and handle (``social/_person.html``)."""
        return fragment("social/_person.html", user.pk, user.username, user.display_name or "")

    def byline(user: Any) -> Markup:
        """A note's author: shown name linked to its profile, and handle (``feed/_byline.html``)."""
        return fragment("feed/_byline.html", user.pk, user.username, user.display_name or "")

    env.globals.update({"person": person, "byline": byline})
    env.filters.update(
        {
            "path_of": path_of_filter,
            "route_path": route_path,
            "avatar_hue_class": avatar_hue_class_filter,
            "time_ago": time_ago,
            "utc_title": utc_title_filter,
            "iso_datetime": iso_datetime,
            "linebreaksbr": linebreaksbr,
        }
    )
    return env

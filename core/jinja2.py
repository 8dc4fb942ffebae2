"""The Jinja2 environment (``templates/jinja2/``) of the pages people load most (home, profile,
followers and following), of the rows every page repeats (notes, accounts, follow-list rows) and
of the layout's parts, rendered by Django's Jinja2 backend, which costs a fraction of the Django
template language. The site's display filters are the same functions (``core.templatetags``), so
both languages print counts, times, rows and paths alike; docs/architecture.md#templates.
"""

from __future__ import annotations

import functools
import html
import re
from datetime import datetime
from typing import Any

from django.contrib.humanize.templatetags.humanize import intcomma
from django.template.defaultfilters import capfirst, pluralize, urlencode
from django.templatetags.static import static
from django.utils import timezone
from jinja2 import ChainableUndefined, Environment, pass_context
from jinja2.runtime import Context
from markupsafe import Markup

from .http import route_path
from .templatetags.formatting import (
    avatar_hue_class_filter,
    compact_count_filter,
    path_of_filter,
    relative_time,
    utc_title_filter,
)
from .templatetags.rows import (
    follow_rows_html,
    note_rows_html,
    site_foot_html,
    site_head_html,
    site_header_html,
    user_rows_html,
)


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


def url(route: str, *arguments: Any) -> str:
    """``{{ url("app:route") }}``, ``{{ url("app:route", value) }}``: the path, as Django's ``{% url %}`` gives it."""
    if not arguments:
        return route_path(route)
    (argument,) = arguments
    return path_of_filter(argument, route)


@pass_context
def site_header(context: Context) -> Markup:
    """The layout's header (``core.templatetags.rows.site_header_html``)."""
    return Markup(site_header_html(context))  # noqa: S704 - Jinja2 escaped every value


@pass_context
def follow_rows(context: Context, entries: Any, *, kind: str, is_self: bool) -> Markup:
    """A follow list's rows (``core.templatetags.rows.follow_rows_html``)."""
    return Markup(follow_rows_html(context, entries, kind=kind, is_self=is_self))  # noqa: S704 - Jinja2 escaped every value


def environment(**options: Any) -> Environment:
    """The environment Django's Jinja2 backend builds (``TEMPLATES``' ``environment`` option).

    An undefined name or attribute prints nothing and tests false, whatever ``DEBUG`` says, as in
    the Django template language (a signed-out page has no ``relationship``).
    """
    options["undefined"] = ChainableUndefined
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

    env.globals.update(
        {
            "person": person,
            "byline": byline,
            "url": url,
            "static": static,
            "site_header": site_header,
            "site_head": lambda: Markup(site_head_html()),  # noqa: S704 - rendered by Jinja2
            "site_foot": lambda: Markup(site_foot_html()),  # noqa: S704 - rendered by Jinja2
            "note_rows": lambda notes, new_count=0: Markup(note_rows_html(notes, new_count)),  # noqa: S704 - escaped there
            "user_rows": lambda users: Markup(user_rows_html(users)),  # noqa: S704 - escaped there
            "follow_rows": follow_rows,
        }
    )
    env.filters.update(
        {
            "intcomma": intcomma,
            "pluralize": pluralize,
            "capfirst": capfirst,
            "urlencode": urlencode,
            "compact_count": compact_count_filter,
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

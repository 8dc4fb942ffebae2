"""Rows a page repeats and the layout's parts, rendered by the Jinja2 partials (``templates/jinja2/``,
``core.jinja2``), for both template languages.

The Django template language's pages use the tags: ``{% note_rows notes %}``, ``{% note_row note %}``,
``{% user_rows users %}``, ``{% follow_rows entries kind=... is_self=... %}`` print ``<li>`` rows
(safe HTML); ``{% site_head %}``, ``{% site_header %}``, ``{% site_messages %}`` and
``{% site_foot %}`` print the layout's parts (``base.html``). The Jinja2 pages call the same
functions as globals (``core.jinja2``). Presentation only: no queries (the header's unread count
is the context processor's one Redis GET).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import template
from django.template.loader import get_template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

# The Jinja2 engine's alias in TEMPLATES.
ENGINE = "jinja2"


def render_rows(name: str, context: dict[str, Any]) -> SafeString:
    """The Jinja2 row partial ``name`` rendered with ``context``, the current ``time_zone`` and
    ``now`` (autoescaped, so safe to print)."""
    context["time_zone"] = timezone.get_current_timezone()
    context["now"] = timezone.now()
    return mark_safe(get_template(name, using=ENGINE).render(context))  # noqa: S308 - Jinja2 escaped every value


def note_rows_html(notes: Iterable[Any], new_count: int = 0) -> SafeString:
    """``<li class="note">`` rows of ``notes`` (``Note`` or ``FeedNote``; the author loaded); with
    ``new_count`` > 0, the "new since you last read" divider after that many rows."""
    return render_rows("feed/_notes.html", {"notes": notes, "new_count": new_count or 0})


def user_rows_html(users: Iterable[Any]) -> SafeString:
    """``<li>`` rows of accounts (``User``): avatar, shown name linked to the profile, handle."""
    return render_rows("social/_user_rows.html", {"users": users})


def follow_rows_html(context: Any, entries: Iterable[Any], *, kind: str, is_self: bool) -> SafeString:
    """The rows of a followers (``kind`` "followers") or following list of ``FollowEntry``s: the
    account, when the follow began, and for a signed-in viewer (``context``'s ``user``) its mute
    and block forms (and, on the viewer's own followers, remove). ``context``: a page's Django or
    Jinja2 context (anything with ``get``)."""
    viewer = context.get("user")
    viewer_id = viewer.pk if viewer is not None and viewer.is_authenticated else None
    return render_rows(
        "social/_follow_rows.html",
        {"entries": entries, "kind": kind, "is_self": is_self, "viewer_id": viewer_id, "csrf_input": _csrf_input(context)},
    )


def site_header_html(context: Any) -> SafeString:
    """The layout's header for a page's ``context`` (Django's or Jinja2's): the brand, the main
    navigation (the current page marked), and for a signed-in reader Home, Lists, Notifications
    with the unread count, the profile link and sign-out."""
    user = context.get("user")
    reader_id = user.pk if user is not None and user.is_authenticated else None
    username = user.username if user is not None and reader_id is not None else ""
    request = context.get("request")
    match = getattr(request, "resolver_match", None)
    url_name = match.view_name if match is not None else ""
    profile_user = context.get("profile_user")
    return render_rows(
        "layout/_header.html",
        {
            "username": username,
            "url_name": url_name,
            "unread_count": context.get("unread_count") if username else 0,
            "is_own_profile": reader_id is not None
            and url_name == "feed:profile"
            and getattr(profile_user, "pk", None) == reader_id,
            "csrf_input": _csrf_input(context) if username else "",
        },
    )


def _csrf_input(context: Any) -> str:
    token = context.get("csrf_token")
    # Rendered once for every form of the page, as Django's {% csrf_token %} renders it.
    return format_html('<input type="hidden" name="csrfmiddlewaretoken" value="{}">', token) if token else ""


@register.simple_tag
def note_rows(notes: Iterable[Any], *, new_count: int = 0) -> SafeString:
    """``note_rows_html``."""
    return note_rows_html(notes, new_count)


@register.simple_tag
def note_row(note: Any) -> SafeString:
    """One note's row (see ``note_rows_html``)."""
    return note_rows_html((note,))


@register.simple_tag
def user_rows(users: Iterable[Any]) -> SafeString:
    """``user_rows_html``."""
    return user_rows_html(users)


@register.simple_tag
def user_row(user: Any) -> SafeString:
    """One account's row (see ``user_rows_html``)."""
    return user_rows_html((user,))


@register.simple_tag(takes_context=True)
def follow_rows(context: template.Context, entries: Iterable[Any], *, kind: str, is_self: bool) -> SafeString:
    """``follow_rows_html``."""
    return follow_rows_html(context, entries, kind=kind, is_self=is_self)


@register.simple_tag(takes_context=True)
def site_header(context: template.Context) -> SafeString:
    """``site_header_html``."""
    return site_header_html(context)


@register.simple_tag
def site_head() -> SafeString:
    """The layout's ``<head>`` but its title: character set, viewport, icon, style sheet."""
    return render_rows("layout/_head.html", {})


@register.simple_tag(takes_context=True)
def site_messages(context: template.Context) -> SafeString:
    """The page's messages (Django's messages framework), as a status list; nothing when none."""
    return render_rows("layout/_messages.html", {"messages": context.get("messages")})


@register.simple_tag
def site_foot() -> SafeString:
    """The layout's end: the live region the page's script speaks in, and the script."""
    return render_rows("layout/_foot.html", {})

"""Rows a page repeats and the layout's parts, rendered by the Jinja2 partials (``templates/jinja2/``,
``core.jinja2``), for both template languages.

The Django template language's pages use the tags: ``{% note_rows notes %}``, ``{% note_row note %}``,
``{% user_rows users %}`` print ``<li>`` rows (safe HTML); ``{% site_head %}``, ``{% site_header %}``,
``{% site_messages %}`` and ``{% site_foot %}`` print the layout's parts (``base.html``). The Jinja2
pages call the same functions as globals (``core.jinja2``), and ``follow_rows`` too: its buttons
post the follow list page's one form, which only that Jinja2 page has. Presentation only: no
queries (the header's unread count is the context processor's, read with the session).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from django import template
from django.conf import settings
from django.template.loader import get_template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from .formatting import relative_time

register = template.Library()

# The Jinja2 engine's alias in TEMPLATES.
ENGINE = "jinja2"


def render_rows(name: str, context: dict[str, Any]) -> SafeString:
    """The Jinja2 row partial ``name`` rendered with ``context``, the current ``time_zone`` and
    ``now`` (autoescaped, so safe to print)."""
    context["time_zone"] = timezone.get_current_timezone()
    context["now"] = timezone.now()
    return mark_safe(get_template(name, using=ENGINE).render(context))  # noqa: S308 - Jinja2 escaped every value


T = TypeVar("T")


class Kept(Generic[T]):
    """Rendered output (HTML, or the parts of an API's answer) one process keeps, keyed by every
    value it prints, so a change of any of them is a new key, never a stale render. Bounded:
    emptied when ``limit`` entries are held."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.rendered: dict[tuple[Any, ...], T] = {}

    def get(self, key: tuple[Any, ...], render: Callable[[], T]) -> T:
        """The render kept under ``key``, else ``render()``'s, kept."""
        found = self.rendered.get(key)
        if found is None:
            found = render()
            if len(self.rendered) >= self.limit:
                self.rendered.clear()
            self.rendered[key] = found
        return found


# Note rows (``note_rows_html``): the note, its author's names, the phrase for its age.
_note_rows: Kept[str] = Kept(10_000)
NEW_DIVIDER = '<li class="new-divider" role="separator" id="last-read">New since you last read ↑</li>'


def note_rows_html(notes: Iterable[Any], new_count: int = 0) -> SafeString:
    """``<li class="note">`` rows of ``notes`` (``Note`` or ``FeedNote``; the author loaded); with
    ``new_count`` > 0, the "new since you last read" divider after that many rows."""
    now, zone = timezone.now(), timezone.get_current_timezone()
    rows = []
    kept = _note_rows
    for index, note in enumerate(notes):
        if new_count and index == new_count:
            rows.append(NEW_DIVIDER)
        author, created_at = note.author, note.created_at
        ago = relative_time(created_at, now=now)
        key = (
            note.pk,
            author.pk,
            author.username,
            author.display_name or "",
            note.body,
            note.spoiler_text,
            note.visibility,
            note.published_ms,
            created_at,
            ago,
            zone,
        )
        shown = {"note": note, "ago": ago, "time_zone": zone}
        rows.append(kept.get(key, functools.partial(_render_row, "feed/_note.html", shown)))
    return mark_safe("".join(rows))  # noqa: S308 - Jinja2 escaped every value


def _render_row(name: str, context: dict[str, Any]) -> str:
    return str(get_template(name, using=ENGINE).render(context))


# Account rows (``user_rows_html``): the account's names.
_user_rows: Kept[str] = Kept(20_000)


def user_rows_html(users: Iterable[Any]) -> SafeString:
    """``<li>`` rows of accounts (``User``): avatar, shown name linked to the profile, handle."""
    kept = _user_rows
    rows = [
        kept.get(
            (user.pk, user.username, user.display_name or ""),
            functools.partial(_render_row, "social/_user_row.html", {"u": user}),
        )
        for user in users
    ]
    return mark_safe("".join(rows))  # noqa: S308 - Jinja2 escaped every value


# Follow-list rows (``follow_rows_html``): the account's names, the follow's time and phrase, the buttons.
_follow_rows: Kept[str] = Kept(20_000)


def follow_rows_html(context: Any, entries: Iterable[Any], *, kind: str, is_self: bool) -> SafeString:
    """The rows of a followers (``kind`` "followers") or following list of ``FollowEntry``s: the
    account, when the follow began, and for a signed-in viewer (``context``'s ``user``) its mute
    and block buttons (and, on the viewer's own followers, remove). The buttons post the page's
    form ``row-action`` (``follow_list.html``), which holds the CSRF token. ``context``: a page's
    Django or Jinja2 context (anything with ``get``)."""
    viewer = context.get("user")
    viewer_id = viewer.pk if viewer is not None and viewer.is_authenticated else None
    removable = is_self and kind == "followers"
    now, zone = timezone.now(), timezone.get_current_timezone()
    rows = []
    kept = _follow_rows
    for entry in entries:
        user, followed_at = entry.user, entry.followed_at
        ago = relative_time(followed_at, now=now)
        menu = viewer_id is not None and user.pk != viewer_id
        key = (user.pk, user.username, user.display_name or "", followed_at, ago, kind, removable, menu, zone)
        shown = {
            "user": user,
            "followed_at": followed_at,
            "ago": ago,
            "kind": kind,
            "removable": removable,
            "menu": menu,
            "time_zone": zone,
        }
        rows.append(kept.get(key, functools.partial(_render_row, "social/_follow_row.html", shown)))
    return mark_safe("".join(rows))  # noqa: S308 - Jinja2 escaped every value


# Headers (``site_header_html``): every value a header prints but the CSRF token, which goes
# between the two halves kept.
_headers: Kept[tuple[str, str]] = Kept(10_000)
# Where the sign-out form's token goes: a character no value of a header can hold.
FORM_FIELD_PLACE = "\x00"


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
    unread_count = context.get("unread_count") if username else 0
    is_own_profile = reader_id is not None and url_name == "feed:profile" and getattr(profile_user, "pk", None) == reader_id
    key = (username, url_name, int(unread_count or 0), is_own_profile)

    def render() -> tuple[str, str]:
        html = render_rows(
            "layout/_header.html",
            {
                "username": username,
                "url_name": url_name,
                "unread_count": key[2],
                "is_own_profile": is_own_profile,
                "csrf_input": mark_safe(FORM_FIELD_PLACE) if username else "",  # noqa: S308 - a constant
            },
        )
        before, _, after = html.partition(FORM_FIELD_PLACE)
        return before, after

    halves = _headers.get(key, render)
    return mark_safe(halves[0] + (_csrf_input(context) if username else "") + halves[1])  # noqa: S308 - escaped in the render


def site_head_html() -> SafeString:
    """The layout's ``<head>`` but its title: character set, viewport, icon, style sheet."""
    return _layout_part("layout/_head.html", settings.STATIC_URL)


def site_foot_html() -> SafeString:
    """The layout's end: the live region the page's script speaks in, and the script."""
    return _layout_part("layout/_foot.html", settings.STATIC_URL)


@functools.lru_cache(maxsize=8)
def _layout_part(name: str, static_url: str) -> SafeString:
    # Rendered once per process and static address: it prints nothing else that changes.
    return render_rows(name, {})


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
def site_header(context: template.Context) -> SafeString:
    """``site_header_html``."""
    return site_header_html(context)


@register.simple_tag
def site_head() -> SafeString:
    """``site_head_html``."""
    return site_head_html()


@register.simple_tag(takes_context=True)
def site_messages(context: template.Context) -> SafeString:
    """The page's messages (Django's messages framework), as a status list; nothing when none."""
    return render_rows("layout/_messages.html", {"messages": context.get("messages")})


@register.simple_tag
def site_foot() -> SafeString:
    """``site_foot_html``."""
    return site_foot_html()

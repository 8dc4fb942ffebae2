"""Display filters for every page: compact counts, relative times, avatar colours.

``{% load formatting %}`` then:

- ``{{ n|compact_count }}``: ``12345`` -> ``"12.3k"`` (see ``compact_count``);
  pages put the exact number in the element's ``title``.
- ``{{ dt|time_ago }}``: ``"3 min ago"`` (see ``relative_time``); pages wrap it
  in ``<time datetime=... title=...>`` so the exact moment is one hover away.
- ``{{ user.username|path_of:"social:mute" }}``: the path ``{% url "social:mute"
  user.username %}`` gives, from a template of the route reversed once per
  process (a list of 50 rows with four links each reverses four routes, not
  two hundred).
- ``{{ user.pk|avatar_hue }}``: a stable hue (degrees) for the initial-letter avatar;
  ``{{ user.pk|avatar_hue_class }}`` the CSS class of that hue rounded down to
  10 degrees (``hue-0`` to ``hue-35`` in ``static/css/site.css``), since the
  Content-Security-Policy allows no inline ``style``.

Presentation only: no queries, no business rules. ``static/js/site.js``
implements the same two formats (``followfeed.compactCount`` and
``followfeed.relativeTime``) for counts and times it updates in the page;
``tests/e2e/test_formatting_parity.py`` checks that both agree.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from django import template
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

register = template.Library()

# (threshold, suffix), largest first. Short suffixes as most products print
# them (k, M, B); "k" is lower case as in SI "kilo".
_UNITS: tuple[tuple[int, str], ...] = ((1_000_000_000, "B"), (1_000_000, "M"), (1_000, "k"))

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def compact_count(value: Any) -> str:
    """A count shortened for display: at most three significant digits and a unit.

    Rules (``n`` a non-negative integer):

    - below 1,000 the number itself: ``999`` -> ``"999"``;
    - then k (thousands), M (millions), B (billions); below 100 of a unit one
      decimal, ``1234`` -> ``"1.2k"``, ``12345`` -> ``"12.3k"``, at 100 or
      more none, ``123456`` -> ``"123k"``; a trailing ``.0`` is dropped,
      ``1000`` -> ``"1k"``, ``1000000`` -> ``"1M"``.

    Rounding is **toward zero** (truncation), the convention of the large
    social products' follower counts: a shortened count never claims more
    than the exact one, so ``1999`` shows ``"1.9k"`` and ``999999`` shows
    ``"999k"``, never ``"2k"`` or ``"1000k"``/``"1M"`` before the threshold
    is really crossed. The arithmetic is on integers (no float rounding
    surprises at ``x.x5`` boundaries).

    :param value: an ``int`` (or a string of digits). Anything else, and
        negative numbers, are returned unchanged as ``str(value)`` (counts are
        never negative; a template must not fail on a bad value).
    :returns: the display string, e.g. ``"12.3k"``.
    """
    try:
        n = int(value)
    except (TypeError, ValueError):
        return "" if value is None else str(value)
    if n < 1000:
        return str(n)
    for unit, suffix in _UNITS:
        if n >= unit:
            tenths = n * 10 // unit  # e.g. 12345 -> 123 tenths of a thousand
            whole, tenth = divmod(tenths, 10)
            if whole >= 100 or tenth == 0:
                return f"{whole}{suffix}"
            return f"{whole}.{tenth}{suffix}"
    return str(n)  # pragma: no cover - the loop always returns for n >= 1000


def relative_time(value: datetime | None, *, now: datetime) -> str:
    """How long ago ``value`` was, as a short phrase: ``"3 min ago"``.

    - under 10 seconds (or in the future, clock skew): ``"just now"``;
    - under a minute: ``"42 s ago"``; under an hour: ``"3 min ago"``;
    - under a day: ``"5 h ago"``; under a week: ``"2 d ago"``;
    - older: the date, ``"Mar 4"`` in ``now``'s year, else ``"Mar 4, 2023"``.

    Each step rounds down (59 min 59 s is ``"59 min ago"``), like the
    timelines of the large products; the date form avoids "52 weeks ago".
    Times are compared in UTC, so the output does not depend on the server's
    time zone; the date form uses UTC dates.

    :param value: an aware datetime (a naive one is taken as UTC); None gives "".
    :param now: the current time, aware.
    :returns: the phrase.
    """
    if value is None:
        return ""
    if timezone.is_naive(value):
        value = value.replace(tzinfo=UTC)
    seconds = int((now - value).total_seconds())
    if seconds < 10:
        return "just now"
    if seconds < 60:
        return f"{seconds} s ago"
    if seconds < 3600:
        return f"{seconds // 60} min ago"
    if seconds < 86400:
        return f"{seconds // 3600} h ago"
    if seconds < 7 * 86400:
        return f"{seconds // 86400} d ago"
    utc_value = value.astimezone(UTC)
    utc_now = now.astimezone(UTC)
    day = f"{_MONTHS[utc_value.month - 1]} {utc_value.day}"
    return day if utc_value.year == utc_now.year else f"{day}, {utc_value.year}"


@register.filter(name="compact_count")
def compact_count_filter(value: Any) -> str:
    """``{{ n|compact_count }}``: see ``compact_count``."""
    return compact_count(value)


@register.filter(name="time_ago")
def time_ago_filter(value: datetime | None) -> str:
    """``{{ dt|time_ago }}``: ``relative_time`` against the current time."""
    return relative_time(value, now=timezone.now())


@register.filter(name="utc_title")
def utc_title_filter(value: datetime | None) -> str:
    """``{{ dt|utc_title }}``: the exact moment for a ``title``: ``"2024-03-04 12:05:09 UTC"``."""
    if value is None:
        return ""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@register.filter(name="avatar_hue")
def avatar_hue_filter(value: Any) -> int:
    """``{{ user.pk|avatar_hue }}``: a hue in degrees (0-359) that is stable per account.

    Multiplying by 137 (close to the golden angle, 137.5 degrees) spreads
    consecutive ids around the colour wheel.
    """
    try:
        return int(value) * 137 % 360
    except (TypeError, ValueError):
        return 210



@register.filter(name="avatar_hue_class")
def avatar_hue_class_filter(value: Any) -> str:
    """``{{ user.pk|avatar_hue_class }}``: ``"hue-N"`` (N 0-35), the avatar's hue in steps of 10 degrees."""
    return f"hue-{avatar_hue_filter(value) // 10}"


# A value every route's converter takes (a string and an id alike), found once in the reversed path.
_PLACEHOLDER = "4815162342"
# The characters ``django.urls.reverse`` leaves unquoted in a path.
_PATH_SAFE = "!$&'()*+,;=/~:@"
_route_templates: dict[str, tuple[str, str]] = {}


@register.filter(name="path_of")
def path_of_filter(value: Any, route: str) -> str:
    """The path of ``route`` (a URL name taking one argument) for ``value``, as ``reverse`` gives it.

    :raises django.urls.NoReverseMatch: ``route`` takes no single argument.
    """
    found = _route_templates.get(route)
    if found is None:
        head, placeholder, tail = reverse(route, args=[_PLACEHOLDER]).partition(_PLACEHOLDER)
        if not placeholder or _PLACEHOLDER in tail:
            raise NoReverseMatch(f"{route} does not place its one argument once in its path")
        found = _route_templates[route] = (head, tail)
    return f"{found[0]}{quote(str(value), safe=_PATH_SAFE)}{found[1]}"

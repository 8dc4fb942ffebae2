"""Display filters for every page: ``compact_count``, ``time_ago``, ``utc_title``, ``path_of``,
``avatar_hue`` and ``avatar_hue_class``. Presentation only: no queries. ``static/js/site.js``
implements the same count and time formats; ``tests/e2e/test_formatting_parity.py`` checks they agree.
Rules: docs/behaviours.md#follows-counts-and-the-home-feed.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django import template
from django.utils import timezone

from core.http import path_of

register = template.Library()

# (threshold, suffix), largest first. Short suffixes as most products print
# them (k, M, B); "k" is lower case as in SI "kilo".
_UNITS: tuple[tuple[int, str], ...] = ((1_000_000_000, "B"), (1_000_000, "M"), (1_000, "k"))

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def compact_count(value: Any) -> str:
    """A count shortened to three significant digits and a unit (k, M, B), rounded toward zero on integers.

    ``999`` -> ``"999"``, ``1234`` -> ``"1.2k"``, ``123456`` -> ``"123k"``, ``1000`` -> ``"1k"``,
    ``1999`` -> ``"1.9k"`` (a short count never claims more than the exact one).

    :param value: an ``int`` (or a string of digits); anything else, and negative numbers,
        come back as ``str(value)`` (a template must not fail).
    :returns: the display string.
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
    """How long ago ``value`` was: ``"just now"`` (under 10 s, or future), ``"42 s ago"``,
    ``"3 min ago"``, ``"5 h ago"``, ``"2 d ago"``, then ``"Mar 4"`` (``now``'s year) or
    ``"Mar 4, 2023"``; each step rounds down; compared and dated in UTC.

    :param value: an aware datetime (naive is taken as UTC); None gives "".
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
    moment = value.astimezone(UTC)
    # By hand: strftime costs more than the rest of a row's dates.
    return f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d} {moment.hour:02d}:{moment.minute:02d}:{moment.second:02d} UTC"


@register.filter(name="avatar_hue")
def avatar_hue_filter(value: Any) -> int:
    """``{{ user.pk|avatar_hue }}``: a hue in degrees (0-359), stable per account."""
    try:
        # 137, near the golden angle (137.5 degrees), spreads consecutive ids around the wheel.
        return int(value) * 137 % 360
    except (TypeError, ValueError):
        return 210


@register.filter(name="avatar_hue_class")
def avatar_hue_class_filter(value: Any) -> str:
    """``{{ user.pk|avatar_hue_class }}``: ``"hue-N"`` (N 0-35), the avatar's hue in steps of 10 degrees."""
    return f"hue-{avatar_hue_filter(value) // 10}"


@register.filter(name="path_of")
def path_of_filter(value: Any, route: str) -> str:
    """``{{ value|path_of:"app:route" }}``: see ``core.http.path_of``."""
    return path_of(route, value)

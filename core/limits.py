"""Limits on abuse: how often one account or one client address may do something.

Counting is django-ratelimit's (fixed windows in the ``limits`` cache:
Redis, or the database while Redis is down, ``core.cache``). Each limit is
a setting holding a django-ratelimit rate (``"400/d"``: 400 a day; units
``s``, ``m``, ``h``, ``d``, with an optional count of them, ``"10/15m"``).
Going over raises ``RateLimited`` (HTTP 429, with ``Retry-After``).

The limits (settings, defaults):

- ``FOLLOW_RATE`` (``400/d``): new follows per account;
- ``NOTE_RATE`` (``100/h``): notes per account;
- ``SIGNUP_RATE`` (``5/h``): sign-ups per client address;
- ``LOGIN_FAILURE_ACCOUNT_RATE`` (``10/15m``) and
  ``LOGIN_FAILURE_ADDRESS_RATE`` (``30/15m``): failed sign-ins per account
  and per address; past either, sign-in is locked until the window ends,
  even with the right password.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django_ratelimit.core import get_usage

from .errors import DomainError


class RateLimited(DomainError):
    """Too many of one action in the window; ``retry_after`` is in seconds (HTTP 429)."""

    status = 429

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = max(1, int(retry_after))


def _usage(group: str, who: str, rate_setting: str, *, increment: bool) -> dict[str, Any] | None:
    rate = str(getattr(settings, rate_setting))
    return get_usage(None, group=group, key=lambda _group, _request: who, rate=rate, increment=increment)  # type: ignore[no-any-return]


def _seconds_left(usage: dict[str, Any]) -> int:
    # django-ratelimit's window still holds during its last whole second
    # (time_left 0), so the limit lifts one second after time_left.
    return max(0, int(usage["time_left"])) + 1


def limited(group: str, who: str, rate_setting: str) -> int | None:
    """Whether ``who`` is over the limit of ``group`` now, without counting: the seconds until it
    lifts, or None when it is not over."""
    usage = _usage(group, who, rate_setting, increment=False)
    if usage is None or usage["count"] < usage["limit"]:
        return None
    return _seconds_left(usage)


def hit(group: str, who: str, rate_setting: str, *, message: str) -> None:
    """Count one ``group`` action by ``who`` under the rate in ``rate_setting``.

    :raises RateLimited: that was one too many (it is not counted again).
    """
    usage = _usage(group, who, rate_setting, increment=True)
    if usage is not None and usage["should_limit"]:
        raise RateLimited(message, retry_after=_seconds_left(usage))


def client_address(request: HttpRequest) -> str:
    """The client's address: ``CLIENT_ADDRESS_HEADER`` set by the proxy (e.g. ``HTTP_X_REAL_IP``),
    else ``REMOTE_ADDR``."""
    header = str(getattr(settings, "CLIENT_ADDRESS_HEADER", "") or "")
    value = request.META.get(header, "") if header else ""
    return str(value or request.META.get("REMOTE_ADDR", "")).split(",")[0].strip()

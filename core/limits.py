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
from .metrics import count_refusal


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
    count_refusal(group)
    return _seconds_left(usage)


def hit(group: str, who: str, rate_setting: str, *, message: str) -> None:
    """Count one ``group`` action by ``who`` under the rate in ``rate_setting``.

    :raises RateLimited: that was one too many (it is not counted again).
    """
    usage = _usage(group, who, rate_setting, increment=True)
    if usage is not None and usage["should_limit"]:
        count_refusal(group)
        raise RateLimited(message, retry_after=_seconds_left(usage))


def client_address(request: HttpRequest) -> str:
    """The client's address as the nearest trusted proxy saw it.

    ``TRUSTED_PROXY_COUNT`` (N) proxies stand in front of the site and each
    appends the address it received from to ``CLIENT_ADDRESS_HEADER``
    (``HTTP_X_FORWARDED_FOR`` when N > 0 and it is unset). The client writes
    whatever it likes on the left of that list, so the address is the Nth
    from the right (the rightmost one no trusted proxy wrote), or the
    leftmost when the list is shorter (every entry was a proxy's). Without
    the header (a request that did not come through the proxies),
    ``REMOTE_ADDR``. N = 0 and no header: ``REMOTE_ADDR``.
    """
    trusted = max(0, int(getattr(settings, "TRUSTED_PROXY_COUNT", 0) or 0))
    header = str(getattr(settings, "CLIENT_ADDRESS_HEADER", "") or "") or ("HTTP_X_FORWARDED_FOR" if trusted else "")
    entries = [part.strip() for part in str(request.META.get(header, "") if header else "").split(",")]
    entries = [entry for entry in entries if entry]
    if not entries:
        return str(request.META.get("REMOTE_ADDR", "")).strip()
    # A header named without a count of proxies still has one proxy writing it.
    return entries[-min(max(trusted, 1), len(entries))]

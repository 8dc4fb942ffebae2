"""Limits on abuse: how often one account or one client address may do something.

Each limit is a setting holding a django-ratelimit rate (``"400/d"``, ``"10/15m"``), counted in
fixed windows of the ``limits`` cache (``core.cache``); going over raises ``RateLimited`` (429,
``Retry-After``). The limits and defaults: docs/operations.md#configuration.
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
    """The client's address as the nearest trusted proxy saw it: the ``TRUSTED_PROXY_COUNT``-th entry
    from the right of ``CLIENT_ADDRESS_HEADER`` (the leftmost when shorter), else ``REMOTE_ADDR``
    (what a client writes on the left is ignored).
    """
    trusted = max(0, int(getattr(settings, "TRUSTED_PROXY_COUNT", 0) or 0))
    header = str(getattr(settings, "CLIENT_ADDRESS_HEADER", "") or "") or ("HTTP_X_FORWARDED_FOR" if trusted else "")
    entries = [part.strip() for part in str(request.META.get(header, "") if header else "").split(",")]
    entries = [entry for entry in entries if entry]
    if not entries:
        return str(request.META.get("REMOTE_ADDR", "")).strip()
    # A header named without a count of proxies still has one proxy writing it.
    return entries[-min(max(trusted, 1), len(entries))]

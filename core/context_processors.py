"""The CSRF token of a page, masked once per request (``TEMPLATES``' context processors).

Django masks the token afresh each time a page prints it (32 random characters from the
system's random source each time); a page with several forms printed it up to five times. Both
names stay lazy, so a page without a form neither reads nor sets the CSRF cookie.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.middleware.csrf import get_token
from django.utils.functional import lazy
from django.utils.html import format_html
from django.utils.safestring import SafeString

# The request's attribute holding its masked token once made.
MASKED_ATTRIBUTE = "_followfeed_masked_csrf_token"


def masked_token(request: HttpRequest) -> str:
    """The request's CSRF token, masked on the first call, the same string after."""
    token = getattr(request, MASKED_ATTRIBUTE, None)
    if token is None:
        token = str(get_token(request))
        setattr(request, MASKED_ATTRIBUTE, token)
    return token


def hidden_input(request: HttpRequest) -> SafeString:
    """The form field of ``masked_token``."""
    return format_html('<input type="hidden" name="csrfmiddlewaretoken" value="{}">', masked_token(request))


# Made once: ``lazy`` builds a class at each call.
_lazy_token = lazy(masked_token, str)
_lazy_input = lazy(hidden_input, SafeString)


def csrf(request: HttpRequest) -> dict[str, Any]:
    """``{"csrf_token": token, "csrf_input": its hidden input}``, each computed on first print only."""
    return {"csrf_token": _lazy_token(request), "csrf_input": _lazy_input(request)}

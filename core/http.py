"""JSON API helpers shared by the apps: the envelope, sign-in and CSRF answers.

Every API answer is ``{"success": bool, "errorMsg": str | None, "data": ...}``;
failures carry their 4xx/5xx status as well (``core.errors``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.csrf import csrf_failure as django_csrf_failure

from .errors import NotSignedIn, envelope, wants_json

View = TypeVar("View", bound=Callable[..., HttpResponse])


def api_ok(data: Any = None, *, status: int = 200) -> JsonResponse:
    """Success envelope around ``data`` (any JSON-serialisable value)."""
    return envelope(data, status=status)


def api_login_required(view: View) -> View:
    """Answer 401 in the envelope (not a redirect to the sign-in page) when nobody is signed in.

    :raises NotSignedIn: turned into the 401 by ``core.errors``.
    """

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            raise NotSignedIn("Sign in first.")
        return view(request, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: a 403 in the envelope for the API, Django's page (``403_csrf.html``) elsewhere."""
    if wants_json(request):
        return envelope(message="CSRF token missing or incorrect.", status=403)
    return django_csrf_failure(request, reason=reason)

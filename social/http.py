"""JSON API helpers shared by the apps: the seed's envelope and the 4xx answers.

Every API answer is ``{"success": bool, "errorMsg": str | None, "data": ...}``
(the hmdp ``Result`` shape); failures carry a 4xx status as well.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpRequest, JsonResponse


def api_ok(data: Any = None, *, status: int = 200) -> JsonResponse:
    """Success envelope around ``data``."""
    return JsonResponse({"success": True, "errorMsg": None, "data": data}, status=status)


def api_error(message: str, *, status: int = 400) -> JsonResponse:
    """Failure envelope with ``message`` and HTTP ``status`` (4xx)."""
    return JsonResponse({"success": False, "errorMsg": message, "data": None}, status=status)


def api_login_required(view: Callable[..., Any]) -> Callable[..., Any]:
    """401 JSON (not a redirect to the sign-in page) when nobody is signed in."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        if not request.user.is_authenticated:
            return api_error("Sign in first.", status=401)
        return view(request, *args, **kwargs)

    return wrapper


def user_json(user: Any) -> dict[str, Any]:
    """The public fields of an account."""
    return {"id": user.pk, "username": user.username, "displayName": user.shown_name}


def csrf_failure(request: HttpRequest, reason: str = "") -> Any:
    """CSRF_FAILURE_VIEW: JSON 403 for the API, Django's page elsewhere."""
    if request.path.startswith("/api/"):
        return api_error("CSRF token missing or incorrect.", status=403)
    from django.views.csrf import csrf_failure as default_failure

    return default_failure(request, reason=reason)

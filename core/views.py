"""The site's error pages (``handler400`` ... ``handler500`` in ``config.urls``), and the API's
OpenAPI document.

Pages get ``<status>.html`` in the site's layout; the API's URL space and
JSON clients get the envelope (``core.errors``).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.views.decorators.http import require_safe

from .errors import SERVER_ERROR_MESSAGE, envelope, error_response, response_for_exception, wants_json


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """400 for requests Django itself refused (a bad Host header, a malformed upload); 413 for a
    body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` that a middleware read first (the CSRF check of a
    form post), as a view's own reading of it answers (``core.errors``)."""
    if isinstance(exception, RequestDataTooBig):
        return response_for_exception(request, exception) or error_response(
            request, status=413, message="The request is too large."
        )
    return error_response(request, status=400, message="The request could not be understood.")


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """403 for a ``PermissionDenied`` raised outside the error middleware (the admin, decorators)."""
    return error_response(request, status=403, message="You are not allowed to do this.")


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """404 for an unknown URL or a ``Http404``."""
    return error_response(request, status=404, message="There is no page at this address.")


def server_error(request: HttpRequest) -> HttpResponse:
    """500: the envelope for the API, else ``500.html`` rendered without a request context
    (the failure may be in a context processor or the database)."""
    if wants_json(request):
        return envelope(message=SERVER_ERROR_MESSAGE, status=500)
    return HttpResponse(render_to_string("500.html", {"message": SERVER_ERROR_MESSAGE}), status=500)


@cache
def api_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of the JSON API (``OPENAPI_DOCUMENT``, YAML), read once per process."""
    loaded: dict[str, Any] = yaml.safe_load(Path(settings.OPENAPI_DOCUMENT).read_text(encoding="utf-8"))
    return loaded


@require_safe
def api_schema(request: HttpRequest) -> JsonResponse:
    """GET /api/schema: the OpenAPI document as JSON (not in the envelope: tools read it as is)."""
    return JsonResponse(api_document(), json_dumps_params={"ensure_ascii": False})


@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    """/metrics: the Prometheus exposition (``core.monitoring``) for a scraper holding the
    token or at an allowed address; else 401 (404 when neither is configured), ``{"error": ...}``."""
    from prometheus_client import CONTENT_TYPE_LATEST

    from . import monitoring, outbox

    refusal = monitoring.scrape_refusal(request)
    if refusal is not None:
        status, message = refusal
        response = JsonResponse({"error": message}, status=status)
        if status == 401:
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(monitoring.render(kinds=outbox.kind_names()), content_type=CONTENT_TYPE_LATEST)

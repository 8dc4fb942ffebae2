"""Domain errors and the one place that turns them (and every other failure) into a response.

Services raise ``DomainError`` subclasses (a message for people, an HTTP status);
``DomainErrorMiddleware`` answers the API envelope under ``/api/`` or for JSON clients (a fixed
sentence for a 500, logged), else the site's ``<status>.html``. Envelope: docs/api.md#json-api.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse
from django.template import TemplateDoesNotExist
from django.template.loader import render_to_string

from .responses import JsonResponse
from .transactions import is_retryable

logger = logging.getLogger(__name__)

API_PREFIX = "/api/"
SERVER_ERROR_MESSAGE = "Something went wrong on our side; nothing you sent was lost. Try again in a moment."


class DomainError(Exception):
    """A request that cannot be done, with a message for people and its HTTP ``status``.

    Subclasses set ``status``; an instance may override it.
    """

    status = 400

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status


class InvalidInput(DomainError):
    """Malformed or out-of-range input (HTTP 400)."""

    status = 400


class NotSignedIn(DomainError):
    """The action needs a signed-in account (HTTP 401)."""

    status = 401


class Forbidden(DomainError):
    """The signed-in account may not do this (HTTP 403)."""

    status = 403


class NotFound(DomainError):
    """No such object, or not visible to this account (HTTP 404)."""

    status = 404


class Conflict(DomainError):
    """The request conflicts with the current state (HTTP 409)."""

    status = 409


class EntryNotApplied(RuntimeError):
    """An outbox handler could not apply some entries now; the drain then applies the batch one by one,
    and only those that raise again stay pending.
    """


def wants_json(request: HttpRequest) -> bool:
    """Whether ``request`` is answered in the JSON envelope: the API's URL space, or ``Accept: application/json``."""
    return request.path.startswith(API_PREFIX) or request.headers.get("Accept", "").startswith("application/json")


def envelope(data: Any = None, *, message: str | None = None, status: int = 200) -> JsonResponse:
    """The API envelope ``{"success", "errorMsg", "data"}``: success when ``message`` is None."""
    return JsonResponse({"success": message is None, "errorMsg": message, "data": data}, status=status)


def error_page(request: HttpRequest, *, status: int, message: str, back: tuple[str, str] | None = None) -> HttpResponse:
    """The site's error page for ``status`` (``<status>.html``, else ``400.html``) showing ``message``
    and, when given, a link ``back = (url, label)`` to the page the request came from."""
    context = {"status": status, "message": message, "request": request, "back": back}
    try:
        html = render_to_string(f"{status}.html", context, request=request)
    except TemplateDoesNotExist:
        html = render_to_string("400.html", context, request=request)
    return HttpResponse(html, status=status)


def error_response(
    request: HttpRequest, *, status: int, message: str, retry_after: int | None = None, back: tuple[str, str] | None = None
) -> HttpResponse:
    """The answer to a failed request: the envelope for JSON clients, the error page otherwise
    (with ``Retry-After`` in seconds when given, for a 429; ``back`` as for ``error_page``)."""
    response = (
        envelope(message=message, status=status)
        if wants_json(request)
        else error_page(request, status=status, message=message, back=back)
    )
    if retry_after is not None:
        response["Retry-After"] = str(retry_after)
    return response


@dataclass(frozen=True)
class Failure:
    """How a failed request is answered: ``status``, a ``message`` for people and, when the client
    should wait before trying again, ``retry_after`` seconds."""

    status: int
    message: str
    retry_after: int | None = None


def failure_of(request: HttpRequest, exc: BaseException) -> Failure | None:
    """The ``Failure`` ``exc`` raised by a view is, or None for an unexpected one (a bug: a 500).

    Domain errors, ``Http404``, ``PermissionDenied``: their status; an oversized body 413; other
    ``SuspiciousOperation`` 400; a deadlock or lock wait past its retries 503 with ``Retry-After``.
    """
    if isinstance(exc, DomainError):
        return Failure(exc.status, exc.message, getattr(exc, "retry_after", None))
    if isinstance(exc, Http404):
        return Failure(404, "Not found.")
    if isinstance(exc, PermissionDenied):
        return Failure(403, "You are not allowed to do this.")
    if isinstance(exc, RequestDataTooBig):
        return Failure(
            413, f"The request body is larger than the {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes this site takes."
        )
    if isinstance(exc, SuspiciousOperation):  # a malformed request, as Django itself answers it
        return Failure(400, STATUS_MESSAGES[400])
    if is_retryable(exc):
        # A write that lost every retry against concurrent ones: nothing was written.
        logger.warning("%s %s: %r after every retry", request.method, request.path, exc)
        return Failure(503, STATUS_MESSAGES[503], retry_after=1)
    return None


def response_for_exception(request: HttpRequest, exc: BaseException) -> HttpResponse | None:
    """The response for ``exc`` raised by a view (``failure_of``), or None to let Django handle it:
    anything unexpected in the API is a logged 500 envelope (pages keep Django's 500)."""
    failure = failure_of(request, exc)
    if failure is not None:
        return error_response(request, status=failure.status, message=failure.message, retry_after=failure.retry_after)
    if wants_json(request):
        logger.exception("unhandled error in %s %s", request.method, request.path, exc_info=exc)  # noqa: LOG004 - exc_info is given
        return envelope(message=SERVER_ERROR_MESSAGE, status=500)
    return None


# Reasons for the failures Django answers itself, in the envelope.
STATUS_MESSAGES = {
    400: "The request could not be understood.",
    403: "You are not allowed to do this.",
    404: "There is no page at this address.",
    405: "This address does not take that method.",
    413: "The request is too large.",
    503: "The site is busy with other changes to the same accounts; try again.",
    500: SERVER_ERROR_MESSAGE,
}


class DomainErrorMiddleware:
    """Turns exceptions raised by views into responses (``response_for_exception``), and gives a
    JSON client's failure that Django answered in plain text (a 405 from a method decorator) the
    envelope."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            response.status_code >= 400
            and wants_json(request)
            and not response.get("Content-Type", "").startswith("application/json")
        ):
            replaced = envelope(
                message=STATUS_MESSAGES.get(response.status_code, "The request failed."), status=response.status_code
            )
            for header in ("Allow", "Retry-After"):
                if header in response:
                    replaced[header] = response[header]
            return replaced
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        return response_for_exception(request, exception)

"""JSON API helpers shared by the apps: the envelope, sign-in and CSRF answers.

Every API answer is ``{"success": bool, "errorMsg": str | None, "data": ...}``;
failures carry their 4xx/5xx status as well (``core.errors``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache, wraps
from typing import Any, TypeVar
from urllib.parse import quote

from django.core.exceptions import BadRequest
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect, JsonResponse
from django.urls import NoReverseMatch, reverse
from django.views.csrf import csrf_failure as django_csrf_failure

from .errors import NotSignedIn, envelope, wants_json
from .parsing import id_or_none

View = TypeVar("View", bound=Callable[..., HttpResponse])

# A value every route's converter takes (a string and an id alike), found once in the reversed path.
_PLACEHOLDER = "4815162342"
# The characters ``django.urls.reverse`` leaves unquoted in a path.
_PATH_SAFE = "!$&'()*+,;=/~:@"
_route_templates: dict[str, tuple[str, str]] = {}


def path_of(route: str, value: Any) -> str:
    """The path of ``route`` (a URL name taking one argument) for ``value``, as ``reverse`` gives it,
    with the route reversed once per process (a page of 50 rows would reverse 50 times).

    :raises django.urls.NoReverseMatch: ``route`` takes no single argument.
    """
    found = _route_templates.get(route)
    if found is None:
        head, placeholder, tail = reverse(route, args=[_PLACEHOLDER]).partition(_PLACEHOLDER)
        if not placeholder or _PLACEHOLDER in tail:
            raise NoReverseMatch(f"{route} does not place its one argument once in its path")
        found = _route_templates[route] = (head, tail)
    return f"{found[0]}{_quoted(str(value))}{found[1]}"


@lru_cache(maxsize=8192)
def _quoted(text: str) -> str:
    # A page links each account several times (its profile, mute, block): quoted once.
    return quote(text, safe=_PATH_SAFE)


_route_paths: dict[str, str] = {}


def route_path(route: str) -> str:
    """The path of ``route`` (a URL name taking no argument), reversed once per process.

    :raises django.urls.NoReverseMatch: ``route`` needs an argument or is unknown.
    """
    found = _route_paths.get(route)
    if found is None:
        found = _route_paths[route] = reverse(route)
    return found


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


def redirect_to_canonical(request: HttpRequest, view_name: str, **kwargs: str) -> HttpResponse:
    """A permanent redirect to ``view_name`` with ``kwargs`` (the stored spelling of a name asked
    for in another case), keeping the query string."""
    url = reverse(view_name, kwargs=kwargs)
    query = request.META.get("QUERY_STRING", "")
    return HttpResponsePermanentRedirect(f"{url}?{query}" if query else url)


class IdConverter:
    """The ``<id:...>`` path converter: an id by ``core.parsing.parse_id``'s rules ("011", "²" and
    ids past BIGINT do not match, so the URL is a 404)."""

    regex = "[1-9][0-9]{0,18}"

    def to_python(self, value: str) -> int:
        parsed = id_or_none(value)
        if parsed is None:
            raise ValueError(value)  # no match: Django tries the next pattern, then answers 404
        return parsed

    def to_url(self, value: int) -> str:
        return str(int(value))


def with_retry_after(response: HttpResponse, error: Exception) -> HttpResponse:
    """``response`` with a ``Retry-After`` header (seconds) when ``error`` is a limit that lifts."""
    retry_after = getattr(error, "retry_after", None)
    if retry_after is not None:
        response["Retry-After"] = str(retry_after)
    return response


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: a 403 in the envelope for the API, the site's page (``403_csrf.html``)
    elsewhere, both saying Django's reason (a missing token, or an origin that is not trusted:
    behind a TLS proxy, ``DJANGO_CSRF_TRUSTED_ORIGINS`` and the proxy header)."""
    if wants_json(request):
        return envelope(message=f"Request refused by the CSRF check: {(reason or 'no reason given').rstrip('.')}.", status=403)
    return django_csrf_failure(request, reason=reason)


class ContentLengthMiddleware:
    """Answers 400 (``handler400``, or the envelope for a JSON client) to a request whose
    Content-Length header is not a number of bytes (RFC 9110 section 8.6: digits), before the
    middleware after it reads the header (django-prometheus's request metrics parse it as an int).
    Gunicorn refuses such a request itself; Django's own server passes it on. The 400 is not in
    django-prometheus's counts of answers by status: its middleware never sees the request."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        # Spaces and tabs around a value are not part of it (RFC 9110 section 5.5); empty counts as
        # absent: some WSGI servers set it so for a request without a body.
        length = (request.headers.get("content-length") or "").strip(" \t")
        if length and not (length.isascii() and length.isdigit()):
            raise BadRequest("The Content-Length header is not a number of bytes.")
        return self.get_response(request)

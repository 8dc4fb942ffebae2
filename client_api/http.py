"""The plumbing of every Mastodon endpoint: the bearer token, the scope it needs, the request's
parameters from a query, a form or a JSON body, Mastodon's paging parameters, and failures as
``{"error": "..."}`` with Mastodon's statuses (never the site's envelope or page)."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from io import BytesIO
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.http.multipartparser import MultiPartParser, MultiPartParserError
from django.views.decorators.csrf import csrf_exempt
from oauth2_provider.models import AccessToken

from core.errors import failure_of
from core.parsing import parse_json_object
from core.responses import JsonResponse
from users.models import User

from .scopes import allows
from .selectors import access_token

logger = logging.getLogger(__name__)

INVALID_TOKEN = "The access token is invalid"  # noqa: S105 - an error message, not a secret
OUT_OF_SCOPE = "This action is outside the authorized scopes"
NEEDS_USER = "This method requires an authenticated user"
DISABLED = "Your login is currently disabled"


class ApiError(Exception):
    """A Mastodon error: ``message`` for ``{"error": ...}`` and its HTTP ``status``."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def error(message: str, status: int) -> JsonResponse:
    """``{"error": message}`` with ``status``."""
    return JsonResponse({"error": message}, status=status)


PAGING_ID = re.compile(r"-?[0-9]+")
# The words of a boolean parameter (Mastodon.py sends "1" and "0").
TRUE_WORDS = frozenset({"1", "true", "t", "on", "yes"})
FALSE_WORDS = frozenset({"0", "false", "f", "off", "no"})


@dataclass
class Call:
    """One API request: the ``request``, its ``token`` (None: anonymous) and ``user`` (None: an
    application's own token or anonymous), and its parameters (``params``)."""

    request: HttpRequest
    token: AccessToken | None
    user: User | None
    params: dict[str, Any]

    @property
    def me(self) -> User:
        """The signed-in account (the endpoint declared it needs one)."""
        assert self.user is not None
        return self.user

    def get(self, name: str, default: Any = None) -> Any:
        """The parameter ``name`` (``name[]`` too), the last value of a repeated one."""
        value = self.params.get(name, self.params.get(f"{name}[]", default))
        return value[-1] if isinstance(value, list) and value else value

    def get_list(self, name: str) -> list[str]:
        """Every value of ``name`` or ``name[]`` (a JSON list, a repeated form/query key)."""
        value = self.params.get(f"{name}[]", self.params.get(name, []))
        if value is None:
            return []
        return [str(item) for item in (value if isinstance(value, list) else [value])]

    def id_param(self, name: str) -> int | None:
        """A Mastodon paging id parameter (absent or empty: None); any integer, as Mastodon takes one.

        :raises ApiError: not an integer (400).
        """
        raw = self.get(name)
        if raw in (None, ""):
            return None
        text = str(raw).strip()
        # ASCII digits only: str.isdigit() takes "²" and "٣", which int() refuses or reads as 3.
        if not PAGING_ID.fullmatch(text) or len(text) > 20:
            raise ApiError(f"{name} must be an id", 400)
        return int(text)

    def limit(self, default: int, maximum: int) -> int:
        """``limit``: Mastodon clamps it to 1..``maximum``; a non-number is a 400."""
        raw = self.get("limit")
        if raw in (None, ""):
            return default
        try:
            value = int(str(raw))
        except ValueError:
            raise ApiError("limit must be a number", 400) from None
        return max(1, min(value, maximum))

    def flag(self, name: str, default: bool = False) -> bool:
        """A boolean parameter: JSON ``true``/``false``, or ``1``/``true``/``t``/``on``/``yes`` and
        ``0``/``false``/``f``/``off``/``no`` in any case (absent or empty: ``default``).

        :raises ApiError: anything else, such as ``maybe`` or an object (422).
        """
        raw = self.get(name)
        if raw is None or raw == "":
            return default
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, (str, int)):
            word = str(raw).lower()
            if word in TRUE_WORDS:
                return True
            if word in FALSE_WORDS:
                return False
        raise ApiError(f"Validation failed: {name} must be true or false", 422)

    def text(self, name: str) -> str | None:
        """A text parameter (a JSON integer is taken as its digits); None when absent.

        :raises ApiError: an object, a list (a repeated or ``name[]`` form key too), a boolean
            or a fraction (422).
        """
        raw = self.params.get(name, self.params.get(f"{name}[]"))
        if raw is None or isinstance(raw, str):
            return raw
        if isinstance(raw, int) and not isinstance(raw, bool):
            return str(raw)
        raise ApiError(f"Validation failed: {name} must be text", 422)


def _flat(query: QueryDict) -> dict[str, Any]:
    # One value per key, except a repeated key or a ``name[]`` one (a list).
    return {key: values if len(values) > 1 or key.endswith("[]") else values[0] for key, values in query.lists()}


def request_params(request: HttpRequest) -> dict[str, Any]:
    """The query, form and JSON body parameters of ``request`` merged (the body wins); a GET may
    carry a JSON body too (Mastodon.py's ``familiar_followers`` does)."""
    params = _flat(request.GET)
    if request.content_type == "application/json" and request.body:
        params.update(parse_json_object(request.body))
    elif request.method == "POST" and request.content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
        params.update(_flat(request.POST))
    elif request.method not in ("GET", "HEAD") and request.content_type == "application/x-www-form-urlencoded":
        # Django parses a form body for POST only: a PUT's or a DELETE's (Mastodon.py sends them) here.
        params.update(_flat(QueryDict(request.body)))
    elif request.method not in ("GET", "HEAD") and request.content_type == "multipart/form-data":
        try:
            form, _ = MultiPartParser(request.META, BytesIO(request.body), request.upload_handlers).parse()
        except MultiPartParserError as exc:
            raise ApiError(f"The form body is malformed: {exc}", 400) from None
        params.update(_flat(form))
    return params


def bearer(request: HttpRequest) -> str | None:
    """The bearer token of ``Authorization`` (or ``access_token`` in the query), or None."""
    header = request.headers.get("Authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    raw = request.GET.get("access_token")
    return raw or None


Handler = Callable[..., HttpResponse]


def endpoint(*methods: str, scope: str | None = None, user: bool = True, token: bool = True) -> Callable[[Handler], Handler]:
    """Make ``view(call, *args)`` an endpoint: ``methods`` only, a token with ``scope`` (when
    ``token``), a signed-in and active account (when ``user``), failures as Mastodon's errors.

    Mastodon's answers: no or a bad token 401, a token without the scope 403, an application's
    token where an account is needed 422, a deactivated account 403, unknown records 404.
    """

    def decorate(view: Handler) -> Handler:
        @csrf_exempt
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if request.method not in methods and not (request.method == "HEAD" and "GET" in methods):
                response = error("Method not allowed", 405)
                response["Allow"] = ", ".join(methods)
                return response
            if request.method == "HEAD":
                # A HEAD is its GET, read-only (the server drops the body): views branch on GET,
                # and would take any other method for a write.
                request.method = "GET"
            try:
                raw = bearer(request)
                found = access_token(raw) if raw else None
                if raw and found is None:
                    return error(INVALID_TOKEN, 401)
                if token and found is None:
                    return error(INVALID_TOKEN, 401)
                account = found.user if found is not None else None
                if account is not None and not account.is_active:
                    return error(DISABLED, 403)
                if user and account is None and token:
                    return error(NEEDS_USER, 422)
                if found is not None and scope is not None and not allows(found.scope.split(), scope):
                    return error(OUT_OF_SCOPE, 403)
                call = Call(request=request, token=found, user=account, params=request_params(request))
                return view(call, *args, **kwargs)
            except ApiError as exc:
                return error(exc.message, exc.status)
            except Http404:
                return error("Record not found", 404)  # Mastodon's sentence
            except Exception as exc:
                failure = failure_of(request, exc)
                if failure is None:
                    # Unexpected: logged with its traceback; the client gets Mastodon's shape, never the text.
                    logger.exception("unhandled error in %s %s", request.method, request.path)
                    return error("Something went wrong on our side; try again in a moment.", 500)
                response = error(failure.message, failure.status)
                if failure.retry_after is not None:
                    response["Retry-After"] = str(failure.retry_after)
                return response

        return wrapper

    return decorate


def with_link(response: JsonResponse, link: str) -> JsonResponse:
    """``response`` with the ``Link`` header ``link`` (when not empty)."""
    if link:
        response["Link"] = link
    return response


def json_list(data: list[Any]) -> JsonResponse:
    """A JSON array answer."""
    return JsonResponse(data)

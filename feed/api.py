"""The feed's JSON API; the actor is always the signed-in user.

- ``POST /api/blog`` and ``POST /api/notes``: publish (``{"body": ...}`` as
  JSON or form data); 201 with the note.
- ``GET /api/blog/of/follow?lastId=<ms>&offset=<n>[&limit=]``: the home
  timeline in the scroll contract, ``{list, minTime, offset, hasMore}``.
- ``GET /api/feed?cursor=&limit=``: the same feed with an opaque cursor,
  ``{list, next_cursor}`` (``next_cursor`` null at the end).
- ``DELETE /api/notes/<id>``: the author deletes a note.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.errors import InvalidInput, NotFound, NotSignedIn
from core.http import api_login_required, api_ok
from core.parsing import parse_id
from users.models import User
from users.serializers import user_json

from . import selectors, services
from .models import Note

MAX_LIMIT = 100


def note_json(note: Note) -> dict[str, Any]:
    """The public fields of a note; ``createdAt`` in unix ms (its feed score)."""
    return {
        "id": note.pk,
        "author": user_json(note.author),
        "body": note.body,
        "createdAt": note.published_ms,
        "url": reverse("feed:note_detail", args=[note.pk]),
    }


def _reader(request: HttpRequest) -> User:
    assert isinstance(request.user, User)  # api_login_required ran
    return request.user


def _limit(request: HttpRequest) -> int:
    raw = request.GET.get("limit", str(settings.FEED_PAGE_SIZE))
    if not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_LIMIT}.")
    return int(raw)


def _body(request: HttpRequest) -> str:
    if request.content_type == "application/json":
        try:
            data = json.loads(request.body or b"null")
        except (ValueError, UnicodeDecodeError):
            raise InvalidInput("The request body is not valid JSON.") from None
        if not isinstance(data, dict):
            raise InvalidInput("The request body must be a JSON object.")
        body = data.get("body", data.get("content"))
    else:
        body = request.POST.get("body", request.POST.get("content"))
    if not isinstance(body, str):
        raise InvalidInput("body must be a string.")
    return body


@require_POST
@api_login_required
def note_create(request: HttpRequest) -> JsonResponse:
    """POST /api/blog, /api/notes: publish a note as the signed-in user (201)."""
    author = _reader(request)
    note = services.note_create(author=author, body=_body(request))
    note.author = author  # the signed-in author, no query
    return api_ok(note_json(note), status=201)


@require_GET
@api_login_required
def feed_scroll(request: HttpRequest) -> JsonResponse:
    """GET /api/blog/of/follow?lastId=&offset=&limit=: home timeline, scroll contract."""
    last_id, offset = selectors.parse_scroll(request.GET.get("lastId"), request.GET.get("offset"))
    page = selectors.home_timeline_scroll(user_id=_reader(request).pk, last_id=last_id, offset=offset, limit=_limit(request))
    return api_ok(
        {
            "list": [note_json(note) for note in page.notes],
            "minTime": page.min_time,
            "offset": page.offset,
            "hasMore": page.has_more,
            "catchingUp": page.catching_up,
        }
    )


@require_GET
@api_login_required
def feed_page(request: HttpRequest) -> JsonResponse:
    """GET /api/feed?cursor=&limit=: home timeline with an opaque cursor."""
    page = selectors.home_timeline(user_id=_reader(request).pk, cursor=request.GET.get("cursor"), limit=_limit(request))
    return api_ok(
        {"list": [note_json(note) for note in page.notes], "next_cursor": page.next_cursor, "catchingUp": page.catching_up}
    )


@require_http_methods(["GET", "DELETE"])
def note_item(request: HttpRequest, raw_id: str) -> JsonResponse:
    """GET /api/notes/<id>: a visible note (public). DELETE: the author deletes it."""
    note_id = parse_id(raw_id, name="Note id")
    if request.method == "DELETE":
        if not isinstance(request.user, User):
            raise NotSignedIn("Sign in first.")
        deleted = Note.objects.filter(pk=note_id, deleted_at__isnull=True).first()
        if deleted is None:
            raise NotFound("No such note.")
        services.note_delete(note=deleted, actor=request.user)
        return api_ok({"deleted": True})
    note = selectors.note_detail(note_id=note_id)
    if note is None:
        raise NotFound("No such note.")
    return api_ok(note_json(note))

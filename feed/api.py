"""The feed's JSON API in the seed's style; the actor is always the signed-in user.

- ``POST /api/blog`` and ``POST /api/notes``: publish (``{"body": ...}`` as
  JSON or form data); 201 with the note.
- ``GET /api/blog/of/follow?lastId=<ms>&offset=<n>[&limit=]``: the home
  timeline in the seed's scroll contract, ``{list, minTime, offset, hasMore}``.
- ``GET /api/feed?cursor=&limit=``: the same feed with an opaque cursor,
  ``{list, next_cursor}`` (``next_cursor`` null at the end).
- ``DELETE /api/notes/<id>``: the author deletes a note.
"""

from __future__ import annotations

import json
from typing import Any, cast

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from social.http import api_error, api_login_required, api_ok, user_json

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


def _reader_id(request: HttpRequest) -> int:
    user_id = request.user.pk
    assert isinstance(user_id, int)  # api_login_required ran
    return user_id


def _limit(request: HttpRequest) -> int:
    raw = request.GET.get("limit", str(settings.FEED_PAGE_SIZE))
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
        raise ValueError(f"limit must be an integer from 1 to {MAX_LIMIT}.")
    return int(raw)


def _body(request: HttpRequest) -> Any:
    if request.content_type == "application/json":
        try:
            data = json.loads(request.body or b"null")
        except (ValueError, UnicodeDecodeError):
            raise ValueError("The request body is not valid JSON.") from None
        if not isinstance(data, dict):
            raise ValueError("The request body must be a JSON object.")
        body = data.get("body", data.get("content"))
    else:
        body = request.POST.get("body", request.POST.get("content"))
    if not isinstance(body, str):
        raise ValueError("body must be a string.")
    return body


@require_POST
@api_login_required
def note_create(request: HttpRequest) -> JsonResponse:
    """POST /api/blog, /api/notes: publish a note as the signed-in user (201)."""
    try:
        note = services.note_create(author=request.user, body=_body(request))
    except ValueError as exc:
        return api_error(str(exc), status=400)
    except services.NoteError as exc:
        return api_error(exc.message, status=exc.status)
    note.author = cast(Any, request.user)  # the signed-in author, no query
    return api_ok(note_json(note), status=201)


@require_GET
@api_login_required
def feed_scroll(request: HttpRequest) -> JsonResponse:
    """GET /api/blog/of/follow?lastId=&offset=&limit=: home timeline, scroll contract."""
    try:
        last_id, offset = selectors.parse_scroll(request.GET.get("lastId"), request.GET.get("offset"))
        page = selectors.home_timeline_scroll(user_id=_reader_id(request), last_id=last_id, offset=offset, limit=_limit(request))
    except ValueError as exc:
        return api_error(str(exc), status=400)
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
    try:
        page = selectors.home_timeline(user_id=_reader_id(request), cursor=request.GET.get("cursor"), limit=_limit(request))
    except ValueError as exc:  # InvalidCursorError is a ValueError
        return api_error(str(exc), status=400)
    return api_ok(
        {"list": [note_json(note) for note in page.notes], "next_cursor": page.next_cursor, "catchingUp": page.catching_up}
    )


@require_http_methods(["GET", "DELETE"])
def note_item(request: HttpRequest, raw_id: str) -> JsonResponse:
    """GET /api/notes/<id>: a visible note (public). DELETE: the author deletes it."""
    if not raw_id.isdigit() or len(raw_id) > 18 or int(raw_id) == 0:
        return api_error("Note id must be a positive integer.", status=400)
    if request.method == "DELETE":
        if not request.user.is_authenticated:
            return api_error("Sign in first.", status=401)
        return _note_delete(request, int(raw_id))
    note = selectors.note_detail(note_id=int(raw_id))
    if note is None:
        return api_error("No such note.", status=404)
    return api_ok(note_json(note))


def _note_delete(request: HttpRequest, note_id: int) -> JsonResponse:
    note = Note.objects.filter(pk=note_id, deleted_at__isnull=True).first()
    if note is None:
        return api_error("No such note.", status=404)
    try:
        services.note_delete(note=note, actor=request.user)
    except services.NoteError as exc:
        return api_error(exc.message, status=exc.status)
    return api_ok({"deleted": True})

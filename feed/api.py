"""The feed's JSON API (``/api/blog``, ``/api/notes``, ``/api/blog/of/follow``, ``/api/feed``); the
actor is always the signed-in user. Routes and shapes: docs/api.md#json-api.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from core.errors import NotFound, NotSignedIn
from core.http import api_login_required, api_ok, path_of
from core.paging import feed_cursor
from core.parsing import parse_id, parse_json_object, parse_limit, parse_scroll, parse_text
from social import visibility
from users.models import User
from users.serializers import user_json

from . import selectors, services
from .models import Note
from .paging import FeedNote

MAX_LIMIT = 100


def note_json(note: Note | FeedNote) -> dict[str, Any]:
    """The public fields of a note (a model instance, or a home timeline's ``FeedNote``):
    ``{"id", "author": user_json, "body", "createdAt": unix ms (its feed score), "url"}``."""
    return {
        "id": note.pk,
        "author": user_json(note.author),
        "body": note.body,
        "createdAt": note.published_ms,
        "url": path_of("feed:note_detail", note.pk),
    }


def _reader(request: HttpRequest) -> User:
    assert isinstance(request.user, User)  # api_login_required ran
    return request.user


def _limit(request: HttpRequest) -> int:
    return parse_limit(request.GET.get("limit"), default=int(settings.FEED_PAGE_SIZE), maximum=MAX_LIMIT)


def _body(request: HttpRequest) -> str:
    """The note's text from a JSON object or a form (``body``, or ``content`` as the seed's clients send)."""
    if request.content_type == "application/json":
        data = parse_json_object(request.body)
        raw = data.get("body", data.get("content"))
    else:
        raw = request.POST.get("body", request.POST.get("content"))
    return parse_text(raw, name="body", max_length=int(settings.NOTE_MAX_LENGTH))


@require_POST
@api_login_required
def note_create(request: HttpRequest) -> JsonResponse:
    """POST /api/blog, /api/notes: publish a note as the signed-in user (201)."""
    author = _reader(request)
    note = services.note_create(author=author, body=_body(request))
    note.author = author  # the signed-in author, no query
    return api_ok(note_json(note), status=201)


@require_safe
@api_login_required
def feed_scroll(request: HttpRequest) -> JsonResponse:
    """GET /api/blog/of/follow?lastId=&offset=&limit=: home timeline, scroll contract."""
    last_id, offset = parse_scroll(request.GET.get("lastId"), request.GET.get("offset"))
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


@require_safe
@api_login_required
def feed_page(request: HttpRequest) -> JsonResponse:
    """GET /api/feed?cursor=&limit=: home timeline with an opaque cursor."""
    page = selectors.home_timeline(
        user_id=_reader(request).pk, cursor=feed_cursor(request.GET.get("cursor")), limit=_limit(request)
    )
    next_cursor = str(page.next_cursor) if page.next_cursor else None
    return api_ok({"list": [note_json(note) for note in page.notes], "next_cursor": next_cursor, "catchingUp": page.catching_up})


@require_http_methods(["GET", "HEAD", "DELETE"])
def note_item(request: HttpRequest, raw_id: str) -> JsonResponse:
    """GET /api/notes/<id>: a visible note (404 when its author blocks you, 403 for a private
    author's note to a non-follower). DELETE: the author deletes it."""
    note_id = parse_id(raw_id, name="Note id")
    if request.method == "DELETE":
        if not isinstance(request.user, User):
            raise NotSignedIn("Sign in first.")
        deleted = Note.objects.filter(pk=note_id, deleted_at__isnull=True).first()
        if deleted is None:
            raise NotFound("No such note.")
        services.note_delete(note=deleted, actor=request.user)
        return api_ok({"deleted": True})
    viewer = request.user if isinstance(request.user, User) else None
    note = selectors.note_detail(note_id=note_id, viewer_id=viewer.pk if viewer is not None else None)
    if note is None:
        raise NotFound("No such note.")
    visibility.require_content(viewer=viewer, user=note.author)
    return api_ok(note_json(note))

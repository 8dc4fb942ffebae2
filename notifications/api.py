"""The notifications' JSON API; the reader is always the signed-in user."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_POST, require_safe

from core.http import api_login_required, api_ok
from core.paging import notification_cursor
from core.parsing import parse_limit
from users.models import User
from users.serializers import user_json

from . import selectors, services

MAX_LIMIT = 100


def _reader(request: HttpRequest) -> User:
    assert isinstance(request.user, User)  # api_login_required ran
    return request.user


@require_safe
@api_login_required
def notifications_list(request: HttpRequest) -> JsonResponse:
    """GET /api/notifications?cursor=&limit=: the grouped lines, newest first."""
    limit = parse_limit(request.GET.get("limit"), default=int(settings.FOLLOW_PAGE_SIZE), maximum=MAX_LIMIT)
    page = selectors.groups_page(user_id=_reader(request).pk, cursor=notification_cursor(request.GET.get("cursor")), limit=limit)
    data = {
        "list": [
            {
                "kind": line.kind,
                "count": line.count,
                "text": line.text,
                "actors": [user_json(actor) for actor in line.actors],
                "updatedAt": int(line.updated_at.timestamp()),
                "unread": line.unread,
            }
            for line in page.lines
        ],
        "next_cursor": str(page.next_cursor) if page.next_cursor else None,
    }
    return api_ok(data)


@require_safe
@api_login_required
def notifications_unread(request: HttpRequest) -> JsonResponse:
    """GET /api/notifications/unread: ``{"unread": n}``."""
    return api_ok({"unread": selectors.unread_count(user_id=_reader(request).pk)})


@require_POST
@api_login_required
def notifications_read(request: HttpRequest) -> JsonResponse:
    """POST /api/notifications/read: mark every notification read; ``{"marked": n}``."""
    return api_ok({"marked": services.notifications_mark_read(recipient_id=_reader(request).pk)})

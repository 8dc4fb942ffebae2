"""The notifications page: parse input, call one selector or service, render."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST, require_safe

from core.paging import notification_cursor
from users.models import User

from . import selectors, services


def _reader(request: HttpRequest) -> User:
    assert isinstance(request.user, User)  # login_required ran
    return request.user


@require_safe
@login_required
def notifications(request: HttpRequest) -> HttpResponse:
    """/notifications/: the lines newest first with a cursor; opening the first page marks read
    every notification up to the newest it shows (one that came meanwhile stays unread)."""
    reader = _reader(request)
    cursor = notification_cursor(request.GET.get("cursor"))
    page = selectors.groups_page(user_id=reader.pk, cursor=cursor, limit=int(settings.FOLLOW_PAGE_SIZE))
    if cursor is None and page.lines:
        services.notifications_mark_read(recipient_id=reader.pk, up_to=page.lines[0].updated_at)
    return render(request, "notifications/notifications.html", {"page": page, "is_first_page": cursor is None})


@require_POST
@login_required
def mark_read(request: HttpRequest) -> HttpResponse:
    """POST /notifications/read/ (CSRF): mark every notification read."""
    services.notifications_mark_read(recipient_id=_reader(request).pk)
    return redirect("notifications:list")

"""URLs of the HTTP-under-load benchmark: the site's (``config.urls``) plus the floor at
``/bench/floor`` and the data floor at ``/bench/data-floor``.

The floor is the least a Django view can do (a fixed two-byte answer, no
database, no Redis, no template), served by the same gunicorn through the
same middleware as every page, so a page's requests per second divided by
the floor's is the share of the framework's ceiling the page reaches.

The data floor is the least a signed-in JSON page of the home feed can do
under the design (docs/performance.md#the-data-floor): the session and the
account (as every signed-in request reads them), one Redis read of the
reader's inbox, one database query over the page's notes (the check that
invariant 10 asks of every page) and a small JSON answer; no other logic.
"""

from typing import Any

from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.urls import path

from config.urls import handler400, handler403, handler404, handler500
from config.urls import urlpatterns as site_urlpatterns
from core.redis import redis_or_database
from core.responses import JsonResponse
from core.sql import id_list
from feed.models import Note
from feed.redis_keys import inbox_key

__all__ = ["handler400", "handler403", "handler404", "handler500", "urlpatterns"]

# Rows of the data floor's page, as the JSON feed's first page.
DATA_FLOOR_ROWS = 20


def floor(request: HttpRequest) -> HttpResponse:
    """GET /bench/floor: ``ok`` as text/plain (200)."""
    return HttpResponse(b"ok", content_type="text/plain")


def data_floor(request: HttpRequest) -> HttpResponse:
    """GET /bench/data-floor (signed in; 403 otherwise): ``{"success": true, "data": [{"id",
    "authorId", "publishedMs"}, ...]}`` of the newest ``DATA_FLOOR_ROWS`` notes of the reader's
    inbox, newest first (none while Redis is unavailable)."""
    user = request.user
    if not user.is_authenticated:
        return JsonResponse({"success": False}, status=403)
    key = inbox_key(user.pk)
    # An inbox's scores are its notes' publish times (unix ms).
    members: list[Any] = redis_or_database(
        lambda client: client.zrevrange(key, 0, DATA_FLOOR_ROWS - 1, withscores=True), list, keys=[key]
    )
    scored = [(int(member), int(score)) for member, score in members]
    authors: dict[int, int] = {}
    if scored:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT id, author_id FROM {Note._meta.db_table} WHERE id IN ({id_list([note_id for note_id, _ in scored])})"
            )
            authors = {int(note_id): int(author_id) for note_id, author_id in cursor.fetchall()}
    data = [
        {"id": str(note_id), "authorId": str(authors[note_id]), "publishedMs": published_ms}
        for note_id, published_ms in scored
        if note_id in authors
    ]
    return JsonResponse({"success": True, "data": data})


urlpatterns = [
    path("bench/floor", floor, name="bench_floor"),
    path("bench/data-floor", data_floor, name="bench_data_floor"),
    *site_urlpatterns,
]

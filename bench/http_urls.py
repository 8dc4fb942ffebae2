"""URLs of the HTTP-under-load benchmark: the site's (``config.urls``) plus the floor at ``/bench/floor``.

The floor is the least a Django view can do (a fixed two-byte answer, no
database, no Redis, no template), served by the same gunicorn through the
same middleware as every page, so a page's requests per second divided by
the floor's is the share of the framework's ceiling the page reaches.
"""

from django.http import HttpRequest, HttpResponse
from django.urls import path

from config.urls import handler400, handler403, handler404, handler500
from config.urls import urlpatterns as site_urlpatterns

__all__ = ["handler400", "handler403", "handler404", "handler500", "urlpatterns"]


def floor(request: HttpRequest) -> HttpResponse:
    """GET /bench/floor: ``ok`` as text/plain (200)."""
    return HttpResponse(b"ok", content_type="text/plain")


urlpatterns = [path("bench/floor", floor, name="bench_floor"), *site_urlpatterns]

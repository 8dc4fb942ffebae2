"""The project's URLs, and the handlers that render the site's error pages."""

from django.contrib import admin
from django.urls import include, path

from core.views import api_schema, metrics

handler400 = "core.views.bad_request"
handler403 = "core.views.permission_denied"
handler404 = "core.views.page_not_found"
handler500 = "core.views.server_error"

urlpatterns = [
    # The most loaded pages first: Django tries the patterns in order and records every one that
    # failed, so each pattern ahead of a page costs that page. No two of these match the same
    # path (tests/core/test_urls.py), so the order changes no answer.
    path("", include("feed.urls")),
    path("", include("social.urls")),
    path("api/", include("feed.api_urls")),
    path("api/", include("social.api_urls")),
    path("api/", include("notifications.api_urls")),
    # The Mastodon client API: /api/v1 and /api/v2 (its not-found answer for either included), /oauth.
    path("", include("client_api.urls")),
    path("", include("notifications.urls")),
    path("", include("users.urls")),
    path("api/schema", api_schema, name="api_schema"),
    path("metrics", metrics, name="metrics"),
    path("admin/", admin.site.urls),
]

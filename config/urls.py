"""The project's URLs, and the handlers that render the site's error pages."""

from django.contrib import admin
from django.urls import include, path

from core.views import api_schema, metrics

handler400 = "core.views.bad_request"
handler403 = "core.views.permission_denied"
handler404 = "core.views.page_not_found"
handler500 = "core.views.server_error"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/schema", api_schema, name="api_schema"),
    path("metrics", metrics, name="metrics"),
    # The Mastodon client API first: its /api/v1 and /api/v2 are its own, /api/<rest> is followfeed's.
    path("", include("client_api.urls")),
    path("api/", include("feed.api_urls")),
    path("api/", include("social.api_urls")),
    path("api/", include("notifications.api_urls")),
    path("", include("feed.urls")),
    path("", include("social.urls")),
    path("", include("notifications.urls")),
    path("", include("users.urls")),
]

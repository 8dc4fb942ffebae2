from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("feed.api_urls")),
    path("api/", include("social.api_urls")),
    path("", include("feed.urls")),
    path("", include("social.urls")),
    path("", include("users.urls")),
]

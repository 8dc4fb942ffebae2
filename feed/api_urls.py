from django.urls import path

from . import api

app_name = "feed_api"

urlpatterns = [
    path("blog", api.note_create, name="blog_create"),
    path("blog/of/follow", api.feed_scroll, name="feed_scroll"),
    path("notes", api.note_create, name="note_create"),
    path("notes/<str:raw_id>", api.note_item, name="note_item"),
    path("feed", api.feed_page, name="feed"),
]

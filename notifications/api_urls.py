from django.urls import path

from . import api

app_name = "notifications_api"

urlpatterns = [
    path("notifications", api.notifications_list, name="list"),
    path("notifications/unread", api.notifications_unread, name="unread"),
    path("notifications/read", api.notifications_read, name="read"),
]

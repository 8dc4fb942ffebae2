from django.urls import path

from . import views

app_name = "notifications"

urlpatterns = [
    path("notifications/", views.notifications, name="list"),
    path("notifications/read/", views.mark_read, name="read"),
]

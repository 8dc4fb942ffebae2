from django.urls import path

from . import views

app_name = "social"

urlpatterns = [
    path("", views.directory, name="directory"),
    path("u/<str:username>/followers/", views.followers, name="followers"),
    path("u/<str:username>/following/", views.following, name="following"),
    path("u/<str:username>/follow/", views.follow, name="follow"),
    path("u/<str:username>/unfollow/", views.unfollow, name="unfollow"),
    path("u/<str:username>/block/", views.block, name="block"),
    path("u/<str:username>/unblock/", views.unblock, name="unblock"),
    path("u/<str:username>/mute/", views.mute, name="mute"),
    path("u/<str:username>/unmute/", views.unmute, name="unmute"),
    path("u/<str:username>/remove-follower/", views.remove_follower, name="remove_follower"),
    path("requests/", views.follow_requests, name="follow_requests"),
    path("suggestions/", views.suggestions, name="suggestions"),
    path("requests/<str:username>/<str:decision>/", views.follow_request_decide, name="follow_request_decide"),
    path("settings/privacy/", views.privacy_settings, name="settings"),
    path("settings/follows/", views.follows_transfer, name="follows_transfer"),
    path("settings/follows/export.csv", views.follows_export_download, name="follows_export"),
]

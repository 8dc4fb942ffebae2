from django.urls import path

from . import api

app_name = "social_api"

urlpatterns = [
    path("follow/or/not/<str:raw_id>", api.follow_or_not, name="follow_or_not"),
    path("follow/common/<str:raw_id>", api.follow_common, name="follow_common"),
    path("follow/<str:raw_id>/<str:flag>", api.follow_toggle, name="follow_toggle"),
    path("block/<str:raw_id>/<str:flag>", api.block_toggle, name="block_toggle"),
    path("mute/<str:raw_id>/<str:flag>", api.mute_toggle, name="mute_toggle"),
    path("followers/<str:raw_id>", api.follower_remove, name="follower_remove"),
    path("follow-requests", api.follow_requests, name="follow_requests"),
    path("follow-requests/<str:raw_id>/<str:decision>", api.follow_request_decide, name="follow_request_decide"),
    path("me/settings", api.me_settings, name="me_settings"),
    path("suggestions", api.suggestions, name="suggestions"),
    path("follows/export.csv", api.follows_export, name="follows_export"),
    path("follows/import", api.follows_import, name="follows_import"),
    path("follows/import/<str:raw_id>", api.follows_import_status, name="follows_import_status"),
    path("users/<str:raw_id>", api.user_detail, name="user_detail"),
    path("users/<str:raw_id>/followers", api.followers_list, name="followers"),
    path("users/<str:raw_id>/following", api.following_list, name="following"),
]

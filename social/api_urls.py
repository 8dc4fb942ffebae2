from django.urls import path

from . import api

app_name = "social_api"

urlpatterns = [
    path("follow/or/not/<str:raw_id>", api.follow_or_not, name="follow_or_not"),
    path("follow/common/<str:raw_id>", api.follow_common, name="follow_common"),
    path("follow/<str:raw_id>/<str:flag>", api.follow_toggle, name="follow_toggle"),
    path("users/<str:raw_id>", api.user_detail, name="user_detail"),
    path("users/<str:raw_id>/followers", api.followers_list, name="followers"),
    path("users/<str:raw_id>/following", api.following_list, name="following"),
]

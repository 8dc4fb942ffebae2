from django.urls import path

from . import views

app_name = "social"

urlpatterns = [
    path("", views.directory, name="directory"),
    path("u/<str:username>/followers/", views.followers, name="followers"),
    path("u/<str:username>/following/", views.following, name="following"),
    path("u/<str:username>/follow/", views.follow, name="follow"),
    path("u/<str:username>/unfollow/", views.unfollow, name="unfollow"),
]

from django.urls import path

from . import views

app_name = "feed"

urlpatterns = [
    path("home", views.home, name="home"),
    path("notes/", views.note_create, name="note_create"),
    path("n/<id:note_id>/", views.note_detail, name="note_detail"),
    path("n/<id:note_id>/delete/", views.note_delete, name="note_delete"),
    path("u/<str:username>/", views.profile, name="profile"),
    path("u/<str:username>/notes/", views.user_notes, name="user_notes"),
]

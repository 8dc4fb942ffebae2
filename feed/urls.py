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
    path("lists/", views.lists, name="lists"),
    path("lists/<id:list_id>/", views.list_detail, name="list_detail"),
    path("lists/<id:list_id>/edit/", views.list_update, name="list_update"),
    path("lists/<id:list_id>/delete/", views.list_delete, name="list_delete"),
    path("lists/<id:list_id>/members/", views.list_member_add, name="list_member_add"),
    path("lists/<id:list_id>/members/remove/", views.list_member_remove, name="list_member_remove"),
]

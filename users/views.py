"""Account pages: sign up (sign in and out are Django's views)."""

from __future__ import annotations

from django.contrib.auth import login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from . import services
from .forms import SignUpForm


def signup(request: HttpRequest) -> HttpResponse:
    """/signup/: create an account and sign in."""
    form = SignUpForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = services.user_create(
            username=form.cleaned_data["username"],
            password=form.cleaned_data["password1"],
            display_name=form.cleaned_data.get("display_name", ""),
        )
        login(request, user)
        return redirect("feed:home")
    return render(request, "users/user_signup.html", {"form": form}, status=400 if request.method == "POST" else 200)

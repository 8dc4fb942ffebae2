"""Server-rendered pages of the follow graph: parse input, call one selector or service, render.

Errors raised below (a malformed cursor, an unknown account) are answered
by ``core.errors`` with the site's error page.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST, require_safe

from core.errors import DomainError, NotFound, wants_json
from core.http import redirect_to_canonical
from core.paging import follow_cursor
from core.parsing import username_problem
from users.forms import DirectorySearchForm
from users.models import User
from users.selectors import active_user_named, users_search

from . import selectors, services


@require_safe
def directory(request: HttpRequest) -> HttpResponse:
    """/: search accounts by username; the most-followed accounts below."""
    form = DirectorySearchForm(request.GET or None)
    results = users_search(query=form.cleaned_data["q"]) if form.is_valid() else []
    context = {"form": form, "results": results, "searched": bool(request.GET.get("q")), "popular": selectors.users_most_followed()}
    return render(request, "social/user_directory.html", context)


def _list_page(request: HttpRequest, username: str, *, kind: str) -> HttpResponse:
    user = active_user_named(username)
    if user.username != username:
        return redirect_to_canonical(request, f"social:{kind}", username=user.username)
    reader = selectors.followers_page if kind == "followers" else selectors.following_page
    page = reader(user_id=user.pk, cursor=follow_cursor(request.GET.get("cursor")), limit=settings.FOLLOW_PAGE_SIZE)
    context = {
        "profile_user": user,
        "kind": kind,
        "page": page,
        "counts": selectors.follow_counts(user_id=user.pk),
        "is_first_page": not request.GET.get("cursor"),
    }
    return render(request, "social/follow_list.html", context)


@require_safe
def followers(request: HttpRequest, username: str) -> HttpResponse:
    """/u/<username>/followers/: 50 per page newest first, "older" cursor link."""
    return _list_page(request, username, kind="followers")


@require_safe
def following(request: HttpRequest, username: str) -> HttpResponse:
    """/u/<username>/following/: 50 per page newest first, "older" cursor link."""
    return _list_page(request, username, kind="following")


@require_POST
@login_required
def follow(request: HttpRequest, username: str) -> HttpResponse:
    """POST /u/<username>/follow/ (CSRF): follow, then back to the profile (or JSON for the JS toggle)."""
    return _toggle(request, username, following=True)


@require_POST
@login_required
def unfollow(request: HttpRequest, username: str) -> HttpResponse:
    """POST /u/<username>/unfollow/ (CSRF): unfollow, then back to the profile (or JSON)."""
    return _toggle(request, username, following=False)


def _toggle(request: HttpRequest, username: str, *, following: bool) -> HttpResponse:
    assert isinstance(request.user, User)  # login_required ran
    target = User.objects.filter(username=username).first() if username_problem(username) is None else None
    if target is None:
        raise NotFound("No such account.")
    action = services.follow_create if following else services.follow_delete
    try:
        action(actor=request.user, followee_id=target.pk)
    except DomainError as exc:
        if wants_json(request) or exc.status == 404:
            raise
        # A form post (refused, or over a limit): back to the profile with the reason.
        messages.error(request, exc.message)
        return redirect("feed:profile", username=target.username)
    if wants_json(request):
        counts = selectors.follow_counts(user_id=target.pk)
        return JsonResponse({"success": True, "following": following, "followers": counts.followers})
    return redirect("feed:profile", username=target.username)

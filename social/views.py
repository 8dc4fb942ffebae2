"""Server-rendered pages of the follow graph: parse input, call one selector or service, render."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from feed import selectors as feed_selectors

from . import selectors, services
from .paging import InvalidCursorError

User = get_user_model()


def _profile_user(username: str) -> Any:
    return get_object_or_404(User, username=username, is_active=True)


def profile(request: HttpRequest, username: str) -> HttpResponse:
    """/u/<username>/: counts, follow button, badges, "you both follow", "followed by ... you follow"."""
    user = _profile_user(username)
    context: dict[str, Any] = {
        "profile_user": user,
        "counts": selectors.follow_counts(user_id=user.pk),
        "mutual": selectors.mutual_follows(user_id=user.pk, limit=8),
        "is_self": request.user.is_authenticated and request.user.pk == user.pk,
        "notes": feed_selectors.user_timeline(author_id=user.pk, cursor=None, limit=10),
    }
    if request.user.is_authenticated and request.user.pk != user.pk:
        context["relationship"] = selectors.relationship(viewer_id=request.user.pk, user_id=user.pk)
        context["common"] = selectors.common_following(user_id=request.user.pk, other_id=user.pk, limit=8)
        context["familiar"] = selectors.familiar_followers(viewer_id=request.user.pk, user_id=user.pk, limit=3)
    return render(request, "social/user_profile.html", context)


def _list_page(request: HttpRequest, username: str, *, kind: str) -> HttpResponse:
    user = _profile_user(username)
    reader = selectors.followers_page if kind == "followers" else selectors.following_page
    try:
        page = reader(user_id=user.pk, cursor=request.GET.get("cursor"), limit=settings.FOLLOW_PAGE_SIZE)
    except InvalidCursorError:
        return HttpResponseBadRequest("Malformed cursor.")
    context = {
        "profile_user": user,
        "kind": kind,
        "page": page,
        "counts": selectors.follow_counts(user_id=user.pk),
        "is_first_page": not request.GET.get("cursor"),
    }
    return render(request, "social/follow_list.html", context)


def followers(request: HttpRequest, username: str) -> HttpResponse:
    """/u/<username>/followers/: 50 per page newest first, "older" cursor link."""
    return _list_page(request, username, kind="followers")


def following(request: HttpRequest, username: str) -> HttpResponse:
    """/u/<username>/following/: 50 per page newest first, "older" cursor link."""
    return _list_page(request, username, kind="following")


def _wants_json(request: HttpRequest) -> bool:
    return request.headers.get("Accept", "").startswith("application/json")


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
    target = get_object_or_404(User, username=username)
    action = services.follow_create if following else services.follow_delete
    try:
        action(actor=request.user, target_id=target.pk)
    except services.FollowError as exc:
        if _wants_json(request):
            return JsonResponse({"success": False, "errorMsg": exc.message}, status=exc.status)
        messages.error(request, exc.message)
        return redirect("social:profile", username=username) if exc.status != 404 else HttpResponse(exc.message, status=404)
    if _wants_json(request):
        counts = selectors.follow_counts(user_id=target.pk)
        return JsonResponse({"success": True, "following": following, "followers": counts.followers})
    return redirect("social:profile", username=username)

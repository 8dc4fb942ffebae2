"""The follow graph's JSON API in the seed's style; the actor is always the signed-in user."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET, require_http_methods

from . import selectors, services
from .http import api_error, api_login_required, api_ok, user_json
from .paging import InvalidCursorError

User = get_user_model()
MAX_LIMIT = 100


def _limit(request: HttpRequest) -> int:
    raw = request.GET.get("limit", str(settings.FOLLOW_PAGE_SIZE))
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
        raise ValueError(f"limit must be an integer from 1 to {MAX_LIMIT}.")
    return int(raw)


def _target(raw_id: str) -> Any:
    user_id = services.parse_user_id(raw_id)
    user = User.objects.filter(pk=user_id, is_active=True).first()
    if user is None:
        raise services.TargetNotFoundError("No such user.")
    return user


def with_target(view: Callable[..., JsonResponse]) -> Callable[..., JsonResponse]:
    """Resolve the URL's ``raw_id`` to an active user passed as ``target``; 400/404 JSON otherwise."""

    @wraps(view)
    def wrapper(request: HttpRequest, raw_id: str, *args: Any, **kwargs: Any) -> JsonResponse:
        try:
            target = _target(raw_id)
        except services.FollowError as exc:
            return api_error(exc.message, status=exc.status)
        return view(request, target, *args, **kwargs)

    return wrapper


@require_http_methods(["PUT", "POST"])
@api_login_required
def follow_toggle(request: HttpRequest, raw_id: str, flag: str) -> JsonResponse:
    """PUT /api/follow/<id>/<true|false>: follow or unfollow ``id`` (the seed's contract)."""
    if flag not in ("true", "false"):
        return api_error("The last path segment must be true or false.", status=400)
    try:
        if flag == "true":
            result = services.follow_create(actor=request.user, target_id=raw_id)
        else:
            result = services.follow_delete(actor=request.user, target_id=raw_id)
    except services.FollowError as exc:
        return api_error(exc.message, status=exc.status)
    counts = selectors.follow_counts(user_id=result.followee_id)
    return api_ok({"changed": result.changed, "following": flag == "true", "followers": counts.followers})


@require_GET
@api_login_required
@with_target
def follow_or_not(request: HttpRequest, target: Any) -> JsonResponse:
    """GET /api/follow/or/not/<id>: whether the signed-in user follows ``id``."""
    return api_ok(selectors.is_following(follower_id=request.user.pk, followee_id=target.pk))


@require_GET
@api_login_required
@with_target
def follow_common(request: HttpRequest, target: Any) -> JsonResponse:
    """GET /api/follow/common/<id>: accounts both the signed-in user and ``id`` follow."""
    sample = selectors.common_following(user_id=request.user.pk, other_id=target.pk, limit=MAX_LIMIT)
    return api_ok([user_json(u) for u in sample.users])


def _list(request: HttpRequest, target: Any, reader: Any) -> JsonResponse:
    try:
        page = reader(user_id=target.pk, cursor=request.GET.get("cursor"), limit=_limit(request))
    except (InvalidCursorError, ValueError) as exc:
        return api_error(str(exc), status=400)
    data = {
        "list": [dict(user_json(e.user), followedAt=int(e.followed_at.timestamp())) for e in page.entries],
        "next_cursor": page.next_cursor,
    }
    return api_ok(data)


@require_GET
@with_target
def followers_list(request: HttpRequest, target: Any) -> JsonResponse:
    """GET /api/users/<id>/followers?cursor=&limit=: followers newest first (public, like the page)."""
    return _list(request, target, selectors.followers_page)


@require_GET
@with_target
def following_list(request: HttpRequest, target: Any) -> JsonResponse:
    """GET /api/users/<id>/following?cursor=&limit=: followees newest first (public, like the page)."""
    return _list(request, target, selectors.following_page)


@require_GET
@with_target
def user_detail(request: HttpRequest, target: Any) -> JsonResponse:
    """GET /api/users/<id>: public profile with follower and following counts."""
    counts = selectors.follow_counts(user_id=target.pk)
    return api_ok(dict(user_json(target), followers=counts.followers, following=counts.following))

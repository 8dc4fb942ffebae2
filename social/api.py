"""The follow graph's JSON API; the actor is always the signed-in user.

Input is parsed here (``core.parsing``); errors raised below are answered
in the envelope by ``core.errors``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_http_methods, require_safe

from core.errors import NotFound
from core.http import api_login_required, api_ok
from core.paging import follow_cursor
from core.parsing import parse_flag, parse_id, parse_limit
from users.models import User
from users.serializers import user_json

from . import selectors, services

MAX_LIMIT = 100


def _limit(request: HttpRequest) -> int:
    return parse_limit(request.GET.get("limit"), default=int(settings.FOLLOW_PAGE_SIZE), maximum=MAX_LIMIT)


def active_user(raw_id: str) -> User:
    """The active account whose id is the URL segment ``raw_id``.

    :raises InvalidInput: ``raw_id`` is not an id (400).
    :raises NotFound: no such active account (404).
    """
    user = User.objects.filter(pk=parse_id(raw_id, name="User id"), is_active=True).first()
    if user is None:
        raise NotFound("No such user.")
    return user


def with_target(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Resolve the URL's ``raw_id`` to an active user passed as ``target`` (400/404 otherwise)."""

    @wraps(view)
    def wrapper(request: HttpRequest, raw_id: str, *args: Any, **kwargs: Any) -> HttpResponse:
        return view(request, active_user(raw_id), *args, **kwargs)

    return wrapper


def _actor(request: HttpRequest) -> User:
    assert isinstance(request.user, User)  # api_login_required ran
    return request.user


@require_http_methods(["PUT", "POST"])
@api_login_required
def follow_toggle(request: HttpRequest, raw_id: str, flag: str) -> JsonResponse:
    """PUT /api/follow/<id>/<true|false>: follow or unfollow ``id``."""
    following = parse_flag(flag, name="The last path segment")
    followee_id = parse_id(raw_id, name="User id")
    if following:
        result = services.follow_create(actor=_actor(request), followee_id=followee_id)
    else:
        result = services.follow_delete(actor=_actor(request), followee_id=followee_id)
    counts = selectors.follow_counts(user_id=result.followee_id)
    return api_ok({"changed": result.changed, "following": following, "followers": counts.followers})


@require_safe
@api_login_required
@with_target
def follow_or_not(request: HttpRequest, target: User) -> JsonResponse:
    """GET /api/follow/or/not/<id>: whether the signed-in user follows ``id``."""
    return api_ok(selectors.is_following(follower_id=_actor(request).pk, followee_id=target.pk))


@require_safe
@api_login_required
@with_target
def follow_common(request: HttpRequest, target: User) -> JsonResponse:
    """GET /api/follow/common/<id>: accounts both the signed-in user and ``id`` follow."""
    sample = selectors.common_following(user_id=_actor(request).pk, other_id=target.pk, limit=MAX_LIMIT)
    return api_ok([user_json(u) for u in sample.users])


def _list(request: HttpRequest, target: User, reader: Callable[..., selectors.FollowPage]) -> JsonResponse:
    page = reader(user_id=target.pk, cursor=follow_cursor(request.GET.get("cursor")), limit=_limit(request))
    data = {
        "list": [dict(user_json(e.user), followedAt=int(e.followed_at.timestamp())) for e in page.entries],
        "next_cursor": str(page.next_cursor) if page.next_cursor else None,
    }
    return api_ok(data)


@require_safe
@with_target
def followers_list(request: HttpRequest, target: User) -> JsonResponse:
    """GET /api/users/<id>/followers?cursor=&limit=: followers newest first (public, like the page)."""
    return _list(request, target, selectors.followers_page)


@require_safe
@with_target
def following_list(request: HttpRequest, target: User) -> JsonResponse:
    """GET /api/users/<id>/following?cursor=&limit=: followees newest first (public, like the page)."""
    return _list(request, target, selectors.following_page)


@require_safe
@with_target
def user_detail(request: HttpRequest, target: User) -> JsonResponse:
    """GET /api/users/<id>: public profile with follower and following counts."""
    counts = selectors.follow_counts(user_id=target.pk)
    return api_ok(dict(user_json(target), followers=counts.followers, following=counts.following))

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
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from core.errors import InvalidInput, NotFound
from core.http import api_login_required, api_ok
from core.paging import follow_cursor, request_cursor
from core.parsing import parse_decision, parse_flag, parse_id, parse_json_object, parse_limit, parse_mute_duration
from users.models import User
from users.selectors import account_by_id
from users.serializers import user_json

from . import controls, selectors, services, transfer, visibility
from .models import FollowImport
from .outbox import suggestions_request

MAX_LIMIT = 100


def _limit(request: HttpRequest) -> int:
    return parse_limit(request.GET.get("limit"), default=int(settings.FOLLOW_PAGE_SIZE), maximum=MAX_LIMIT)


def active_user(raw_id: str) -> User:
    """The active account whose id is the URL segment ``raw_id``.

    :raises InvalidInput: ``raw_id`` is not an id (400).
    :raises NotFound: no such active account (404).
    """
    user = account_by_id(parse_id(raw_id, name="User id"))  # raw SQL: cheaper than building a queryset
    if user is None or not user.is_active:
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


def _viewer(request: HttpRequest) -> User | None:
    return request.user if isinstance(request.user, User) else None


@require_http_methods(["PUT", "POST"])
@api_login_required
def follow_toggle(request: HttpRequest, raw_id: str, flag: str) -> JsonResponse:
    """PUT /api/follow/<id>/<true|false>: follow or unfollow ``id``; a private account's follow is
    a request (``requested: true``), and ``false`` withdraws a pending one."""
    following = parse_flag(flag, name="The last path segment")
    followee_id = parse_id(raw_id, name="User id")
    if following:
        result = services.follow_create(actor=_actor(request), followee_id=followee_id)
    else:
        result = services.follow_delete(actor=_actor(request), followee_id=followee_id)
    counts = selectors.follow_counts(user_id=result.followee_id)
    return api_ok(
        {
            "changed": result.changed,
            "following": following and not result.requested,
            "requested": following and result.requested,
            "followers": counts.followers,
        }
    )


@require_http_methods(["PUT", "POST"])
@api_login_required
def block_toggle(request: HttpRequest, raw_id: str, flag: str) -> JsonResponse:
    """PUT /api/block/<id>/<true|false>: block or unblock ``id`` (409 when already so)."""
    blocking = parse_flag(flag, name="The last path segment")
    target_id = parse_id(raw_id, name="User id")
    if blocking:
        result = controls.block_create(actor=_actor(request), target_id=target_id)
    else:
        result = controls.block_delete(actor=_actor(request), target_id=target_id)
    return api_ok({"changed": result.changed, "blocking": blocking, "unfollowed": [list(pair) for pair in result.unfollowed]})


@require_http_methods(["PUT", "POST"])
@api_login_required
def mute_toggle(request: HttpRequest, raw_id: str, flag: str) -> JsonResponse:
    """PUT /api/mute/<id>/<true|false>: mute (``duration`` 1d, 7d or forever, from a JSON body
    or the query; default forever) or unmute ``id``."""
    muting = parse_flag(flag, name="The last path segment")
    target_id = parse_id(raw_id, name="User id")
    if not muting:
        result = controls.mute_delete(actor=_actor(request), target_id=target_id)
        return api_ok({"changed": result.changed, "muting": False})
    raw = request.GET.get("duration", "forever")
    if request.body:
        raw = parse_json_object(request.body).get("duration", raw)
    duration = parse_mute_duration(raw)
    result = controls.mute_create(actor=_actor(request), target_id=target_id, duration=duration)
    return api_ok({"changed": result.changed, "muting": True, "duration": raw})


@require_http_methods(["DELETE"])
@api_login_required
def follower_remove(request: HttpRequest, raw_id: str) -> JsonResponse:
    """DELETE /api/followers/<id>: make ``id`` stop following the signed-in user (409: it does not)."""
    result = controls.follower_remove(actor=_actor(request), follower_id=parse_id(raw_id, name="User id"))
    return api_ok({"changed": result.changed, "followers": selectors.follow_counts(user_id=_actor(request).pk).followers})


@require_safe
@api_login_required
def follow_requests(request: HttpRequest) -> JsonResponse:
    """GET /api/follow-requests?cursor=&limit=: pending requests to the signed-in user, newest first."""
    page = selectors.follow_requests_page(
        target_id=_actor(request).pk, cursor=request_cursor(request.GET.get("cursor")), limit=_limit(request)
    )
    data = {
        "list": [dict(user_json(e.user), requestedAt=int(e.requested_at.timestamp())) for e in page.entries],
        "next_cursor": str(page.next_cursor) if page.next_cursor else None,
    }
    return api_ok(data)


@require_http_methods(["PUT", "POST"])
@api_login_required
def follow_request_decide(request: HttpRequest, raw_id: str, decision: str) -> JsonResponse:
    """PUT /api/follow-requests/<requester id>/<approve|reject>: decide a pending request (404: none)."""
    approve = parse_decision(decision)
    requester_id = parse_id(raw_id, name="User id")
    if approve:
        controls.follow_request_approve(actor=_actor(request), requester_id=requester_id)
    else:
        controls.follow_request_reject(actor=_actor(request), requester_id=requester_id)
    return api_ok(
        {"changed": True, "approved": approve, "followers": selectors.follow_counts(user_id=_actor(request).pk).followers}
    )


@require_http_methods(["PUT"])
@api_login_required
def me_settings(request: HttpRequest) -> JsonResponse:
    """PUT /api/me/settings {"private": true|false}: the signed-in user's settings; turning
    ``private`` off approves every pending request (``approved``: how many)."""
    data = parse_json_object(request.body)
    unknown = sorted(set(data) - {"private"})
    if unknown:
        raise InvalidInput(f"Unknown setting: {unknown[0]}.")
    private = data.get("private")
    if not isinstance(private, bool):
        raise InvalidInput("private must be true or false.")
    approved = controls.account_privacy_set(actor=_actor(request), private=private)
    return api_ok({"private": private, "approved": approved})


@require_safe
@api_login_required
@with_target
def follow_or_not(request: HttpRequest, target: User) -> JsonResponse:
    """GET /api/follow/or/not/<id>: whether the signed-in user follows ``id`` (404 when ``id`` blocks you, as if absent)."""
    viewer = _actor(request)
    if visibility.access(viewer=viewer, user=target).hidden:
        raise NotFound("No such user.")
    return api_ok(selectors.is_following(follower_id=viewer.pk, followee_id=target.pk))


@require_safe
@api_login_required
@with_target
def follow_common(request: HttpRequest, target: User) -> JsonResponse:
    """GET /api/follow/common/<id>: accounts both the signed-in user and ``id`` follow
    (``visibility.require_content``: 404 when ``id`` blocks you, 403 for a private account you do not follow)."""
    viewer = _actor(request)
    visibility.require_content(viewer=viewer, user=target)
    hidden = visibility.hidden_ids(viewer_id=viewer.pk)
    sample = selectors.common_following(user_id=viewer.pk, other_id=target.pk, limit=MAX_LIMIT, hidden=hidden)
    return api_ok([user_json(u) for u in sample.users])


def _list(request: HttpRequest, raw_id: str, kind: str) -> JsonResponse:
    viewer = _viewer(request)
    # The account and the viewer's standing with it in one query, where active_user and
    # require_content took two.
    account = visibility.account_and_access(viewer=viewer, user_id=parse_id(raw_id, name="User id"))
    if account is None:
        raise NotFound("No such user.")
    target, seen = account
    visibility.content_shown(seen, user=target)
    found = selectors.follow_list(
        kind=kind,
        user_id=target.pk,
        cursor=follow_cursor(request.GET.get("cursor")),
        limit=_limit(request),
        viewer_id=viewer.pk if viewer else None,
        counts=False,
    )
    data = {
        "list": [dict(user_json(e.user), followedAt=int(e.followed_at_seconds)) for e in found.shown],
        "next_cursor": str(found.page.next_cursor) if found.page.next_cursor else None,
    }
    return api_ok(data)


@require_safe
def followers_list(request: HttpRequest, raw_id: str) -> JsonResponse:
    """GET /api/users/<id>/followers?cursor=&limit=: followers newest first (as the page: 404 when
    ``id`` blocks you, 403 for a private account you do not follow; accounts hidden from you by
    a block are left out; 400 for an id that is not one, 404 for no such active account)."""
    return _list(request, raw_id, "followers")


@require_safe
def following_list(request: HttpRequest, raw_id: str) -> JsonResponse:
    """GET /api/users/<id>/following?cursor=&limit=: followees newest first (as ``followers_list``)."""
    return _list(request, raw_id, "following")


@require_safe
@with_target
def user_detail(request: HttpRequest, target: User) -> JsonResponse:
    """GET /api/users/<id>: public profile with follower and following counts and ``private`` (404 when ``id`` blocks you)."""
    seen = visibility.access(viewer=_viewer(request), user=target)
    if seen.hidden:
        raise NotFound("No such user.")
    counts = selectors.follow_counts(user_id=target.pk)
    return api_ok(dict(user_json(target), followers=counts.followers, following=counts.following, private=seen.private))


@require_safe
@api_login_required
def follows_export(request: HttpRequest) -> HttpResponse:
    """GET /api/follows/export.csv: the accounts you follow, in Mastodon's CSV layout (at most
    the following cap's rows, so one response body)."""
    response = HttpResponse("".join(transfer.export_rows(user_id=_actor(request).pk)), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="following_accounts.csv"'
    return response


@require_POST
@api_login_required
def follows_import(request: HttpRequest) -> JsonResponse:
    """POST /api/follows/import: a CSV in Mastodon's layout or a list of usernames, as the file
    field ``file`` or the raw body; 202 with the import's id and size (400: a bad file, nothing
    changed)."""
    job = transfer.follows_import_start(actor=_actor(request), raw=upload_bytes(request))
    return api_ok(import_json(job), status=202)


@require_safe
@api_login_required
def follows_import_status(request: HttpRequest, raw_id: str) -> JsonResponse:
    """GET /api/follows/import/<id>: the progress of one of your imports (404: not yours)."""
    job = selectors.follows_import_of(user_id=_actor(request).pk, import_id=parse_id(raw_id, name="Import id"))
    if job is None:
        raise NotFound("No such import.")
    return api_ok(import_json(job))


def import_json(job: FollowImport) -> dict[str, Any]:
    """An import as the API shows it."""
    return {
        "id": job.pk,
        "total": job.total,
        "done": job.position,
        "followed": job.followed,
        "skipped": [{"account": username, "reason": reason} for username, reason in job.skipped],
        "skippedCount": job.skipped_count,
        "finished": job.finished_at is not None,
    }


def upload_bytes(request: HttpRequest) -> bytes:
    """The uploaded file's bytes: the multipart field ``file``, else the raw body.

    :raises InvalidInput: nothing uploaded, or larger than ``FOLLOWS_IMPORT_MAX_BYTES`` (400).
    """
    limit = int(settings.FOLLOWS_IMPORT_MAX_BYTES)
    upload = request.FILES.get("file")
    if upload is not None:
        if upload.size is not None and upload.size > limit:
            raise InvalidInput(f"The file is larger than {limit // 1024:,} KB.")
        return bytes(upload.read(limit + 1))
    if (request.content_type or "").startswith("multipart/"):
        raise InvalidInput("Choose a file to import (field file).")
    body = request.body
    if not body:
        raise InvalidInput("The request holds no file to import.")
    return body


@require_safe
@api_login_required
def suggestions(request: HttpRequest) -> JsonResponse:
    """GET /api/suggestions?limit=: who to follow, best first, each with its ``reason``;
    ``computed`` false while none is stored (the most followed accounts meanwhile)."""
    limit = parse_limit(request.GET.get("limit"), default=10, maximum=50)
    found = selectors.suggestions_for(user_id=_actor(request).pk, limit=limit)
    if not found.computed:
        suggestions_request(user_id=_actor(request).pk)
    return api_ok({"list": [dict(user_json(item.user), reason=item.reason) for item in found.items], "computed": found.computed})

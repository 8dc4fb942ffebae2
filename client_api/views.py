"""The Mastodon client API's endpoints (``/api/v1/...``, ``/api/v2/...``): each parses its
input, makes one call to followfeed's services or selectors and renders Mastodon's shapes.

The actor is the token's account; ``client_api.http.endpoint`` checks the token, its scope and
that the account is active, and answers failures as ``{"error": ...}``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.views.decorators.http import require_safe

from core import limits
from core.errors import Forbidden, InvalidInput, NotFound
from core.paging import Cursor, control_cursor, follow_cursor, request_cursor
from core.parsing import parse_id, parse_username
from core.responses import JsonResponse
from feed import selectors as feed_selectors
from feed import services as feed_services
from feed.models import List, Note
from feed.services import note_delete
from notifications.selectors import unread_count
from social import controls, visibility
from social import selectors as social_selectors
from social import services as social_services
from users import selectors as user_selectors
from users import services as user_services
from users.models import MARKER_TIMELINES, User

from . import formatting, selectors, services
from .http import OUT_OF_SCOPE, ApiError, Call, endpoint, error, json_list, with_link
from .validators import registered_scopes

ACCOUNT_LIMIT = 40
ACCOUNT_LIMIT_MAX = 80
STATUS_LIMIT = 20
STATUS_LIMIT_MAX = 40
NOTIFICATION_LIMIT = 40
NOTIFICATION_LIMIT_MAX = 80


def _version() -> str:
    return f"{settings.MASTODON_API_VERSION} (compatible; followfeed 0.1)"


# --- instance and applications ------------------------------------------------


@endpoint("GET", token=False, user=False)
def instance_v1(call: Call) -> JsonResponse:
    """GET /api/v1/instance: the server, its version, limits and registrations (Mastodon 3.x shape)."""
    request = call.request
    host = request.get_host()
    return JsonResponse(
        {
            "uri": host,
            "title": "followfeed",
            "short_description": "A follow graph and home feed.",
            "description": "A follow graph and home feed.",
            "email": "",
            "version": _version(),
            "urls": {"streaming_api": _streaming_url(request)},
            "stats": {"user_count": selectors.active_account_count(), "status_count": 0, "domain_count": 1},
            "thumbnail": None,
            "languages": ["en"],
            "registrations": True,
            "approval_required": False,
            "invites_enabled": False,
            "configuration": _configuration(),
            "contact_account": None,
            "rules": [],
        }
    )


def _streaming_url(request: HttpRequest) -> str:
    """Where the streaming process answers: ``STREAMING_API_URL``, else this host (a proxy routes
    /api/v1/streaming to it), as ``ws://`` or ``wss://`` as Mastodon gives it."""
    if settings.STREAMING_API_URL:
        return str(settings.STREAMING_API_URL)
    return f"{'wss' if request.is_secure() else 'ws'}://{request.get_host()}"


def _configuration() -> dict[str, Any]:
    return {
        "urls": {},
        "accounts": {"max_featured_tags": 0, "max_pinned_statuses": 0},
        "statuses": {
            "max_characters": int(settings.NOTE_MAX_LENGTH),
            "max_media_attachments": 0,
            "characters_reserved_per_url": 23,
        },
        "media_attachments": {
            "supported_mime_types": [],
            "image_size_limit": 0,
            "image_matrix_limit": 0,
            "video_size_limit": 0,
            "video_frame_rate_limit": 0,
            "video_matrix_limit": 0,
        },
        "polls": {"max_options": 0, "max_characters_per_option": 0, "min_expiration": 0, "max_expiration": 0},
        "translation": {"enabled": False},
    }


@endpoint("GET", token=False, user=False)
def instance_v2(call: Call) -> JsonResponse:
    """GET /api/v2/instance: the server in Mastodon 4's shape, with ``api_versions``."""
    host = call.request.get_host()
    configuration = _configuration()
    configuration["urls"] = {"streaming": _streaming_url(call.request), "status": None}
    configuration["vapid"] = {"public_key": ""}
    return JsonResponse(
        {
            "domain": host,
            "title": "followfeed",
            "version": _version(),
            "source_url": "https://github.com/followfeed/followfeed",
            "description": "A follow graph and home feed.",
            "usage": {"users": {"active_month": selectors.active_account_count()}},
            "thumbnail": {"url": call.request.build_absolute_uri(formatting.MISSING_AVATAR)},
            "icon": [],
            "languages": ["en"],
            "configuration": configuration,
            "registrations": {"enabled": True, "approval_required": False, "message": None, "url": None},
            "api_versions": {"mastodon": 6},
            "contact": {"email": "", "account": None},
            "rules": [],
        }
    )


@require_safe
def health(request: HttpRequest) -> HttpResponse:
    """GET /health: ``OK`` while the process serves requests (Mastodon's liveness check)."""
    return HttpResponse("OK", content_type="text/plain")


@require_safe
def authorization_server(request: HttpRequest) -> JsonResponse:
    """GET /.well-known/oauth-authorization-server: the OAuth endpoints and what they support (RFC 8414)."""
    absolute = request.build_absolute_uri
    return JsonResponse(
        {
            "issuer": absolute("/"),
            "service_documentation": "https://docs.joinmastodon.org/",
            "authorization_endpoint": absolute(reverse("client_api:authorize")),
            "token_endpoint": absolute(reverse("client_api:token")),
            "revocation_endpoint": absolute(reverse("client_api:revoke")),
            "app_registration_endpoint": absolute(reverse("client_api:apps")),
            "scopes_supported": list(settings.MASTODON_SCOPES),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query", "fragment", "form_post"],
            "grant_types_supported": ["authorization_code", "client_credentials", "refresh_token"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            "code_challenge_methods_supported": ["S256"],
        }
    )


def _application_json(call: Call, app: Any, scopes: str, website: str) -> dict[str, Any]:
    return {
        "id": str(app.pk),
        "name": app.name,
        "website": website or None,
        "scopes": scopes.split(),
        "redirect_uri": "\n".join(app.redirect_uris.split()),
        "redirect_uris": app.redirect_uris.split(),
        "vapid_key": "",
    }


@endpoint("POST", token=False, user=False)
def apps_create(call: Call) -> JsonResponse:
    """POST /api/v1/apps: register an application (form or JSON: ``client_name``,
    ``redirect_uris`` (a string, lines or a list), ``scopes``, ``website``)."""
    limits.hit("apps", limits.client_address(call.request), "APP_REGISTRATION_RATE", message="Too many requests")
    raw_uris = call.params.get("redirect_uris", call.params.get("redirect_uris[]", ""))
    uris = [uri for item in (raw_uris if isinstance(raw_uris, list) else [raw_uris]) for uri in str(item).split()]
    scopes = str(call.get("scopes") or "read").split()
    registered = services.app_register(
        name=str(call.get("client_name") or ""),
        redirect_uris=uris,
        scopes=scopes,
        website=str(call.get("website") or ""),
        known_scopes=set(settings.MASTODON_SCOPES),
    )
    shape = _application_json(call, registered.application, registered.scopes, registered.website)
    shape.update(
        {"client_id": registered.application.client_id, "client_secret": registered.client_secret, "client_secret_expires_at": 0}
    )
    return JsonResponse(shape)


@endpoint("GET", user=False)
def apps_verify_credentials(call: Call) -> JsonResponse:
    """GET /api/v1/apps/verify_credentials: the application of the token."""
    assert call.token is not None  # the endpoint needs a token
    app = call.token.application
    if app is None:
        raise NotFound("Record not found")
    website = selectors.app_website(app.pk)
    return JsonResponse(_application_json(call, app, " ".join(registered_scopes(app)), website))


# --- accounts ----------------------------------------------------------------------


def _id_or_404(raw_id: str) -> int:
    """The record id ``raw_id``; a malformed one names no record (404, as Mastodon)."""
    try:
        return parse_id(raw_id, name="id")
    except InvalidInput:
        raise NotFound("Record not found") from None


def _account_or_404(call: Call, raw_id: str) -> User:
    """The active account ``raw_id`` that does not block the caller.

    :raises NotFound: unknown, deactivated or blocking the caller (404, as Mastodon).
    """
    user = selectors.active_account(_id_or_404(raw_id))
    if user is None:
        raise NotFound("Record not found")
    visibility.require_shown(viewer=call.user, user=user)
    return user


def _may_see_content(call: Call, user: User) -> bool:
    """Whether the caller may see ``user``'s notes and lists (a private account: its followers)."""
    try:
        visibility.require_content(viewer=call.user, user=user)
    except (Forbidden, NotFound):
        return False
    return True


def _relationship(call: Call, user_id: int) -> JsonResponse:
    return JsonResponse(formatting.relationship_json(selectors.relations(viewer_id=call.me.pk, user_ids=[user_id])[0]))


@endpoint("GET", scope="read:accounts")
def verify_credentials(call: Call) -> JsonResponse:
    """GET /api/v1/accounts/verify_credentials: the token's account with ``source``."""
    me = call.me
    return JsonResponse(
        formatting.credential_account_json(
            call.request, me, follow_requests_count=social_selectors.follow_requests_count(target_id=me.pk)
        )
    )


@endpoint("GET", scope="read:accounts", user=False, token=False)
def account_detail(call: Call, raw_id: str) -> JsonResponse:
    """GET /api/v1/accounts/:id: an account (404 when unknown or it blocks the caller)."""
    return JsonResponse(formatting.account_json(call.request, _account_or_404(call, raw_id)))


@endpoint("GET", scope="read:accounts", user=False, token=False)
def account_lookup(call: Call) -> JsonResponse:
    """GET /api/v1/accounts/lookup?acct=: an account by its name (``name@this.host`` too)."""
    acct = str(call.get("acct") or "").lstrip("@")
    name, _, domain = acct.partition("@")
    if domain and domain not in (call.request.get_host(), call.request.get_host().split(":")[0]):
        raise NotFound("Record not found")
    try:
        username = parse_username(name)
    except InvalidInput:
        raise NotFound("Record not found") from None
    user = selectors.active_account_named(username)
    if user is None:
        raise NotFound("Record not found")
    visibility.require_shown(viewer=call.user, user=user)
    return JsonResponse(formatting.account_json(call.request, user))


def _ids(call: Call, name: str = "id") -> list[int]:
    """The ids of ``id[]`` (at most 40; a malformed one is a 400 as nothing can match it)."""
    raw = call.get_list(name)
    if len(raw) > 40:
        raise ApiError("Too many ids", 422)
    return [parse_id(item, name="id") for item in raw]


@endpoint("GET", scope="read:accounts", user=False, token=False)
def accounts_many(call: Call) -> JsonResponse:
    """GET /api/v1/accounts?id[]=: the accounts among these ids the caller may see."""
    ids = _ids(call)
    users = selectors.active_accounts(ids)
    blocking_me: set[int] = set()
    if call.user is not None:
        blocking_me = {
            relation.user_id
            for relation in selectors.relations(viewer_id=call.user.pk, user_ids=list(users))
            if relation.blocked_by
        }
    return json_list(
        [formatting.account_json(call.request, users[i]) for i in dict.fromkeys(ids) if i in users and i not in blocking_me]
    )


@endpoint("GET", scope="read:follows")
def relationships(call: Call) -> JsonResponse:
    """GET /api/v1/accounts/relationships?id[]=: the caller's Relationship to each account."""
    ids = _ids(call)
    known = set(selectors.active_accounts(ids))
    found = selectors.relations(viewer_id=call.me.pk, user_ids=[i for i in ids if i in known])
    return json_list([formatting.relationship_json(relation) for relation in found])


@endpoint("GET", scope="read:follows")
def familiar_followers(call: Call) -> JsonResponse:
    """GET /api/v1/accounts/familiar_followers?id[]=: for each account, its followers the caller follows (blocks hidden)."""
    ids = _ids(call)
    hidden = visibility.hidden_ids(viewer_id=call.me.pk)
    shapes: list[dict[str, Any]] = []
    for user_id in dict.fromkeys(ids):
        if user_id in hidden:  # a block either way: nothing about its followers
            shapes.append({"id": str(user_id), "accounts": []})
            continue
        sample = social_selectors.familiar_followers(viewer_id=call.me.pk, user_id=user_id, limit=ACCOUNT_LIMIT, hidden=hidden)
        shapes.append({"id": str(user_id), "accounts": formatting.accounts_json(call.request, sample.users)})
    return json_list(shapes)


@endpoint("GET", scope="read:statuses", user=False, token=False)
def account_statuses(call: Call, raw_id: str) -> JsonResponse:
    """GET /api/v1/accounts/:id/statuses: the account's notes newest first (none for a private
    account's non-follower), paged by ``max_id``/``since_id``/``min_id``."""
    user = _account_or_404(call, raw_id)
    if not _may_see_content(call, user) or call.flag("pinned") or call.flag("only_media"):
        return json_list([])
    limit = call.limit(STATUS_LIMIT, STATUS_LIMIT_MAX)
    exclude_direct = call.flag("exclude_direct")

    def read(cursor: Cursor | None, n: int) -> feed_selectors.TimelinePage:
        page = feed_selectors.user_timeline(author=user, cursor=cursor, limit=n, viewer_id=call.user.pk if call.user else None)
        if exclude_direct:
            # Left out as the timeline is read, so a page is filled from further down (and has its links).
            return replace(page, notes=[note for note in page.notes if getattr(note, "visibility", "public") != "direct"])
        return page

    notes, more = selectors.timeline_window(
        read, max_id=call.id_param("max_id"), since_id=call.id_param("since_id"), min_id=call.id_param("min_id"), limit=limit
    )
    return _statuses_response(call, notes, more)


def _statuses_response(call: Call, notes: list[Any], more: bool, facts: selectors.StatusFacts | None = None) -> JsonResponse:
    link = formatting.link_header(
        call.request, newest=str(notes[0].pk) if notes else None, oldest=str(notes[-1].pk) if notes else None, more=more
    )
    return with_link(json_list(formatting.statuses_json_of(call.request, notes, facts)), link)


def _follow_list(call: Call, raw_id: str, *, followers: bool) -> JsonResponse:
    user = _account_or_404(call, raw_id)
    if not _may_see_content(call, user):
        return json_list([])
    limit = call.limit(ACCOUNT_LIMIT, ACCOUNT_LIMIT_MAX)
    cursor, above = _list_cursors(call, follow_cursor)
    if above is not None:
        read_above = social_selectors.followers_page_above if followers else social_selectors.following_page_above
        page = read_above(user_id=user.pk, above=above, limit=limit)
    else:
        read = social_selectors.followers_page if followers else social_selectors.following_page
        page = read(user_id=user.pk, cursor=cursor, limit=limit)
    hidden = visibility.hidden_ids(viewer_id=call.user.pk) if call.user is not None else set()
    users = [entry.user for entry in page.entries if entry.user.pk not in hidden]
    return _with_list_link(call, json_list(formatting.accounts_json(call.request, users)), page, limit)


@endpoint("GET", scope="read:accounts", user=False, token=False)
def account_followers(call: Call, raw_id: str) -> JsonResponse:
    """GET /api/v1/accounts/:id/followers: newest first (a private account's: its followers only)."""
    return _follow_list(call, raw_id, followers=True)


@endpoint("GET", scope="read:accounts", user=False, token=False)
def account_following(call: Call, raw_id: str) -> JsonResponse:
    """GET /api/v1/accounts/:id/following: newest first (a private account's: its followers only)."""
    return _follow_list(call, raw_id, followers=False)


@endpoint("POST", scope="write:follows")
def account_follow(call: Call, raw_id: str) -> JsonResponse:
    """POST /api/v1/accounts/:id/follow: follow (a private account: ask, ``requested: true``)."""
    user = _account_or_404(call, raw_id)
    social_services.follow_create(actor=call.me, followee_id=user.pk)
    return _relationship(call, user.pk)


@endpoint("POST", scope="write:follows")
def account_unfollow(call: Call, raw_id: str) -> JsonResponse:
    """POST /api/v1/accounts/:id/unfollow: unfollow, or withdraw the request."""
    user = _account_or_404(call, raw_id)
    social_services.follow_delete(actor=call.me, followee_id=user.pk)
    return _relationship(call, user.pk)


@endpoint("POST", scope="write:follows")
def account_remove_from_followers(call: Call, raw_id: str) -> JsonResponse:
    """POST /api/v1/accounts/:id/remove_from_followers: the account stops following the caller."""
    user = _account_or_404(call, raw_id)
    controls.follower_remove(actor=call.me, follower_id=user.pk)
    return _relationship(call, user.pk)


@endpoint("POST", scope="write:blocks")
def account_block(call: Call, raw_id: str) -> JsonResponse:
    """POST /api/v1/accounts/:id/block."""
    user = _account_or_404(call, raw_id)
    controls.block_create(actor=call.me, target_id=user.pk)
    return _relationship(call, user.pk)


@endpoint("POST", scope="write:blocks")
def account_unblock(call: Call, raw_id: str) -> JsonResponse:
    """POST /api/v1/accounts/:id/unblock."""
    user = _account_or_404(call, raw_id)
    controls.block_delete(actor=call.me, target_id=user.pk)
    return _relationship(call, user.pk)


@endpoint("POST", scope="write:mutes")
def account_mute(call: Call, raw_id: str) -> JsonResponse:
    """POST /api/v1/accounts/:id/mute (``duration`` seconds; 0 or none: until unmuted)."""
    user = _account_or_404(call, raw_id)
    raw = call.get("duration")
    seconds = 0
    if raw not in (None, ""):
        try:
            seconds = int(str(raw))
        except ValueError:
            raise ApiError("Validation failed: duration must be a number of seconds", 422) from None
        if seconds < 0:
            raise ApiError("Validation failed: duration must not be negative", 422)
    controls.mute_create(actor=call.me, target_id=user.pk, duration=timedelta(seconds=seconds) if seconds else None)
    return _relationship(call, user.pk)


@endpoint("POST", scope="write:mutes")
def account_unmute(call: Call, raw_id: str) -> JsonResponse:
    """POST /api/v1/accounts/:id/unmute."""
    user = _account_or_404(call, raw_id)
    controls.mute_delete(actor=call.me, target_id=user.pk)
    return _relationship(call, user.pk)


@endpoint("GET", scope="read:blocks")
def blocks(call: Call) -> JsonResponse:
    """GET /api/v1/blocks: the accounts the caller blocks, newest first."""
    limit = call.limit(ACCOUNT_LIMIT, ACCOUNT_LIMIT_MAX)
    cursor, above = _list_cursors(call, control_cursor)
    page = social_selectors.blocked_by(user_id=call.me.pk, cursor=cursor, limit=limit, above=above)
    return _with_list_link(
        call, json_list(formatting.accounts_json(call.request, [user for user in page.entries if user.is_active])), page, limit
    )


@endpoint("GET", scope="read:mutes")
def mutes(call: Call) -> JsonResponse:
    """GET /api/v1/mutes: the accounts the caller mutes now, newest first (``mute_expires_at``)."""
    limit = call.limit(ACCOUNT_LIMIT, ACCOUNT_LIMIT_MAX)
    cursor, above = _list_cursors(call, control_cursor)
    page = social_selectors.muted_by(user_id=call.me.pk, cursor=cursor, limit=limit, above=above)
    shapes = []
    for entry in page.entries:
        if entry.user.is_active:
            shape = formatting.account_json(call.request, entry.user)
            shape["mute_expires_at"] = formatting.iso(entry.expires_at)
            shapes.append(shape)
    return _with_list_link(call, json_list(shapes), page, limit)


def _list_cursors(call: Call, parse: Callable[[str], Cursor | None]) -> tuple[Cursor | None, Cursor | None]:
    """``(max_id, min_id)`` of an account list's request, each parsed by ``parse`` (a 400 when it is
    not a position this list gave out)."""

    def position(name: str) -> Cursor | None:
        raw = call.get(name)
        return parse(str(raw)) if raw not in (None, "") else None

    return position("max_id"), position("min_id")


def _with_list_link(call: Call, response: JsonResponse, page: Any, limit: int) -> JsonResponse:
    """``response`` with the ``Link`` header of an account list's ``page`` (its ``next_cursor`` and
    ``prev_cursor``): ``next`` (older, ``max_id``) first, then ``prev`` (newer, ``min_id``)."""
    base = call.request.build_absolute_uri(call.request.path)
    parts = []
    if page.next_cursor is not None:
        parts.append(f'<{base}?max_id={page.next_cursor}&limit={limit}>; rel="next"')
    if page.prev_cursor is not None:
        parts.append(f'<{base}?min_id={page.prev_cursor}&limit={limit}>; rel="prev"')
    if parts:
        response["Link"] = ", ".join(parts)
    return response


@endpoint("GET", scope="read:follows")
def follow_requests(call: Call) -> JsonResponse:
    """GET /api/v1/follow_requests: the accounts asking to follow the caller, newest first."""
    limit = call.limit(ACCOUNT_LIMIT, ACCOUNT_LIMIT_MAX)
    cursor, above = _list_cursors(call, request_cursor)
    page = social_selectors.follow_requests_page(target_id=call.me.pk, cursor=cursor, limit=limit, above=above)
    return _with_list_link(
        call, json_list(formatting.accounts_json(call.request, [entry.user for entry in page.entries])), page, limit
    )


@endpoint("POST", scope="write:follows")
def follow_request_authorize(call: Call, raw_id: str) -> JsonResponse:
    """POST /api/v1/follow_requests/:id/authorize: the account follows the caller now."""
    user_id = parse_id(raw_id, name="id")
    controls.follow_request_approve(actor=call.me, requester_id=user_id)
    return _relationship(call, user_id)


@endpoint("POST", scope="write:follows")
def follow_request_reject(call: Call, raw_id: str) -> JsonResponse:
    """POST /api/v1/follow_requests/:id/reject."""
    user_id = parse_id(raw_id, name="id")
    if not controls.follow_request_reject(actor=call.me, requester_id=user_id):
        raise NotFound("Record not found")
    return _relationship(call, user_id)


@endpoint("GET", scope="read")
def suggestions_v2(call: Call) -> JsonResponse:
    """GET /api/v2/suggestions: who to follow, with Mastodon's source."""
    limit = call.limit(ACCOUNT_LIMIT, ACCOUNT_LIMIT_MAX)
    found = social_selectors.suggestions_for(user_id=call.me.pk, limit=limit)
    return json_list(
        [
            {
                "source": "global" if not item.via else "past_interactions",
                "sources": ["featured"] if not item.via else ["friends_of_friends"],
                "account": formatting.account_json(call.request, item.user),
            }
            for item in found.items
        ]
    )


@endpoint("GET", scope="read")
def suggestions_v1(call: Call) -> JsonResponse:
    """GET /api/v1/suggestions: who to follow, as accounts."""
    limit = call.limit(ACCOUNT_LIMIT, ACCOUNT_LIMIT_MAX)
    found = social_selectors.suggestions_for(user_id=call.me.pk, limit=limit)
    return json_list([formatting.account_json(call.request, item.user) for item in found.items])


# --- statuses and the home timeline ---------------------------------------------------


@endpoint("POST", scope="write:statuses")
def status_create(call: Call) -> JsonResponse:
    """POST /api/v1/statuses: publish a note (``status``; ``Idempotency-Key`` makes a retry safe).

    ``visibility`` (public, unlisted, private: followers only, direct: the author only) and
    ``spoiler_text`` (a content warning) are the note's own.
    """
    text = call.get("status")
    if text is None or str(text).strip() == "":
        raise ApiError("Validation failed: Text can't be blank", 422)
    wanted = str(call.get("visibility") or "public")
    if call.get("media_ids") or call.get_list("media_ids") or call.get("poll") or call.get("in_reply_to_id"):
        raise ApiError("Validation failed: media, polls and replies are not supported here", 422)
    note = services.status_publish(
        author=call.me,
        body=str(text),
        visibility=wanted,
        spoiler_text=str(call.get("spoiler_text") or ""),
        idempotency_key=call.request.headers.get("Idempotency-Key"),
    )
    note.author = call.me
    return JsonResponse(formatting.status_json(call.request, note))


def _note_or_404(call: Call, raw_id: str) -> Note:
    try:
        note_id = parse_id(raw_id, name="id")
    except InvalidInput:
        raise NotFound("Record not found") from None
    note = feed_selectors.note_detail(note_id=note_id, viewer_id=call.user.pk if call.user is not None else None)
    if note is None or not _may_see_content(call, note.author):
        raise NotFound("Record not found")
    return note


@endpoint("GET", "DELETE", scope=None, user=False, token=False)
def status_item(call: Call, raw_id: str) -> JsonResponse:
    """GET /api/v1/statuses/:id: a note the caller may see (404 otherwise). DELETE: its author
    deletes it and gets it back (``text`` holds the source)."""
    if call.request.method == "DELETE":
        if call.user is None:
            return error("The access token is invalid", 401)
        assert call.token is not None
        if not services.covers(call.token.scope, "write:statuses"):
            return error("This action is outside the authorized scopes", 403)
        note = _note_or_404(call, raw_id)
        if note.author_id != call.user.pk:
            raise NotFound("Record not found")
        note_delete(note=note, actor=call.user)
        shape = formatting.status_json(call.request, note)
        shape["text"] = note.body
        return JsonResponse(shape)
    if call.token is not None and not services.covers(call.token.scope, "read:statuses"):
        return error("This action is outside the authorized scopes", 403)
    return JsonResponse(formatting.status_json(call.request, _note_or_404(call, raw_id)))


@endpoint("GET", scope="read:statuses")
def timeline_home(call: Call) -> JsonResponse:
    """GET /api/v1/timelines/home: the home feed (the same inbox read as the home page) with the
    caller's own notes, as Mastodon's, paged by ``max_id``/``since_id``/``min_id`` and ``limit``;
    a visit, as the home page's (an account that only uses the API keeps a maintained inbox)."""
    read = selectors.home_with_own(user=call.me)
    found: list[feed_selectors.TimelinePage] = []

    def reading(cursor: Cursor | None, limit: int) -> feed_selectors.TimelinePage:
        page = read(cursor, limit)
        found.append(page)
        return page

    # The facts of the statuses came with the pages (their own notes' query).
    response = _timeline(call, reading, facts_of=lambda: selectors.facts_of_pages(found))
    # What the read learnt of the inbox spares the visit asking Redis again.
    feed_services.feed_visit(user=call.me, synced=_inbox_synced(found))
    return response


def _inbox_synced(pages: list[feed_selectors.TimelinePage]) -> bool | None:
    """Whether the home timeline's reads found the inbox synced (None: Redis answered none of them)."""
    seen = {page.inbox_synced for page in pages}
    if False in seen:
        return False
    return True if True in seen else None


def _timeline(
    call: Call, read: selectors.Reader, facts_of: Callable[[], selectors.StatusFacts | None] | None = None
) -> JsonResponse:
    """The statuses of the timeline ``read`` paged by the call's ``max_id``/``since_id``/``min_id``/``limit``
    (``facts_of``: the ``StatusFacts`` the reads learnt, asked once they are done)."""
    limit = call.limit(STATUS_LIMIT, STATUS_LIMIT_MAX)
    notes, more = selectors.timeline_window(
        read, max_id=call.id_param("max_id"), since_id=call.id_param("since_id"), min_id=call.id_param("min_id"), limit=limit
    )
    return _statuses_response(call, notes, more, facts_of() if facts_of is not None else None)


# --- read markers -------------------------------------------------------------------


def _marker_positions(call: Call) -> dict[str, int]:
    """The ``last_read_id`` of each timeline a ``POST /api/v1/markers`` names (form
    ``home[last_read_id]`` or JSON ``{"home": {"last_read_id": ...}}``); other names are ignored.

    :raises ApiError: a ``last_read_id`` that is missing or not an id (422).
    """
    positions: dict[str, int] = {}
    for timeline in MARKER_TIMELINES:
        nested = call.params.get(timeline)
        raw = nested.get("last_read_id") if isinstance(nested, dict) else call.params.get(f"{timeline}[last_read_id]")
        if raw is None and nested is None:
            continue
        try:
            positions[timeline] = parse_id(raw, name="last_read_id")
        except InvalidInput:
            raise ApiError(f"Validation failed: {timeline} last_read_id must be an id", 422) from None
    return positions


@endpoint("GET", "POST", scope=None)
def markers(call: Call) -> JsonResponse:
    """GET /api/v1/markers?timeline[]=home&timeline[]=notifications: the caller's markers of those
    timelines (read:statuses). POST: set them (write:statuses; 409 on a concurrent write)."""
    assert call.token is not None  # the endpoint needs a token
    if call.request.method == "POST":
        if not services.covers(call.token.scope, "write:statuses"):
            return error("This action is outside the authorized scopes", 403)
        written = user_services.markers_set(user_id=call.me.pk, positions=_marker_positions(call))
        return JsonResponse({timeline: formatting.marker_json(marker) for timeline, marker in written.items()})
    if not services.covers(call.token.scope, "read:statuses"):
        return error("This action is outside the authorized scopes", 403)
    found = user_selectors.markers_of(user_id=call.me.pk, timelines=call.get_list("timeline"))
    return JsonResponse({timeline: formatting.marker_json(marker) for timeline, marker in found.items()})


# --- lists --------------------------------------------------------------------------

LIST_ACCOUNT_LIMIT = 40
LIST_ACCOUNT_LIMIT_MAX = 80


def _require(call: Call, scope: str) -> None:
    """Check the token covers ``scope`` (an endpoint whose methods need different scopes).

    :raises ApiError: it does not (403).
    """
    assert call.token is not None
    if not services.covers(call.token.scope, scope):
        raise ApiError(OUT_OF_SCOPE, 403)


def _list_or_404(call: Call, raw_id: str) -> List:
    """The caller's list ``raw_id``; another reader's list, or none, is not found (404)."""
    found = feed_selectors.list_of(owner_id=call.me.pk, list_id=_id_or_404(raw_id))
    if found is None:
        raise NotFound("Record not found")
    return found


def _list_fields(call: Call) -> dict[str, Any]:
    """The ``title``, ``replies_policy`` and ``exclusive`` parameters given (absent: left out)."""
    fields: dict[str, Any] = {}
    if (title := call.text("title")) is not None:
        fields["title"] = title
    if (policy := call.text("replies_policy")) not in (None, ""):
        fields["replies_policy"] = policy
    if call.get("exclusive") is not None:
        fields["exclusive"] = call.flag("exclusive")
    return fields


@endpoint("GET", "POST")
def lists(call: Call) -> JsonResponse:
    """GET /api/v1/lists: the caller's lists. POST: create one (``title``, ``replies_policy``, ``exclusive``)."""
    if call.request.method == "GET":
        _require(call, "read:lists")
        return json_list([formatting.list_json(found) for found in feed_selectors.lists_of(owner_id=call.me.pk)])
    _require(call, "write:lists")
    fields = _list_fields(call)
    title = fields.pop("title", "")
    if not title.strip():
        raise ApiError("Validation failed: Title can't be blank", 422)
    created = feed_services.list_create(owner=call.me, title=title, **fields)
    return JsonResponse(formatting.list_json(created))


@endpoint("GET", "PUT", "DELETE")
def list_item(call: Call, raw_id: str) -> JsonResponse:
    """GET /api/v1/lists/:id; PUT: change its ``title``, ``replies_policy`` or ``exclusive``; DELETE: delete it."""
    method = call.request.method
    _require(call, "read:lists" if method == "GET" else "write:lists")
    found = _list_or_404(call, raw_id)
    if method == "GET":
        return JsonResponse(formatting.list_json(found))
    if method == "DELETE":
        feed_services.list_delete(list_=found)
        return JsonResponse({})
    return JsonResponse(formatting.list_json(feed_services.list_update(list_=found, **_list_fields(call))))


def _account_ids(call: Call) -> list[int]:
    """The ids of ``account_ids[]`` (a malformed one: 400; none: 422)."""
    raw = call.get_list("account_ids")
    if not raw:
        raise ApiError("Validation failed: account_ids can't be blank", 422)
    return [parse_id(item, name="account_ids") for item in raw]


@endpoint("GET", "POST", "DELETE")
def list_accounts(call: Call, raw_id: str) -> JsonResponse:
    """GET /api/v1/lists/:id/accounts: its members, paged by ``max_id``/``min_id``/``since_id`` and
    ``limit`` (0: all) with a ``Link`` header. POST ``account_ids[]``: add accounts the caller
    follows (422 otherwise). DELETE ``account_ids[]``: remove them."""
    method = call.request.method
    _require(call, "read:lists" if method == "GET" else "write:lists")
    found = _list_or_404(call, raw_id)
    if method == "POST":
        feed_services.list_members_add(list_=found, account_ids=_account_ids(call))
        return JsonResponse({})
    if method == "DELETE":
        feed_services.list_members_remove(list_=found, account_ids=_account_ids(call))
        return JsonResponse({})
    everyone = str(call.get("limit") or "").strip() == "0"
    limit = LIST_ACCOUNT_LIMIT if everyone else call.limit(LIST_ACCOUNT_LIMIT, LIST_ACCOUNT_LIMIT_MAX)
    page = feed_selectors.list_members_page(
        list_id=found.pk,
        max_id=call.id_param("max_id"),
        min_id=call.id_param("min_id"),
        since_id=call.id_param("since_id"),
        limit=None if everyone else limit,
    )
    return _with_list_link(call, json_list(formatting.accounts_json(call.request, page.entries)), page, limit)


@endpoint("GET", scope="read:lists")
def account_lists(call: Call, raw_id: str) -> JsonResponse:
    """GET /api/v1/accounts/:id/lists: the caller's lists holding the account."""
    user = _account_or_404(call, raw_id)
    return json_list(
        [formatting.list_json(found) for found in feed_selectors.lists_holding(owner_id=call.me.pk, account_id=user.pk)]
    )


@endpoint("GET", scope="read:lists")
def timeline_list(call: Call, raw_id: str) -> JsonResponse:
    """GET /api/v1/timelines/list/:id: the list's timeline, paged as ``timeline_home``."""
    found = _list_or_404(call, raw_id)

    asked = False

    def read(cursor: Cursor | None, n: int) -> feed_selectors.TimelinePage:
        nonlocal asked
        page = feed_selectors.list_timeline(reader_id=call.me.pk, list_id=found.pk, cursor=cursor, limit=n)
        # Once a request: a paging scan reads several pages.
        if page.kept is False and not asked:
            asked = True
            feed_services.list_timeline_keep(user=call.me, list_id=found.pk)
        return page

    return _timeline(call, read)


# --- notifications ------------------------------------------------------------------

KINDS_OF_TYPE = {"follow": ["follow", "request_approved"], "follow_request": ["follow_request"]}


def _kinds(call: Call) -> list[str] | None:
    types = call.get_list("types")
    excluded = set(call.get_list("exclude_types"))
    if not types and not excluded:
        return None
    wanted = types or list(KINDS_OF_TYPE)
    return [kind for name in wanted if name not in excluded for kind in KINDS_OF_TYPE.get(name, [])]


@endpoint("GET", scope="read:notifications")
def notifications_list(call: Call) -> JsonResponse:
    """GET /api/v1/notifications (``types[]``, ``exclude_types[]``, ``max_id``/``since_id``/``min_id``, ``limit``)."""
    limit = call.limit(NOTIFICATION_LIMIT, NOTIFICATION_LIMIT_MAX)
    rows = selectors.notifications_page(
        recipient_id=call.me.pk,
        kinds=_kinds(call),
        max_id=call.id_param("max_id"),
        since_id=call.id_param("since_id"),
        min_id=call.id_param("min_id"),
        limit=limit,
    )
    link = formatting.link_header(
        call.request, newest=str(rows[0].pk) if rows else None, oldest=str(rows[-1].pk) if rows else None, more=len(rows) == limit
    )
    return with_link(json_list([formatting.notification_json(call.request, row) for row in rows]), link)


def _notification_or_404(call: Call, raw_id: str) -> Any:
    row = selectors.notification_of(recipient_id=call.me.pk, notification_id=_id_or_404(raw_id))
    if row is None:
        raise NotFound("Record not found")
    return row


@endpoint("GET", scope="read:notifications")
def notification_detail(call: Call, raw_id: str) -> JsonResponse:
    """GET /api/v1/notifications/:id."""
    return JsonResponse(formatting.notification_json(call.request, _notification_or_404(call, raw_id)))


@endpoint("POST", scope="write:notifications")
def notification_dismiss(call: Call, raw_id: str) -> JsonResponse:
    """POST /api/v1/notifications/:id/dismiss: the caller's clients stop showing it."""
    row = _notification_or_404(call, raw_id)
    services.notification_dismiss(recipient=call.me, notification_id=row.pk, created_at=row.created_at)
    return JsonResponse({})


@endpoint("POST", scope="write:notifications")
def notifications_clear(call: Call) -> JsonResponse:
    """POST /api/v1/notifications/clear: every notification so far, dismissed."""
    services.notifications_clear(recipient=call.me)
    return JsonResponse({})


@endpoint("GET", scope="read:notifications")
def notifications_unread_count(call: Call) -> JsonResponse:
    """GET /api/v1/notifications/unread_count: followfeed's unread counter."""
    return JsonResponse({"count": unread_count(user_id=call.me.pk)})


@endpoint("GET", "POST", "DELETE", "PUT", "PATCH", token=False, user=False)
def not_found(call: Call, rest: str = "") -> JsonResponse:
    """Any other address under /api/v1 or /api/v2: Mastodon's 404."""
    return error("Record not found", 404)


def _groups_json(call: Call, groups: list[tuple[str, list[Any]]], *, full: bool = True) -> dict[str, Any]:
    accounts: dict[int, dict[str, Any]] = {}
    shapes = []
    for key, rows in groups:
        for row in rows:
            if row.actor_id not in accounts:
                accounts[row.actor_id] = formatting.account_json(call.request, row.actor)
        newest = rows[0]
        shapes.append(
            {
                "group_key": key,
                "notifications_count": len(rows),
                "type": formatting.NOTIFICATION_TYPES.get(newest.kind, newest.kind),
                "most_recent_notification_id": str(newest.pk),
                "page_min_id": str(rows[-1].pk),
                "page_max_id": str(newest.pk),
                "latest_page_notification_at": formatting.iso(newest.created_at),
                "sample_account_ids": list(dict.fromkeys(str(row.actor_id) for row in rows))[:8],
                "status_id": None,
            }
        )
    listed = list(accounts.values())
    if not full:
        listed = [
            {key: shape[key] for key in ("id", "acct", "url", "avatar", "avatar_static", "locked", "bot")} for shape in listed
        ]
    return {
        "accounts": listed if full else [],
        "partial_accounts": [] if full else listed,
        "statuses": [],
        "notification_groups": shapes,
    }


@endpoint("GET", scope="read:notifications")
def grouped_notifications(call: Call) -> JsonResponse:
    """GET /api/v2/notifications: notifications grouped as Mastodon groups them (follows of a day)."""
    limit = call.limit(NOTIFICATION_LIMIT, NOTIFICATION_LIMIT_MAX)
    page = selectors.grouped_notifications_page(
        recipient_id=call.me.pk,
        kinds=_kinds(call),
        max_id=call.id_param("max_id"),
        since_id=call.id_param("since_id"),
        min_id=call.id_param("min_id"),
        limit=limit,
    )
    body = _groups_json(call, page.groups, full=call.get("expand_accounts") != "partial_avatars")
    ids = [row.pk for _, rows in page.groups for row in rows]
    link = formatting.link_header(
        call.request, newest=str(max(ids)) if ids else None, oldest=str(min(ids)) if ids else None, more=page.more
    )
    return with_link(JsonResponse(body), link)


def _group_or_404(call: Call, key: str) -> list[Any]:
    rows = selectors.notification_group(recipient_id=call.me.pk, key=key)
    if not rows:
        raise NotFound("Record not found")
    return rows


@endpoint("GET", scope="read:notifications")
def grouped_notification(call: Call, key: str) -> JsonResponse:
    """GET /api/v2/notifications/:group_key."""
    return JsonResponse(_groups_json(call, [(key, _group_or_404(call, key))]))


@endpoint("GET", scope="read:notifications")
def grouped_notification_accounts(call: Call, key: str) -> JsonResponse:
    """GET /api/v2/notifications/:group_key/accounts: the group's accounts, newest first."""
    rows = _group_or_404(call, key)
    seen: dict[int, Any] = {}
    for row in rows:
        seen.setdefault(row.actor_id, row.actor)
    return json_list([formatting.account_json(call.request, user) for user in seen.values()])


@endpoint("POST", scope="write:notifications")
def grouped_notification_dismiss(call: Call, key: str) -> JsonResponse:
    """POST /api/v2/notifications/:group_key/dismiss: every notification of the group, dismissed."""
    for row in _group_or_404(call, key):
        services.notification_dismiss(recipient=call.me, notification_id=row.pk, created_at=row.created_at)
    return JsonResponse({})


@endpoint("GET", scope="read:notifications")
def grouped_unread_count(call: Call) -> JsonResponse:
    """GET /api/v2/notifications/unread_count."""
    return JsonResponse({"count": unread_count(user_id=call.me.pk)})

"""Server-rendered pages of the follow graph: parse input, call one selector or service, render.

Errors raised below (a malformed cursor, an unknown account) are answered
by ``core.errors`` with the site's error page.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from core.errors import DomainError, InvalidInput, NotFound, error_response, wants_json
from core.http import redirect_to_canonical
from core.paging import control_cursor, follow_cursor, request_cursor
from core.parsing import parse_decision, parse_mute_duration, username_problem
from users.forms import DirectorySearchForm
from users.models import User
from users.selectors import users_search

from . import controls, selectors, services, transfer, visibility
from .outbox import suggestions_request


@require_safe
def directory(request: HttpRequest) -> HttpResponse:
    """/: search accounts by username; the most-followed accounts below."""
    form = DirectorySearchForm(request.GET or None)
    results = users_search(query=form.cleaned_data["q"]) if form.is_valid() else []
    viewer = _viewer(request)
    viewer_id = viewer.pk if viewer is not None else None
    popular = selectors.users_most_followed()
    context = {
        "form": form,
        "results": visibility.without_hidden(results, viewer_id=viewer_id, user_id_of=[user.pk for user in results]),
        "searched": bool(request.GET.get("q")),
        "popular": visibility.without_hidden(popular, viewer_id=viewer_id, user_id_of=[user.pk for user, _ in popular]),
    }
    return render(request, "social/user_directory.html", context)


def _viewer(request: HttpRequest) -> User | None:
    return request.user if isinstance(request.user, User) else None


def _list_page(request: HttpRequest, username: str, *, kind: str) -> HttpResponse:
    viewer = _viewer(request)
    user, seen = visibility.shown_account(viewer=viewer, username=username)
    if user.username != username:
        return redirect_to_canonical(request, f"social:{kind}", username=user.username)
    visibility.content_shown(seen, user=user)
    found = selectors.follow_list(
        kind=kind,
        user_id=user.pk,
        cursor=follow_cursor(request.GET.get("cursor")),
        limit=settings.FOLLOW_PAGE_SIZE,
        viewer_id=viewer.pk if viewer else None,
    )
    context = {
        "profile_user": user,
        "kind": kind,
        "page": found.page,
        "entries": found.shown,
        "is_self": viewer is not None and viewer.pk == user.pk,
        "counts": found.counts,
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
    target = _named(username)
    action = services.follow_create if following else services.follow_delete
    try:
        result = action(actor=request.user, followee_id=target.pk)
    except DomainError as exc:
        if wants_json(request) or exc.status == 404:
            raise
        # A form post (refused, or over a limit): its status and reason, and the way back.
        back = (reverse("feed:profile", kwargs={"username": target.username}), f"Back to @{target.username}")
        return error_response(
            request, status=exc.status, message=exc.message, retry_after=getattr(exc, "retry_after", None), back=back
        )
    if wants_json(request):
        counts = selectors.follow_counts(user_id=target.pk)
        return JsonResponse(
            {
                "success": True,
                "following": following and not result.requested,
                "requested": following and result.requested,
                "followers": counts.followers,
            }
        )
    if result.requested and following:
        messages.success(request, f"Follow request sent: @{target.username} approves its followers.")
    if request.POST.get("next") == "suggestions":
        if following:
            messages.success(request, f"You follow @{target.username} now.")
        return redirect("social:suggestions")
    return redirect("feed:profile", username=target.username)


def _named(username: str) -> User:
    # Names are unique whatever their case, as the profile finds them.
    target = User.objects.filter(username__iexact=username).first() if username_problem(username) is None else None
    if target is None:
        raise NotFound("No such account.")
    return target


def _control(request: HttpRequest, username: str, action: Callable[[User, User], str], *, back: str = "profile") -> HttpResponse:
    """Run ``action(actor, target)`` (a control service), then back with its message; a refused
    action answers its 4xx with the reason and a link back, a missing account 404."""
    assert isinstance(request.user, User)  # login_required ran
    target = _named(username)
    destinations = {
        "settings": (reverse("social:settings"), "Back to your settings"),
        "requests": (reverse("social:follow_requests"), "Back to your follow requests"),
        "followers": (reverse("social:followers", kwargs={"username": request.user.username}), "Back to your followers"),
    }
    url, label = destinations.get(back) or (
        reverse("feed:profile", kwargs={"username": target.username}),
        f"Back to @{target.username}",
    )
    try:
        done = action(request.user, target)
    except DomainError as exc:
        if exc.status == 404:
            raise
        return error_response(request, status=exc.status, message=exc.message, back=(url, label))
    messages.success(request, done)
    return redirect(url)


def _back(request: HttpRequest) -> str:
    return request.POST.get("back", "profile") if request.POST.get("back") in {"settings", "requests", "followers"} else "profile"


@require_POST
@login_required
def block(request: HttpRequest, username: str) -> HttpResponse:
    """POST /u/<username>/block/ (CSRF): block the account (both follows end)."""

    def act(actor: User, target: User) -> str:
        controls.block_create(actor=actor, target_id=target.pk)
        return f"You block @{target.username}. Neither of you follows or sees the other now."

    return _control(request, username, act, back=_back(request))


@require_POST
@login_required
def unblock(request: HttpRequest, username: str) -> HttpResponse:
    """POST /u/<username>/unblock/ (CSRF): unblock (no follow comes back by itself)."""

    def act(actor: User, target: User) -> str:
        controls.block_delete(actor=actor, target_id=target.pk)
        return f"You unblocked @{target.username}."

    return _control(request, username, act, back=_back(request))


@require_POST
@login_required
def mute(request: HttpRequest, username: str) -> HttpResponse:
    """POST /u/<username>/mute/ (CSRF; ``duration`` 1d, 7d or forever): mute the account's notes."""
    duration = parse_mute_duration(request.POST.get("duration", "forever"))

    def act(actor: User, target: User) -> str:
        controls.mute_create(actor=actor, target_id=target.pk, duration=duration)
        return f"You muted @{target.username}: their notes stay out of your home feed."

    return _control(request, username, act, back=_back(request))


@require_POST
@login_required
def unmute(request: HttpRequest, username: str) -> HttpResponse:
    """POST /u/<username>/unmute/ (CSRF)."""

    def act(actor: User, target: User) -> str:
        controls.mute_delete(actor=actor, target_id=target.pk)
        return f"You unmuted @{target.username}."

    return _control(request, username, act, back=_back(request))


@require_POST
@login_required
def remove_follower(request: HttpRequest, username: str) -> HttpResponse:
    """POST /u/<username>/remove-follower/ (CSRF): make the account stop following you."""

    def act(actor: User, target: User) -> str:
        controls.follower_remove(actor=actor, follower_id=target.pk)
        return f"@{target.username} no longer follows you."

    return _control(request, username, act, back=_back(request))


@require_POST
@login_required
def follow_request_decide(request: HttpRequest, username: str, decision: str) -> HttpResponse:
    """POST /requests/<username>/<approve|reject>/ (CSRF): decide a pending follow request."""
    approve = parse_decision(decision)

    def act(actor: User, target: User) -> str:
        if approve:
            controls.follow_request_approve(actor=actor, requester_id=target.pk)
            return f"@{target.username} follows you now."
        controls.follow_request_reject(actor=actor, requester_id=target.pk)
        return f"You rejected @{target.username}'s request."

    return _control(request, username, act, back="requests")


@require_safe
@login_required
def follow_requests(request: HttpRequest) -> HttpResponse:
    """/requests/: the follow requests to the signed-in account, newest first, cursor-paged."""
    assert isinstance(request.user, User)
    page = selectors.follow_requests_page(
        target_id=request.user.pk, cursor=request_cursor(request.GET.get("cursor")), limit=settings.FOLLOW_PAGE_SIZE
    )
    return render(request, "social/follow_requests.html", {"page": page, "is_first_page": not request.GET.get("cursor")})


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def privacy_settings(request: HttpRequest) -> HttpResponse:
    """/settings/privacy/: "approve followers", and the accounts blocked and muted, newest first,
    each list paged by its own cursor (``?blocked=``, ``?muted=``) (POST: the setting)."""
    assert isinstance(request.user, User)
    if request.method == "POST":
        # A checkbox: "on" when ticked, absent when not; anything else changes nothing.
        ticked = request.POST.get("approve_followers")
        if ticked not in (None, "on"):
            raise InvalidInput("approve_followers must be on, or absent.")
        private = ticked == "on"
        approved = controls.account_privacy_set(actor=request.user, private=private)
        note = f" {approved} pending request{'s' if approved != 1 else ''} approved." if approved else ""
        messages.success(
            request, ("Your account is private: you approve new followers." if private else "Your account is public.") + note
        )
        return redirect("social:settings")
    context = {
        "blocked": selectors.blocked_by(
            user_id=request.user.pk, cursor=control_cursor(request.GET.get("blocked")), limit=settings.FOLLOW_PAGE_SIZE
        ),
        "muted": selectors.muted_by(
            user_id=request.user.pk, cursor=control_cursor(request.GET.get("muted")), limit=settings.FOLLOW_PAGE_SIZE
        ),
        "requests": selectors.follow_requests_count(target_id=request.user.pk),
    }
    return render(request, "social/privacy_settings.html", context)


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def follows_transfer(request: HttpRequest) -> HttpResponse:
    """/settings/follows/: download your follows as CSV; upload a file to import (POST, CSRF),
    with the latest import's progress bar."""
    assert isinstance(request.user, User)
    if request.method == "POST":
        upload = request.FILES.get("file")
        try:
            if upload is None:
                raise InvalidInput("Choose a file to import.")
            job = transfer.follows_import_start(
                actor=request.user, raw=bytes(upload.read(int(settings.FOLLOWS_IMPORT_MAX_BYTES) + 1))
            )
        except DomainError as exc:
            messages.error(request, exc.message)
            return render(
                request,
                "social/follows_transfer.html",
                {"latest": selectors.follows_import_latest(user_id=request.user.pk)},
                status=exc.status,
            )
        messages.success(request, f"Importing {job.total:,} accounts: the progress shows below.")
        return redirect("social:follows_transfer")
    return render(request, "social/follows_transfer.html", {"latest": selectors.follows_import_latest(user_id=request.user.pk)})


@require_safe
@login_required
def follows_export_download(request: HttpRequest) -> StreamingHttpResponse:
    """/settings/follows/export.csv: the same file as the API's export."""
    assert isinstance(request.user, User)
    response = StreamingHttpResponse(transfer.export_rows(user_id=request.user.pk), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="following_accounts.csv"'
    return response


@require_safe
@login_required
def suggestions(request: HttpRequest) -> HttpResponse:
    """/suggestions/: who to follow, with the reason; asks for a computation when none is stored."""
    assert isinstance(request.user, User)
    found = selectors.suggestions_for(user_id=request.user.pk, limit=20)
    if not found.computed:
        suggestions_request(user_id=request.user.pk)
    return render(request, "social/suggestions.html", {"found": found})

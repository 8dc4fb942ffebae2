"""Feed pages (``/home``, ``/notes/``, ``/n/<id>/``, ``/n/<id>/delete/``, ``/u/<username>/``,
``/u/<username>/notes/``, ``/lists/...``): parse input, call one service or selector, render. The pages:
docs/api.md#pages.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from core.errors import DomainError, InvalidInput, NotFound
from core.http import redirect_to_canonical, with_retry_after
from core.paging import feed_cursor
from social import selectors as social_selectors
from social import visibility
from users import services as user_services
from users.models import HOME, User
from users.selectors import active_user_named

from . import selectors, services
from .forms import ListForm, ListMemberForm, NoteForm, publish_fields_html
from .models import PUBLIC, List, Note


def _reader(request: HttpRequest) -> User:
    assert isinstance(request.user, User)  # login_required ran
    return request.user


@require_safe
def profile(request: HttpRequest, username: str) -> HttpResponse:
    """/u/<username>/: counts, follow button, badges, "you both follow", "followed by ... you follow",
    and the author's newest notes."""
    viewer = _viewer(request)
    user, seen = visibility.shown_account(viewer=viewer, username=username)
    if user.username != username:
        return redirect_to_canonical(request, "feed:profile", username=user.username)
    context: dict[str, Any] = {"profile_user": user, "access": seen, "is_self": viewer is not None and viewer.pk == user.pk}
    relationship: social_selectors.Relationship | None = None
    muting: bool | None = None
    if seen.content:
        # The viewer's blocks (left out of the samples) and mutes come with the graph.
        graph = social_selectors.profile_graph(
            user_id=user.pk, viewer_id=viewer.pk if viewer is not None else None, read_controls=viewer is not None
        )
        samples = graph.samples
        context.update(counts=graph.counts, mutual=samples.mutual, common=samples.common, familiar=samples.familiar)
        relationship, muting = graph.relationship, graph.muting
        context["notes"] = selectors.user_timeline(
            author=user,
            cursor=None,
            limit=10,
            viewer_id=viewer.pk if viewer is not None else None,
            viewer_follows=seen.follows if viewer is not None else None,
        )
    else:
        context["counts"] = social_selectors.follow_counts(user_id=user.pk)
    if viewer is not None and viewer.pk != user.pk:
        if relationship is None:
            relationship = social_selectors.relationship(viewer_id=viewer.pk, user_id=user.pk)
        context["relationship"] = relationship
        # Only a private account has requests (turning it public approves them all).
        context["requested"] = seen.private and social_selectors.follow_requested(requester_id=viewer.pk, target_id=user.pk)
        context["muting"] = muting if muting is not None else user.pk in visibility.muted_ids(user_id=viewer.pk)
        if context["relationship"].is_following:
            context["lists"] = selectors.lists_marked_holding(owner_id=viewer.pk, account_id=user.pk)
    return render(request, "feed/user_profile.html", context)


def _viewer(request: HttpRequest) -> User | None:
    return request.user if isinstance(request.user, User) else None


def _home(request: HttpRequest, form: NoteForm, *, status: int = 200, read: bool = False) -> HttpResponse:
    """The home page; ``read``: a visit (``feed_visit``), and its first page moves the home marker
    to the newest note shown, and a divider marks where the notes newer than the marker's old place end."""
    reader = _reader(request)
    is_first_page = not request.GET.get("cursor")
    page = selectors.home_timeline(
        user_id=reader.pk, cursor=feed_cursor(request.GET.get("cursor")), limit=settings.FEED_PAGE_SIZE
    )
    if read:
        # What the read learnt of the inbox spares the visit asking Redis again.
        services.feed_visit(user=reader, synced=page.inbox_synced)
    new_count = 0
    if read and is_first_page and page.notes:
        read_before = user_services.marker_advance(user_id=reader.pk, timeline=HOME, last_read_id=page.notes[0].pk)
        if read_before:
            new_count = next((index for index, note in enumerate(page.notes) if note.pk <= read_before), 0)
    context: dict[str, Any] = {
        "form": form,
        "publish_fields": publish_fields_html(form),
        "page": page,
        "is_first_page": is_first_page,
        "new_count": new_count,
        # Where the page's script listens for new notes (static/js/site.js, "live updates"); without
        # STREAMING_API_URL the page does not listen (gunicorn would answer a stream with a 503).
        "stream_url": (
            str(settings.STREAMING_API_URL).replace("ws", "http", 1) + "/api/v1/streaming/user"
            if settings.STREAMING_API_URL
            else ""
        ),
    }
    return render(request, "feed/home.html", context, status=status)


@require_safe
@login_required
def home(request: HttpRequest) -> HttpResponse:
    """/home: the signed-in user's home timeline, newest first, with the publish form."""
    return _home(request, NoteForm(), read=True)


@require_POST
@login_required
def note_create(request: HttpRequest) -> HttpResponse:
    """POST /notes/ (CSRF): publish a note, then back to /home (400 with the form's errors)."""
    form = NoteForm(request.POST)
    if not form.is_valid():
        return _home(request, form, status=400)
    try:
        note = services.note_create(
            author=_reader(request),
            body=form.cleaned_data["body"],
            visibility=form.cleaned_data.get("visibility") or PUBLIC,
            spoiler_text=form.cleaned_data.get("spoiler_text") or "",
        )
    except DomainError as exc:
        # Refused or over the limit: shown beside the form the text was typed in.
        form.add_error("body", exc.message)
        return with_retry_after(_home(request, form, status=exc.status), exc)
    messages.success(request, "Published. Your followers will see it in their home feed.")
    return redirect("feed:note_detail", note_id=note.pk)


@require_safe
def note_detail(request: HttpRequest, note_id: int) -> HttpResponse:
    """/n/<id>/: one note (404 when hidden, deleted, its author is deactivated or blocks the
    viewer; 403 for a private author's note to a non-follower)."""
    viewer = _viewer(request)
    note = selectors.note_detail(note_id=note_id, viewer_id=viewer.pk if viewer is not None else None)
    if note is None:
        raise NotFound("No such note.")
    visibility.require_content(viewer=viewer, user=note.author)
    return render(request, "feed/note_detail.html", {"note": note})


@require_POST
@login_required
def note_delete(request: HttpRequest, note_id: int) -> HttpResponse:
    """POST /n/<id>/delete/ (CSRF): the author deletes the note (403 for anyone else)."""
    note = Note.objects.filter(pk=note_id, deleted_at__isnull=True).first()
    if note is None:
        raise NotFound("No such note.")
    services.note_delete(note=note, actor=_reader(request))
    messages.success(request, "Note deleted.")
    return redirect("feed:user_notes", username=_reader(request).username)


@require_safe
def user_notes(request: HttpRequest, username: str) -> HttpResponse:
    """/u/<username>/notes/: the author's notes, newest first, 20 per page (``require_content``)."""
    viewer = _viewer(request)
    author, seen = visibility.shown_account(viewer=viewer, username=username)
    if author.username != username:
        return redirect_to_canonical(request, "feed:user_notes", username=author.username)
    visibility.content_shown(seen, user=author)
    page = selectors.user_timeline(
        author=author,
        cursor=feed_cursor(request.GET.get("cursor")),
        limit=settings.FEED_PAGE_SIZE,
        viewer_id=viewer.pk if viewer is not None else None,
        viewer_follows=seen.follows if viewer is not None else None,
    )
    context = {"profile_user": author, "page": page, "is_first_page": not request.GET.get("cursor")}
    return render(request, "feed/user_notes.html", context)


# --- lists ----------------------------------------------------------------------------


def _list_or_404(request: HttpRequest, list_id: int) -> List:
    found = selectors.list_of(owner_id=_reader(request).pk, list_id=list_id)
    if found is None:
        raise NotFound("No such list.")
    return found


def _invalid(form: ListForm | ListMemberForm) -> InvalidInput:
    return InvalidInput("; ".join(str(error) for errors in form.errors.values() for error in errors))


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def lists(request: HttpRequest) -> HttpResponse:
    """/lists/: the reader's lists and a form to create one; POST (CSRF) creates it (400 on bad input)."""
    if request.method == "POST":
        form = ListForm(request.POST)
        if not form.is_valid():
            raise _invalid(form)
        created = services.list_create(
            owner=_reader(request),
            title=form.cleaned_data["title"],
            replies_policy=form.cleaned_data.get("replies_policy") or "list",
            exclusive=form.cleaned_data["exclusive"],
        )
        messages.success(request, f"List “{created.title}” created.")
        return redirect("feed:list_detail", list_id=created.pk)
    context = {"lists": selectors.lists_of(owner_id=_reader(request).pk), "form": ListForm()}
    return render(request, "feed/list_index.html", context)


@require_safe
@login_required
def list_detail(request: HttpRequest, list_id: int) -> HttpResponse:
    """/lists/<id>/: the list's timeline (``?cursor=``), its members and its settings (404: not the reader's)."""
    found = _list_or_404(request, list_id)
    page = selectors.list_timeline(
        reader_id=_reader(request).pk,
        list_id=found.pk,
        cursor=feed_cursor(request.GET.get("cursor")),
        limit=settings.FEED_PAGE_SIZE,
    )
    if page.kept is False:
        services.list_timeline_keep(user=_reader(request), list_id=found.pk)
    members = selectors.list_members_page(list_id=found.pk, max_id=None, min_id=None, limit=None).entries
    form = ListForm(initial={"title": found.title, "replies_policy": found.replies_policy, "exclusive": found.exclusive})
    context = {"list": found, "page": page, "members": members, "form": form, "is_first_page": not request.GET.get("cursor")}
    return render(request, "feed/list_detail.html", context)


@require_POST
@login_required
def list_update(request: HttpRequest, list_id: int) -> HttpResponse:
    """POST /lists/<id>/edit/ (CSRF): rename it, change its policy or ``exclusive`` (400 on bad input)."""
    found = _list_or_404(request, list_id)
    form = ListForm(request.POST)
    if not form.is_valid():
        raise _invalid(form)
    services.list_update(
        list_=found,
        title=form.cleaned_data["title"],
        replies_policy=form.cleaned_data.get("replies_policy") or None,
        exclusive=form.cleaned_data["exclusive"],
    )
    messages.success(request, "List saved.")
    return redirect("feed:list_detail", list_id=found.pk)


@require_POST
@login_required
def list_delete(request: HttpRequest, list_id: int) -> HttpResponse:
    """POST /lists/<id>/delete/ (CSRF): delete the list."""
    services.list_delete(list_=_list_or_404(request, list_id))
    messages.success(request, "List deleted.")
    return redirect("feed:lists")


def _member(request: HttpRequest) -> User:
    """The active account named by the form's ``username`` (400 on bad input, 404 when unknown)."""
    form = ListMemberForm(request.POST)
    if not form.is_valid():
        raise _invalid(form)
    return active_user_named(form.cleaned_data["username"])


@require_POST
@login_required
def list_member_add(request: HttpRequest, list_id: int) -> HttpResponse:
    """POST /lists/<id>/members/ (CSRF) ``username``: add an account the reader follows (422 otherwise);
    back to the profile when ``next=profile``."""
    found = _list_or_404(request, list_id)
    account = _member(request)
    services.list_members_add(list_=found, account_ids=[account.pk])
    messages.success(request, f"@{account.username} added to “{found.title}”.")
    if request.POST.get("next") == "profile":
        return redirect("feed:profile", username=account.username)
    return redirect("feed:list_detail", list_id=found.pk)


@require_POST
@login_required
def list_member_remove(request: HttpRequest, list_id: int) -> HttpResponse:
    """POST /lists/<id>/members/remove/ (CSRF) ``username``: take the account out of the list;
    back to the profile when ``next=profile``."""
    found = _list_or_404(request, list_id)
    account = _member(request)
    services.list_members_remove(list_=found, account_ids=[account.pk])
    messages.success(request, f"@{account.username} removed from “{found.title}”.")
    if request.POST.get("next") == "profile":
        return redirect("feed:profile", username=account.username)
    return redirect("feed:list_detail", list_id=found.pk)

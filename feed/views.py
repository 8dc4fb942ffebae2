"""Feed pages: parse input, call one service or selector, render.

``/home`` (home timeline, publish form, "load more" as a plain link with the
cursor, so it works without JavaScript), ``/notes/`` (publish), ``/n/<id>/``
(a note), ``/n/<id>/delete/`` (author only), ``/u/<username>/notes/`` (an
author's notes).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest, HttpResponseForbidden
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from . import selectors, services
from .forms import NoteForm
from .models import Note

User = get_user_model()


def _reader_id(request: HttpRequest) -> int:
    user_id = request.user.pk
    assert isinstance(user_id, int)  # login_required ran
    return user_id


def _home(request: HttpRequest, form: NoteForm, *, status: int = 200) -> HttpResponse:
    try:
        page = selectors.home_timeline(
            user_id=_reader_id(request), cursor=request.GET.get("cursor"), limit=settings.FEED_PAGE_SIZE
        )
    except selectors.InvalidCursorError:
        return HttpResponseBadRequest("Malformed cursor.")
    context: dict[str, Any] = {"form": form, "page": page, "is_first_page": not request.GET.get("cursor")}
    return render(request, "feed/home.html", context, status=status)


@require_GET
@login_required
def home(request: HttpRequest) -> HttpResponse:
    """/home: the signed-in user's home timeline, newest first, with the publish form."""
    services.feed_visit(user=request.user)
    return _home(request, NoteForm())


@require_POST
@login_required
def note_create(request: HttpRequest) -> HttpResponse:
    """POST /notes/ (CSRF): publish a note, then back to /home (400 with the form's errors)."""
    form = NoteForm(request.POST)
    if not form.is_valid():
        return _home(request, form, status=400)
    try:
        note = services.note_create(author=request.user, body=form.cleaned_data["body"])
    except services.NoteError as exc:
        form.add_error("body", exc.message)
        return _home(request, form, status=exc.status)
    messages.success(request, "Published. Your followers will see it in their home feed.")
    return redirect("feed:note_detail", note_id=note.pk)


@require_GET
def note_detail(request: HttpRequest, note_id: int) -> HttpResponse:
    """/n/<id>/: one note (public; 404 when hidden, deleted or its author is deactivated)."""
    note = selectors.note_detail(note_id=note_id)
    if note is None:
        raise Http404("No such note.")
    return render(request, "feed/note_detail.html", {"note": note})


@require_POST
@login_required
def note_delete(request: HttpRequest, note_id: int) -> HttpResponse:
    """POST /n/<id>/delete/ (CSRF): the author deletes the note (403 for anyone else)."""
    note = get_object_or_404(Note, pk=note_id, deleted_at__isnull=True)
    try:
        services.note_delete(note=note, actor=request.user)
    except services.NoteForbiddenError as exc:
        return HttpResponseForbidden(exc.message)
    messages.success(request, "Note deleted.")
    return redirect("feed:user_notes", username=request.user.username)


@require_GET
def user_notes(request: HttpRequest, username: str) -> HttpResponse:
    """/u/<username>/notes/: the author's notes, newest first, 20 per page (public)."""
    author = get_object_or_404(User, username=username, is_active=True)
    try:
        page = selectors.user_timeline(author_id=author.pk, cursor=request.GET.get("cursor"), limit=settings.FEED_PAGE_SIZE)
    except selectors.InvalidCursorError:
        return HttpResponseBadRequest("Malformed cursor.")
    context = {"profile_user": author, "page": page, "is_first_page": not request.GET.get("cursor")}
    return render(request, "feed/user_notes.html", context)

"""Admin of notes: moderators hide and unhide (``feed.hide_note``), superusers delete
(``feed.delete_note``), both through the feed services so feeds follow; notes are not editable
and the bulk delete is replaced. Behaviour: docs/behaviours.md#moderators-and-the-admin.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.actions import delete_selected as django_delete_selected
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Prefetch, Q, QuerySet
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.template.defaultfilters import truncatechars
from django.urls import path, reverse

from core import health
from core.admin_tools import CanonicalIdsAdmin, EstimatedCountPaginator, bounded_count
from core.parsing import id_or_none
from users.admin import Operation, UserAdmin
from users.models import User
from users.selectors import user_ids_matching

from . import rebuild
from .health import inbox_reconcile_health
from .models import Note
from .services import note_delete, note_hide

# Notes one bulk action may hide, unhide or delete.
BULK_MAX = 1000


class NoteStateFilter(admin.SimpleListFilter):
    """Visible, hidden by a moderator, or deleted by its author."""

    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("visible", "visible"), ("hidden", "hidden"), ("deleted", "deleted")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "visible":
            return queryset.filter(is_hidden=False, deleted_at__isnull=True)
        if self.value() == "hidden":
            return queryset.filter(is_hidden=True)
        if self.value() == "deleted":
            return queryset.filter(deleted_at__isnull=False)
        return queryset


@admin.register(Note)
class NoteAdmin(CanonicalIdsAdmin, admin.ModelAdmin[Note]):
    """Notes: list, search by author or note id, filter by date and state, hide/unhide/delete via services."""

    list_display = ("id", "author", "excerpt", "created_at", "state")
    # Authors by id after the page query, not a join (the join made MariaDB
    # sort the whole table; see social.admin.FollowAdmin).
    list_select_related = ()
    list_filter = (NoteStateFilter, ("created_at", admin.DateFieldListFilter))
    search_fields = ("author__username",)  # shows the box; get_search_results does the work
    search_help_text = "An author's username prefix or id, or a note id."
    raw_id_fields = ("author",)
    fields = ("author", "body", "created_at", "is_hidden", "deleted_at", "fanned_out_at")
    readonly_fields = fields
    ordering = ("-id",)
    sortable_by = ("id",)
    list_per_page = 100
    show_full_result_count = False
    paginator = EstimatedCountPaginator
    change_form_template = "admin/feed/note/change_form.html"
    actions = ("hide_notes", "unhide_notes", "delete_selected")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        authors = User.objects.only("id", "username", "is_active")
        return super().get_queryset(request).prefetch_related(Prefetch("author", queryset=authors))

    @admin.display(description="body")
    def excerpt(self, obj: Note) -> str:
        return truncatechars(obj.body, 80)

    @admin.display(description="state")
    def state(self, obj: Note) -> str:
        if obj.deleted_at:
            return "deleted"
        if obj.is_hidden:
            return "hidden"
        return "visible" if obj.author.is_active else "author deactivated"

    def get_search_results(self, request: HttpRequest, queryset: QuerySet[Any], search_term: str) -> tuple[QuerySet[Any], bool]:
        """Match the author (username prefix or id, indexed) or the note's own id."""
        term = search_term.strip()
        if not term:
            return queryset, False
        condition = Q(author_id__in=user_ids_matching(term))
        note_id = id_or_none(term)
        if note_id is not None:
            condition |= Q(pk=note_id)
        return queryset.filter(condition), False

    # --- permissions: notes are published by authors, never edited here ----

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_hide_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """``feed.hide_note``: the moderators' permission (used by the hide/unhide actions)."""
        return bool(request.user.has_perm("feed.hide_note"))

    # --- deletes through the service ---------------------------------------

    def delete_model(self, request: HttpRequest, obj: Note) -> None:
        """Soft-delete one note with ``note_delete``; it leaves every feed after commit."""
        note_delete(note=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        """Soft-delete each note with ``note_delete`` in one transaction (never ``QuerySet.delete``)."""
        with transaction.atomic():
            for note in queryset.order_by("pk"):
                note_delete(note=note)

    # --- actions -------------------------------------------------------------

    def _too_many(self, request: HttpRequest, queryset: QuerySet[Any]) -> bool:
        if bounded_count(queryset, BULK_MAX) > BULK_MAX:
            self.message_user(request, f"Select at most {BULK_MAX} notes per action; nothing was done.", messages.ERROR)
            return True
        return False

    def _set_hidden(self, request: HttpRequest, notes: list[Note], hidden: bool) -> int:
        verb = "Hid" if hidden else "Unhid"
        changed = 0
        with transaction.atomic():
            for note in notes:
                if note_hide(note=note, hidden=hidden):
                    changed += 1
                    self.log_change(request, note, f"{verb} note {note.pk}.")
        return changed

    @admin.action(permissions=["hide"], description="Hide selected notes (they leave every feed)")
    def hide_notes(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        if self._too_many(request, queryset):
            return
        changed = self._set_hidden(request, list(queryset.order_by("pk")), True)
        self.message_user(request, f"Hid {changed} notes.", messages.SUCCESS)

    @admin.action(permissions=["hide"], description="Unhide selected notes (delivered again)")
    def unhide_notes(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        if self._too_many(request, queryset):
            return
        changed = self._set_hidden(request, list(queryset.order_by("pk")), False)
        self.message_user(request, f"Unhid {changed} notes.", messages.SUCCESS)

    @admin.action(permissions=["delete"], description="Delete selected notes (they leave every feed; at most 1000)")
    def delete_selected(self, request: HttpRequest, queryset: QuerySet[Any]) -> HttpResponse | None:
        """Django's confirm-then-delete action, capped, deleting through ``delete_queryset``."""
        if self._too_many(request, queryset):
            return None
        return django_delete_selected(self, request, queryset)

    # --- hide/unhide buttons on the note page --------------------------------

    def get_urls(self) -> list[Any]:
        moderate = path(
            "<path:object_id>/moderate/<str:operation>/",
            self.admin_site.admin_view(self.moderate_view),
            name="feed_note_moderate",
        )
        return [moderate, *super().get_urls()]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        extra_context = {**(extra_context or {}), "can_hide": self.has_hide_permission(request)}
        return super().change_view(request, object_id, form_url, extra_context)

    def moderate_view(self, request: HttpRequest, object_id: str, operation: str) -> HttpResponse:
        """POST ``<id>/moderate/hide/`` or ``.../unhide/``: one note, logged.

        :raises Http404: unknown operation or note.
        :raises PermissionDenied: without ``feed.hide_note`` (403).
        """
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if operation not in ("hide", "unhide"):
            raise Http404("No such operation.")
        if not self.has_hide_permission(request):
            raise PermissionDenied
        note = self.get_object(request, unquote(object_id))
        if note is None:
            raise Http404("No such note.")
        changed = self._set_hidden(request, [note], operation == "hide")
        state = "hidden" if operation == "hide" else "visible"
        self.message_user(request, f"Note {note.pk} is {state}." if changed else f"Note {note.pk} was already {state}.")
        return HttpResponseRedirect(reverse("admin:feed_note_change", args=[note.pk]))


def _rebuild_inbox(user: User) -> str:
    result = rebuild.inbox_rebuild(user_id=user.pk)
    return f"Rebuilt the inbox of {user.username}: {result.entries} notes."


health.register_section("inbox_reconcile", inbox_reconcile_health)
health.register_reconcile("inboxes", inbox_reconcile_health, drift_figures=("readers_drifted",))
UserAdmin.add_operation(
    Operation(
        name="rebuild-inbox",
        action="rebuild_inboxes",
        label="Rebuild inbox",
        run=_rebuild_inbox,
        permission="view",
        description="Rebuild the inbox (home feed) of selected accounts",
    )
)

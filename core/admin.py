"""Admin of the outbox: a read-only list of entries and the mirror health page (``health/``).

Both need ``core.view_outboxentry`` (superusers, or operators given it);
the moderators group does not have it.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path

from .admin_tools import CanonicalIdsAdmin, EstimatedCountPaginator
from .health import mirror_health
from .models import OutboxEntry


@admin.register(OutboxEntry)
class OutboxEntryAdmin(CanonicalIdsAdmin, admin.ModelAdmin[OutboxEntry]):
    """Read-only view of the outbox, and the mirror health page."""

    list_display = ("id", "kind", "subject_id", "object_id", "created_at", "applied_at", "attempts", "last_error")
    list_filter = (("applied_at", admin.EmptyFieldListFilter), "kind")
    ordering = ("-id",)
    sortable_by = ("id",)
    show_full_result_count = False
    paginator = EstimatedCountPaginator
    change_list_template = "admin/core/outboxentry/change_list.html"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list[URLPattern]:
        health = path("health/", self.admin_site.admin_view(self.health_view), name="core_mirror_health")
        return [health, *super().get_urls()]

    def health_view(self, request: HttpRequest) -> HttpResponse:
        """/admin/core/outboxentry/health/: reconcile, outbox, Redis and Celery figures.

        :raises PermissionDenied: without ``core.view_outboxentry`` (403).
        """
        if not self.has_view_permission(request):
            raise PermissionDenied
        context = {
            **self.admin_site.each_context(request),
            "title": "Mirror health",
            "opts": self.opts,
            "health": mirror_health(),
        }
        return TemplateResponse(request, "admin/core/mirror_health.html", context)

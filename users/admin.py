"""Admin of accounts: search, filters, deactivation through the services, and room for the other apps.

(De)activation, in every form, goes through ``users.services.user_set_active``; higher apps add
``UserAdmin.add_panel`` and ``add_operation`` (logged in ``LogEntry``; repairs need only
``view_user``). The list never counts every account. Behaviour: docs/behaviours.md#moderators-and-the-admin.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html

from core.admin_tools import CanonicalIdsAdmin, EstimatedCountPaginator, bounded_count

from .models import User
from .selectors import user_ids_matching
from .services import user_set_active

logger = logging.getLogger(__name__)

# Accounts one list action may repair or (de)activate at once.
BULK_ACTION_MAX = 200
# Related rows (follows, notes, log entries) listed one by one on the
# delete confirmation page; above this the page shows counts.
DELETE_LIST_MAX = 500


@dataclass(frozen=True)
class Operation:
    """A button on the account page and a list action: ``run(user)`` returns the message logged;
    ``permission`` ``"view"`` (repairs) or ``"change"``; ``shown(user)``: offered for this account; ``action``: the list action's name.
    """

    name: str
    action: str
    label: str
    run: Callable[[User], str]
    permission: str
    description: str
    shown: Callable[[User], bool] = lambda user: True
    danger: bool = False


@dataclass(frozen=True)
class Panel:
    """A block of the account page: ``template`` rendered with ``context(request, user)``."""

    template: str
    context: Callable[[HttpRequest, User], dict[str, Any]]


def _deactivate(user: User) -> str:
    changed = user_set_active(user=user, is_active=False)
    return f"Deactivated {user.username}." if changed else f"{user.username} was already deactivated."


def _reactivate(user: User) -> str:
    changed = user_set_active(user=user, is_active=True)
    return f"Reactivated {user.username}." if changed else f"{user.username} was already active."


@admin.register(User)
class UserAdmin(CanonicalIdsAdmin, DjangoUserAdmin):  # type: ignore[type-arg]
    """Accounts: Django's user admin with safe deactivation and the panels and operations other apps add."""

    list_display = ("username", "display_name", "is_active", "is_staff", "date_joined", "last_seen_at")
    list_filter = (
        "is_active",
        "is_staff",
        "is_superuser",
        "groups",
        ("date_joined", admin.DateFieldListFilter),
        ("last_seen_at", admin.DateFieldListFilter),
    )
    search_fields = ("username",)  # shows the box; get_search_results does the work
    search_help_text = "A username prefix or a user id."
    ordering = ("-id",)
    sortable_by = ("username", "date_joined")
    list_per_page = 100
    show_full_result_count = False
    paginator = EstimatedCountPaginator
    readonly_fields = ("last_login", "date_joined", "last_seen_at")
    fieldsets = (
        (None, {"fields": ("username", "password")}),
        ("Profile", {"fields": ("display_name", "bio", "first_name", "last_name", "email")}),
        ("Permissions", {"fields": ("is_active", "is_staff", "is_superuser", "groups", "user_permissions")}),
        ("Important dates", {"fields": ("last_login", "last_seen_at", "date_joined")}),
    )
    actions: ClassVar[list[Any]] = []  # type: ignore[misc]
    operations: ClassVar[dict[str, Operation]] = {}
    panels: ClassVar[list[Panel]] = []

    @classmethod
    def add_operation(cls, operation: Operation) -> None:
        """Offer ``operation`` as a button on the account page and as a list action."""
        cls.operations[operation.name] = operation

        def action(modeladmin: UserAdmin, request: HttpRequest, queryset: QuerySet[User]) -> None:
            modeladmin._bulk(request, queryset, operation.run)

        action.__name__ = operation.action
        cls.actions.append(admin.action(permissions=[operation.permission], description=operation.description)(action))

    @classmethod
    def add_panel(cls, panel: Panel) -> None:
        """Show ``panel`` on the account page, above the form."""
        cls.panels.append(panel)

    def get_search_results(self, request: HttpRequest, queryset: QuerySet[User], search_term: str) -> tuple[QuerySet[User], bool]:
        """Match a username prefix or an id through the username index (never ``LIKE '%x%'``)."""
        if not search_term.strip():
            return queryset, False
        return queryset.filter(pk__in=user_ids_matching(search_term)), False

    # --- saving and deleting through the services --------------------------

    def save_model(self, request: HttpRequest, obj: User, form: ModelForm[User], change: bool) -> None:
        """Save the form; an ``is_active`` change goes through ``user_set_active`` (the other fields saved first, with the old flag)."""
        if change and "is_active" in form.changed_data:
            wanted = obj.is_active
            obj.is_active = not wanted
            super().save_model(request, obj, form, change)
            user_set_active(user=obj, is_active=wanted)
            return
        super().save_model(request, obj, form, change)

    # Deleting an account needs no service call: the follow mirror and the
    # feed hear of every deletion (a pre_delete receiver), whatever path deleted it.

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[list[Any], dict[str, int], set[str], list[Any]]:
        """What deleting ``objs`` takes with it; above ``DELETE_LIST_MAX`` related rows, counts per model instead of every row.

        :returns: Django's ``(to_delete, model_count, perms_needed, protected)``.
        """
        users = list(objs)
        ids = [user.pk for user in users]
        related: dict[Any, QuerySet[Any]] = {}
        for relation in User._meta.related_objects:
            if not relation.one_to_many:
                continue
            model = relation.related_model
            rows = model._default_manager.filter(**{f"{relation.field.name}__in": ids})
            related[model] = related[model] | rows if model in related else rows
        if sum(bounded_count(rows, DELETE_LIST_MAX) for rows in related.values()) <= DELETE_LIST_MAX:
            return super().get_deleted_objects(users, request)
        counts = {model: rows.count() for model, rows in related.items()}
        perms_needed = {
            str(model._meta.verbose_name)
            for model, count in counts.items()
            if count
            and self.admin_site.is_registered(model)
            and not self.admin_site.get_model_admin(model).has_delete_permission(request)
        }
        summary = [f"{count:,} {model._meta.verbose_name_plural} (too many to list)" for model, count in counts.items() if count]
        to_delete: list[Any] = []
        for user in users:
            url = reverse("admin:users_user_change", args=[user.pk])
            to_delete += [format_html('User: <a href="{}">{}</a>', url, user)]
        to_delete.append(summary)
        model_count = {str(User._meta.verbose_name_plural): len(users)}
        model_count.update({str(model._meta.verbose_name_plural): count for model, count in counts.items() if count})
        return to_delete, model_count, perms_needed, []

    # --- the panels and the per-account buttons ------------------------------

    def get_urls(self) -> list[URLPattern]:
        operation = path(
            "<path:object_id>/mirror/<str:operation>/",
            self.admin_site.admin_view(self.operation_view),
            name="users_user_operation",
        )
        return [operation, *super().get_urls()]

    def _allowed(self, request: HttpRequest, operation: Operation, user: User) -> bool:
        if operation.permission == "change":
            return self.has_change_permission(request, user)
        return self.has_view_permission(request, user)

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        extra_context = dict(extra_context or {})
        obj = self.get_object(request, unquote(object_id))
        if obj is not None and self.has_view_permission(request, obj):
            panels = []
            for panel in self.panels:
                context = panel.context(request, obj)
                extra_context.update(context)
                panels.append(panel.template)
            extra_context["account_panels"] = panels
            offered = [op for op in self.operations.values() if op.shown(obj) and self._allowed(request, op, obj)]
            extra_context["account_operations"] = sorted(offered, key=lambda op: op.danger)
        return super().change_view(request, object_id, form_url, extra_context)

    def operation_view(self, request: HttpRequest, object_id: str, operation: str) -> HttpResponse:
        """POST ``<id>/mirror/<operation>/``: run one operation on the account and log it.

        :raises Http404: unknown operation or account.
        :raises PermissionDenied: the operation's permission is missing (403).
        """
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        found = self.operations.get(operation)
        if found is None:
            raise Http404("No such operation.")
        user = self.get_object(request, unquote(object_id))
        if user is None:
            raise Http404("No such account.")
        if not self._allowed(request, found, user):
            raise PermissionDenied
        self._run(request, [user], found.run)
        return HttpResponseRedirect(reverse("admin:users_user_change", args=[user.pk]))

    def _run(self, request: HttpRequest, users: list[User], function: Callable[[User], str]) -> None:
        """Run ``function`` on each account, report it, and log each success; a Redis or feed failure is a message, never a 500."""
        for user in users:
            try:
                with transaction.atomic():
                    text = function(user)
                    self.log_change(request, user, text)
            except Exception as exc:  # reported to the moderator, logged with traceback
                logger.exception("admin operation %s failed for user %s", function.__name__, user.pk)
                self.message_user(request, f"{user.username}: failed ({type(exc).__name__}: {exc}).", messages.ERROR)
            else:
                self.message_user(request, text, messages.SUCCESS)

    def _bulk(self, request: HttpRequest, queryset: QuerySet[User], function: Callable[[User], str]) -> None:
        users = list(queryset.order_by("pk")[: BULK_ACTION_MAX + 1])
        if len(users) > BULK_ACTION_MAX:
            self.message_user(request, f"Select at most {BULK_ACTION_MAX} accounts; nothing was done.", messages.ERROR)
            return
        self._run(request, users, function)


UserAdmin.add_operation(
    Operation(
        name="deactivate",
        action="deactivate_accounts",
        label="Deactivate account",
        run=_deactivate,
        permission="change",
        description="Deactivate selected accounts (follows and notes leave feeds)",
        shown=lambda user: user.is_active,
        danger=True,
    )
)
UserAdmin.add_operation(
    Operation(
        name="reactivate",
        action="reactivate_accounts",
        label="Reactivate account",
        run=_reactivate,
        permission="change",
        description="Reactivate selected accounts",
        shown=lambda user: not user.is_active,
    )
)

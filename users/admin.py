"""Admin of accounts: search, filters, follow figures, repair actions and deactivation through the services.

- Deactivation and reactivation (the list actions, the button on the change
  page, and the ``is_active`` checkbox on save) go through
  ``users.services.user_set_active``: the account's follows both ways stop
  counting and leave Redis after commit, and the feed removes its notes.
- The change page shows follower and following counts from the mirror
  (``social.selectors.follow_counts``) with the database figure beside
  them when they differ, the newest follows both ways, and buttons to
  rebuild the account's social cache and inbox and to reconcile it.
- Repair actions (rebuild, reconcile) need only ``users.view_user``: they
  copy the database's truth into Redis and cannot change a follow or note.
  Deactivation needs ``users.change_user``. Every action is written to the
  admin log (``LogEntry``).

The list never counts all 82k+ accounts (``EstimatedCountPaginator``), and
search matches a username prefix or an id (indexed).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html

from .admin_tools import EstimatedCountPaginator, bounded_count, user_ids_matching
from .models import User
from .services import user_set_active

logger = logging.getLogger(__name__)

# Newest follows shown in each direction on the change page.
RECENT_FOLLOWS = 10
# Accounts one list action may repair or (de)activate at once.
BULK_ACTION_MAX = 200
# Related rows (follows, notes, log entries) listed one by one on the
# delete confirmation page; above this the page shows counts.
DELETE_LIST_MAX = 500


@dataclass
class FollowPanel:
    """What the change page shows about an account's follows.

    ``mirror_*`` come from ``follow_counts`` (Redis, or the database while
    Redis is unavailable: ``mirror_source``); ``database_*`` count the rows
    whose two accounts are active; ``recent_*`` are the newest follows.
    """

    mirror_followers: int | None
    mirror_following: int | None
    mirror_source: str
    database_followers: int
    database_following: int
    recent_followers: list[Any] = field(default_factory=list)
    recent_following: list[Any] = field(default_factory=list)
    error: str = ""

    @property
    def followers_differ(self) -> bool:
        return self.mirror_followers != self.database_followers

    @property
    def following_differ(self) -> bool:
        return self.mirror_following != self.database_following


def follow_panel(user: Any) -> FollowPanel:
    """Counts from the mirror and the database, and the newest follows of ``user``.

    Four indexed queries (two counts, two range scans of
    ``follow_followers_newest``/``follow_following_newest``) and one or two
    Redis round trips, whatever the account's size.
    """
    from social.models import Follow
    from social.redis_client import redis_available
    from social.selectors import active_follows, follow_counts

    source = "Redis" if redis_available() else "database (Redis unavailable)"
    counts = follow_counts(user_id=user.pk)
    newest_followers = (
        Follow.objects.filter(followee_id=user.pk)
        .select_related("follower")
        .order_by("-created_at", "-follower_id")[:RECENT_FOLLOWS]
    )
    newest_following = (
        Follow.objects.filter(follower_id=user.pk)
        .select_related("followee")
        .order_by("-created_at", "-followee_id")[:RECENT_FOLLOWS]
    )
    return FollowPanel(
        mirror_followers=counts.followers,
        mirror_following=counts.following,
        mirror_source=source,
        database_followers=active_follows().filter(followee_id=user.pk).count(),
        database_following=active_follows().filter(follower_id=user.pk).count(),
        recent_followers=list(newest_followers),
        recent_following=list(newest_following),
    )


# --- the repair and state operations, shared by buttons and list actions ---


def _rebuild_social(user: Any) -> str:
    from social.rebuild import rebuild_user

    edges = rebuild_user(user.pk)
    return f"Rebuilt the social cache of {user.username}: {edges} follows."


def _rebuild_inbox(user: Any) -> str:
    from feed.rebuild import inbox_rebuild

    result = inbox_rebuild(user_id=user.pk)
    return f"Rebuilt the inbox of {user.username}: {result.entries} notes."


def _reconcile(user: Any) -> str:
    from social.reconcile import reconcile_run

    # Recorded as a single-account ReconcileRun (the health page shows only
    # whole-graph runs).
    run, report = reconcile_run(user_id=user.pk)
    figures = ", ".join(
        f"{name}={getattr(report, name)}" for name in ("edges_missing", "edges_extra", "scores_wrong", "pairs_repaired")
    )
    return f"Reconciled {user.username} (run {run.pk}): {figures}."


def _deactivate(user: Any) -> str:
    changed = user_set_active(user=user, is_active=False)
    return f"Deactivated {user.username}." if changed else f"{user.username} was already deactivated."


def _reactivate(user: Any) -> str:
    changed = user_set_active(user=user, is_active=True)
    return f"Reactivated {user.username}." if changed else f"{user.username} was already active."


# operation name -> (function, permission it needs: "view" or "change")
OPERATIONS: dict[str, tuple[Callable[[Any], str], str]] = {
    "rebuild-social": (_rebuild_social, "view"),
    "rebuild-inbox": (_rebuild_inbox, "view"),
    "reconcile": (_reconcile, "view"),
    "deactivate": (_deactivate, "change"),
    "reactivate": (_reactivate, "change"),
}


@admin.register(User)
class UserAdmin(DjangoUserAdmin):
    """Accounts: Django's user admin with follow figures, repair actions and safe deactivation."""

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
    actions = ["deactivate_accounts", "reactivate_accounts", "rebuild_social_caches", "rebuild_inboxes", "reconcile_accounts"]

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        """Match a username prefix or an id through the username index (never ``LIKE '%x%'``)."""
        if not search_term.strip():
            return queryset, False
        return queryset.filter(pk__in=user_ids_matching(search_term)), False

    # --- saving and deleting through the services --------------------------

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        """Save the form; an ``is_active`` change goes through ``user_set_active``.

        The other fields are saved with the old flag first, then the
        service flips it, so the mirror and the feed hear of it after commit.
        """
        if change and "is_active" in form.changed_data:
            wanted = obj.is_active
            obj.is_active = not wanted
            super().save_model(request, obj, form, change)
            user_set_active(user=obj, is_active=wanted)
            return
        super().save_model(request, obj, form, change)

    # Deleting an account needs no service call: ``users.signals`` re-mirrors
    # every edge of a deleted account after commit, whatever path deleted it.

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[list[Any], dict[str, int], set[str], list[Any]]:
        """What deleting ``objs`` takes with it; counted, not listed, for big accounts.

        Django lists every cascaded row, which loads and renders each of a
        big account's follows (a 200k-follower account: 200k lines). Above
        ``DELETE_LIST_MAX`` related rows the page shows their counts; the
        deletion itself is the same. Every relation to ``User`` cascades
        (follows, notes, admin log entries), so nothing protected is hidden.

        :returns: Django's ``(to_delete, model_count, perms_needed, protected)``.
        """
        from django.contrib.admin.models import LogEntry

        from feed.models import Note
        from social.models import Follow

        users = list(objs)
        ids = [user.pk for user in users]
        related = {
            Follow: Follow.objects.filter(Q(follower_id__in=ids) | Q(followee_id__in=ids)),
            Note: Note.objects.filter(author_id__in=ids),
            LogEntry: LogEntry.objects.filter(user_id__in=ids),
        }
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

    # --- the follow panel and the per-account buttons -----------------------

    def get_urls(self) -> list[Any]:
        operation = path(
            "<path:object_id>/mirror/<str:operation>/",
            self.admin_site.admin_view(self.operation_view),
            name="users_user_operation",
        )
        return [operation, *super().get_urls()]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        extra_context = dict(extra_context or {})
        obj = self.get_object(request, unquote(object_id))
        if obj is not None and self.has_view_permission(request, obj):
            extra_context["follow_panel"] = follow_panel(obj)
            extra_context["can_change_state"] = self.has_change_permission(request, obj)
            extra_context["can_view_follows"] = request.user.has_perm("social.view_follow")
        return super().change_view(request, object_id, form_url, extra_context)

    def operation_view(self, request: HttpRequest, object_id: str, operation: str) -> HttpResponse:
        """POST ``<id>/mirror/<operation>/``: run one repair or state operation and log it.

        :raises Http404: unknown operation or account.
        :raises PermissionDenied: the operation's permission is missing (403).
        """
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if operation not in OPERATIONS:
            raise Http404("No such operation.")
        user = self.get_object(request, unquote(object_id))
        if user is None:
            raise Http404("No such account.")
        function, needed = OPERATIONS[operation]
        allowed = self.has_change_permission(request, user) if needed == "change" else self.has_view_permission(request, user)
        if not allowed:
            raise PermissionDenied
        self._run(request, [user], function)
        return HttpResponseRedirect(reverse("admin:users_user_change", args=[user.pk]))

    def _run(self, request: HttpRequest, users: list[Any], function: Callable[[Any], str]) -> None:
        """Run ``function`` on each account, report it, and log each success in the admin log.

        A Redis outage or a feed error is reported as a message, never a 500;
        the account's outbox entries keep the mirror work for the drain.
        """
        for user in users:
            try:
                with transaction.atomic():
                    text = function(user)
                    self.log_change(request, user, text)
            except Exception as exc:  # noqa: BLE001 - reported to the moderator, logged with traceback
                logger.exception("admin operation %s failed for user %s", function.__name__, user.pk)
                self.message_user(request, f"{user.username}: failed ({type(exc).__name__}: {exc}).", messages.ERROR)
            else:
                self.message_user(request, text, messages.SUCCESS)

    def _bulk(self, request: HttpRequest, queryset: QuerySet[Any], function: Callable[[Any], str]) -> None:
        users = list(queryset.order_by("pk")[: BULK_ACTION_MAX + 1])
        if len(users) > BULK_ACTION_MAX:
            self.message_user(request, f"Select at most {BULK_ACTION_MAX} accounts; nothing was done.", messages.ERROR)
            return
        self._run(request, users, function)

    @admin.action(permissions=["change"], description="Deactivate selected accounts (follows and notes leave feeds)")
    def deactivate_accounts(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self._bulk(request, queryset, _deactivate)

    @admin.action(permissions=["change"], description="Reactivate selected accounts")
    def reactivate_accounts(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self._bulk(request, queryset, _reactivate)

    @admin.action(permissions=["view"], description="Rebuild the social cache of selected accounts")
    def rebuild_social_caches(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self._bulk(request, queryset, _rebuild_social)

    @admin.action(permissions=["view"], description="Rebuild the inbox (home feed) of selected accounts")
    def rebuild_inboxes(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self._bulk(request, queryset, _rebuild_inbox)

    @admin.action(permissions=["view"], description="Reconcile selected accounts with the database")
    def reconcile_accounts(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self._bulk(request, queryset, _reconcile)

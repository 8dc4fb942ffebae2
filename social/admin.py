"""Admin of the follow graph: follows (view, add and delete through the services) and the mirror's health.

Every follow delete, bulk included (capped), goes through ``social.services.follow_delete_pair``
so the mirror and inboxes follow. Lists stay fast on the full graph: raw ids, no full COUNT, sort
by id only, accounts fetched by id, filters resolved to user ids first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.actions import delete_selected as django_delete_selected
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Count, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.http import HttpRequest, HttpResponse

from core import health
from core.admin_tools import CanonicalIdsAdmin, EstimatedCountPaginator, bounded_count
from core.redis import redis_available
from users.admin import Operation, Panel, UserAdmin
from users.models import User
from users.selectors import user_ids_matching

from . import rebuild, reconcile
from .health import reconcile_health, suggestions_reconcile_health
from .models import Block, Follow, FollowRequest, Mute, live_mutes
from .selectors import active_follows, follow_counts
from .services import FollowError, follow_create, follow_delete_pair

# Follows one bulk action may delete (each is one service call and one
# mirror apply after commit; select-all over 870k rows must not start that).
BULK_DELETE_MAX = 1000


# Deactivated accounts listed by id in the "a side deactivated" filter;
# above this many the filter uses a subquery instead.
INACTIVE_LIST_MAX = 1000


def inactive_user_ids() -> Any:
    """Ids of deactivated accounts: a list when few (so MariaDB can merge the
    two follow indexes), else a subquery. One scan of the user table."""
    user_model = User
    ids = list(user_model.objects.filter(is_active=False).order_by().values_list("pk", flat=True)[: INACTIVE_LIST_MAX + 1])
    if len(ids) > INACTIVE_LIST_MAX:
        return user_model.objects.filter(is_active=False).values("pk")
    return ids


class AccountsStateFilter(admin.SimpleListFilter):
    """Whether both accounts of a follow are active; filters by user ids (a join makes MariaDB walk every follow)."""

    title = "accounts"
    parameter_name = "accounts"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("active", "both active"), ("deactivated", "a side deactivated")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "active":
            inactive = inactive_user_ids()
            return queryset.exclude(follower_id__in=inactive).exclude(followee_id__in=inactive)
        if self.value() == "deactivated":
            inactive = inactive_user_ids()
            return queryset.filter(Q(follower_id__in=inactive) | Q(followee_id__in=inactive))
        return queryset


class FollowAddForm(forms.ModelForm[Follow]):
    """Add a follow on a user's behalf: the same checks as the follow service."""

    class Meta:
        model = Follow
        fields = ("follower", "followee")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        follower, followee = data.get("follower"), data.get("followee")
        if follower and followee:
            if follower.pk == followee.pk:
                raise forms.ValidationError("An account cannot follow itself.")
            if not follower.is_active:
                raise forms.ValidationError("The follower's account is deactivated.")
            if not followee.is_active:
                raise forms.ValidationError("The followee's account is deactivated.")
        return data


@admin.register(Follow)
class FollowAdmin(CanonicalIdsAdmin, admin.ModelAdmin[Follow]):
    """Follows: list, search by username or id, filter by date and account state, delete via the service."""

    list_display = ("id", "follower", "followee", "created_at", "accounts_active")
    # Not select_related: with the two joins MariaDB starts from the user
    # table and sorts every follow for each page; without them the page is
    # a backward primary-key range scan and the
    # 100 rows' accounts come in two ``id IN (...)`` queries (get_queryset).
    # An empty tuple, because False would make Django add select_related().
    list_select_related = ()
    list_filter = (("created_at", admin.DateFieldListFilter), AccountsStateFilter)
    search_fields = ("follower__username",)  # shows the box; get_search_results does the work
    search_help_text = "A username prefix or a user id; matches the follower or the followee."
    raw_id_fields = ("follower", "followee")
    readonly_fields = ("created_at",)
    ordering = ("-id",)
    sortable_by = ("id",)
    list_per_page = 100
    show_full_result_count = False
    paginator = EstimatedCountPaginator
    form = FollowAddForm
    actions = ("delete_selected",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        accounts = User.objects.only("id", "username", "is_active")
        return (
            super()
            .get_queryset(request)
            .prefetch_related(Prefetch("follower", queryset=accounts), Prefetch("followee", queryset=accounts))
        )

    @admin.display(boolean=True, description="both active")
    def accounts_active(self, obj: Follow) -> bool:
        return bool(obj.follower.is_active and obj.followee.is_active)

    def get_search_results(self, request: HttpRequest, queryset: QuerySet[Any], search_term: str) -> tuple[QuerySet[Any], bool]:
        """Resolve the term to user ids (indexed), then match either side of the follow."""
        if not search_term.strip():
            return queryset, False
        ids = user_ids_matching(search_term)
        return queryset.filter(Q(follower_id__in=ids) | Q(followee_id__in=ids)), False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # A follow is a fact with a time; it is added or deleted, never edited.
        return False

    def save_model(self, request: HttpRequest, obj: Follow, form: Any, change: bool) -> None:
        """Create the follow through ``follow_create`` (outbox, mirror and feed backfill on commit)."""
        try:
            follow_create(actor=obj.follower, followee_id=obj.followee_id)
        except FollowError as exc:  # raced with a deactivation after the form's checks
            raise PermissionDenied(exc.message) from exc
        saved = Follow.objects.get(follower_id=obj.follower_id, followee_id=obj.followee_id)
        obj.pk, obj.created_at = saved.pk, saved.created_at

    def delete_model(self, request: HttpRequest, obj: Follow) -> None:
        """Delete one follow as its follower's unfollow would."""
        follow_delete_pair(follower_id=obj.follower_id, followee_id=obj.followee_id)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        """Delete each follow through ``follow_delete_pair`` in one transaction (never ``QuerySet.delete``)."""
        pairs = list(queryset.values_list("follower_id", "followee_id"))
        with transaction.atomic():
            for follower_id, followee_id in pairs:
                follow_delete_pair(follower_id=follower_id, followee_id=followee_id)

    @admin.action(permissions=["delete"], description="Delete selected follows (as unfollows; at most 1000)")
    def delete_selected(self, request: HttpRequest, queryset: QuerySet[Any]) -> HttpResponse | None:
        """Django's confirm-then-delete action, capped at ``BULK_DELETE_MAX`` follows; named to replace the
        site-wide action, deleting through ``delete_queryset``.
        """
        if bounded_count(queryset, BULK_DELETE_MAX) > BULK_DELETE_MAX:
            self.message_user(
                request,
                f"Select at most {BULK_DELETE_MAX} follows per bulk delete; nothing was deleted.",
                messages.ERROR,
            )
            return None
        return django_delete_selected(self, request, queryset)


# --- the account page: follow figures and repairs ---------------------------

# Newest follows shown in each direction on the account page.
RECENT_FOLLOWS = 10


@dataclass
class FollowPanel:
    """The account page's follow figures: ``mirror_*`` (``follow_counts``; ``mirror_source``),
    ``database_*`` (rows of active accounts), ``recent_*`` (newest follows).
    """

    mirror_followers: int | None
    mirror_following: int | None
    mirror_source: str
    database_followers: int
    database_following: int
    recent_followers: list[Follow] = field(default_factory=list)
    recent_following: list[Follow] = field(default_factory=list)

    @property
    def followers_differ(self) -> bool:
        return self.mirror_followers != self.database_followers

    @property
    def following_differ(self) -> bool:
        return self.mirror_following != self.database_following


def follow_panel(user: User) -> FollowPanel:
    """Counts from the mirror and the database, and the newest follows of ``user``: four indexed
    queries and one or two Redis round trips, whatever the account's size.
    """
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


def _rebuild_social(user: User) -> str:
    edges = rebuild.rebuild_user(user.pk)
    return f"Rebuilt the social cache of {user.username}: {edges} follows."


def _reconcile(user: User) -> str:
    # Recorded as a single-account ReconcileRun (the health page shows only
    # whole-graph runs).
    run, report = reconcile.reconcile_run(user_id=user.pk)
    figures = ", ".join(
        f"{name}={getattr(report, name)}" for name in ("edges_missing", "edges_extra", "scores_wrong", "pairs_repaired")
    )
    return f"Reconciled {user.username} (run {run.pk}): {figures}."


UserAdmin.add_panel(
    Panel(
        template="admin/social/_follow_panel.html",
        context=lambda request, user: {
            "follow_panel": follow_panel(user),
            "can_view_follows": request.user.has_perm("social.view_follow"),
        },
    )
)
UserAdmin.add_operation(
    Operation(
        name="rebuild-social",
        action="rebuild_social_caches",
        label="Rebuild social cache",
        run=_rebuild_social,
        permission="view",
        description="Rebuild the social cache of selected accounts",
    )
)
UserAdmin.add_operation(
    Operation(
        name="reconcile",
        action="reconcile_accounts",
        label="Reconcile this account",
        run=_reconcile,
        permission="view",
        description="Reconcile selected accounts with the database",
    )
)
health.register_section("reconcile", reconcile_health)
health.register_section("suggestions_reconcile", suggestions_reconcile_health)
health.register_reconcile("graph", reconcile_health, drift_figures=("users_drifted", "controls_drifted"))
health.register_reconcile("suggestions", suggestions_reconcile_health, drift_figures=("readers_drifted", "rankings_drifted"))


# --- blocks, mutes, follow requests (issue 16) -------------------------------------
# Who blocks or mutes whom is private: only superusers list them; moderators
# see follow requests (a pending request is visible to both accounts anyway).


class _SuperuserOnly(admin.ModelAdmin):  # type: ignore[type-arg]
    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_superuser)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_active and request.user.is_superuser)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # through the services, which mirror and unfollow

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Block)
class BlockAdmin(_SuperuserOnly):
    list_display = ("blocker", "blocked", "created_at")
    raw_id_fields = ("blocker", "blocked")
    search_fields = ("blocker__username", "blocked__username")


@admin.register(Mute)
class MuteAdmin(_SuperuserOnly):
    list_display = ("muter", "muted", "created_at", "expires_at")
    raw_id_fields = ("muter", "muted")
    search_fields = ("muter__username", "muted__username")


@admin.register(FollowRequest)
class FollowRequestAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Pending follow requests: viewed with ``social.view_followrequest`` (the moderators group
    has it); decided only by the accounts themselves."""

    list_display = ("requester", "target", "created_at")
    raw_id_fields = ("requester", "target")
    search_fields = ("requester__username", "target__username")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def _count(model: Any, field: str, where: Q | None = None) -> Subquery:
    rows = (
        model.objects.filter(where or Q(), **{field: OuterRef("pk")}).order_by().values(field).annotate(n=Count("pk")).values("n")
    )
    return Coalesce(Subquery(rows), 0)  # type: ignore[return-value]


def controls_panel(request: HttpRequest, user: User) -> dict[str, Any]:
    """The account page's counts of blocks, mutes and follow requests (moderators see the counts,
    not the lists: who blocks whom is private; superusers get links to the lists)."""
    # One query: four indexed counts as scalar subqueries.
    row = (
        User.objects.filter(pk=user.pk)
        .annotate(
            n_blocks_made=_count(Block, "blocker_id"),
            n_blocks_received=_count(Block, "blocked_id"),
            # As the account's own pages count them: mutes that hold now, requests of active accounts.
            n_mutes_made=_count(Mute, "muter_id", live_mutes()),
            n_requests_pending=_count(FollowRequest, "target_id", Q(requester__is_active=True)),
        )
        .values("n_blocks_made", "n_blocks_received", "n_mutes_made", "n_requests_pending")
        .first()
    )
    counts: dict[str, Any] = {name[2:]: value for name, value in dict(row or {}).items()}
    return {
        "controls_panel": {**counts, "private": user.approve_followers},
        "can_list_controls": bool(request.user.is_superuser),
    }


UserAdmin.add_panel(Panel(template="admin/social/_controls_panel.html", context=controls_panel))

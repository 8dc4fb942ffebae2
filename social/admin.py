"""Admin of the follow graph: follows (view, add and delete through the services) and the mirror's health.

Every delete of a follow here, one or in bulk, goes through
``social.services.follow_delete_pair``, the path of a user's own unfollow,
so the Redis sets, sorted sets, counts and inboxes follow after commit.
Django's bulk delete (``QuerySet.delete``) would skip all of that, so
``delete_queryset`` is replaced and the bulk action is capped.

The lists stay fast on the full graph (870k follows): raw-id widgets, no
full-table COUNT (``EstimatedCountPaginator``), sorting only by id (the
primary key; other columns have no index to sort 870k rows), the page's
accounts fetched by id rather than joined, search and the account-state
filter resolved to user ids first so both follow indexes can be used.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.actions import delete_selected as django_delete_selected
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Prefetch, Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path

from users.admin_tools import EstimatedCountPaginator, bounded_count, user_ids_matching

from .health import mirror_health
from .models import Follow, MirrorOutbox
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
    user_model = get_user_model()
    ids = list(user_model.objects.filter(is_active=False).order_by().values_list("pk", flat=True)[: INACTIVE_LIST_MAX + 1])
    if len(ids) > INACTIVE_LIST_MAX:
        return user_model.objects.filter(is_active=False).values("pk")
    return ids


class AccountsStateFilter(admin.SimpleListFilter):
    """Whether both accounts of a follow are active (only those count and are mirrored).

    Filters by follower/followee id rather than joining the user table:
    the join made MariaDB walk all 870k follows (1.4 s on Slashdot).
    """

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


class FollowAddForm(forms.ModelForm):
    """Add a follow on a user's behalf: the same checks as the follow service."""

    class Meta:
        model = Follow
        fields = ["follower", "followee"]

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
class FollowAdmin(admin.ModelAdmin):
    """Follows: list, search by username or id, filter by date and account state, delete via the service."""

    list_display = ("id", "follower", "followee", "created_at", "accounts_active")
    # Not select_related: with the two joins MariaDB 10.11 starts from the
    # user table and sorts all 870k follows (3.7 s per page on Slashdot);
    # without them the page is a backward primary-key range scan and the
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
    actions = ["delete_selected"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        accounts = get_user_model().objects.only("id", "username", "is_active")
        return (
            super()
            .get_queryset(request)
            .prefetch_related(Prefetch("follower", queryset=accounts), Prefetch("followee", queryset=accounts))
        )

    @admin.display(boolean=True, description="both active")
    def accounts_active(self, obj: Follow) -> bool:
        return bool(obj.follower.is_active and obj.followee.is_active)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
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
            follow_create(actor=obj.follower, target_id=obj.followee_id)
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
        """Django's confirm-then-delete action, capped at ``BULK_DELETE_MAX`` follows.

        Named ``delete_selected`` so it replaces the site-wide action (the
        confirmation page posts that name back); the deletion itself runs
        ``delete_queryset`` above and logs each follow in the admin log.
        """
        if bounded_count(queryset, BULK_DELETE_MAX) > BULK_DELETE_MAX:
            self.message_user(
                request,
                f"Select at most {BULK_DELETE_MAX} follows per bulk delete; nothing was deleted.",
                messages.ERROR,
            )
            return None
        return django_delete_selected(self, request, queryset)


@admin.register(MirrorOutbox)
class MirrorOutboxAdmin(admin.ModelAdmin):
    """Read-only view of the mirror outbox, and the mirror health page (``health/``).

    Both need ``social.view_mirroroutbox`` (superusers, or operators given it);
    the moderators group does not have it.
    """

    list_display = ("id", "kind", "follower_id", "followee_id", "created_at", "applied_at", "attempts")
    list_filter = (("applied_at", admin.EmptyFieldListFilter), "kind")
    ordering = ("-id",)
    sortable_by = ("id",)
    show_full_result_count = False
    paginator = EstimatedCountPaginator
    change_list_template = "admin/social/mirroroutbox/change_list.html"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list[Any]:
        health = path("health/", self.admin_site.admin_view(self.health_view), name="social_mirror_health")
        return [health, *super().get_urls()]

    def health_view(self, request: HttpRequest) -> HttpResponse:
        """/admin/social/mirroroutbox/health/: reconcile, outbox, Redis and Celery figures."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        context = {
            **self.admin_site.each_context(request),
            "title": "Mirror health",
            "opts": self.opts,
            "health": mirror_health(),
        }
        return TemplateResponse(request, "admin/social/mirror_health.html", context)

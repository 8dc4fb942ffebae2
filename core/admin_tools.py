"""Admin helpers: a paginator that never counts a whole table, and ids taken only in canonical form.

``EstimatedCountPaginator`` counts at most ``COUNT_CAP + 1`` rows (a ``COUNT(*)`` walks a whole
InnoDB index), then answers the engine's row estimate (unfiltered) or ``COUNT_CAP`` as a lower
bound (filtered). Behaviour: docs/behaviours.md#moderators-and-the-admin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib.admin import ModelAdmin, helpers
from django.core.paginator import Paginator
from django.db import connections
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.functional import cached_property

from .errors import InvalidInput
from .parsing import id_or_none

# Rows counted exactly before switching to an estimate or a lower bound.
COUNT_CAP = 10_000


def bounded_count(queryset: QuerySet[Any], cap: int = COUNT_CAP) -> int:
    """Rows of ``queryset``, counting at most ``cap + 1`` (one ``COUNT(*)`` over a ``LIMIT`` subquery).

    :returns: the exact count when it is ``<= cap``, else ``cap + 1``.
    """
    return queryset.order_by().values("pk")[: cap + 1].count()


def estimated_table_rows(model: Any, using: str = "default") -> int | None:
    """The storage engine's row estimate for ``model``'s table (``information_schema.TABLES.TABLE_ROWS``),
    or None on backends other than MariaDB/MySQL.
    """
    connection = connections[using]
    if connection.vendor != "mysql":
        return None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s",
            [model._meta.db_table],
        )
        row = cursor.fetchone()
    return int(row[0]) if row and row[0] is not None else None


class EstimatedCountPaginator(Paginator):  # type: ignore[type-arg]  # any model's rows
    """Paginator whose ``count`` is exact up to ``COUNT_CAP`` rows and bounded above it:
    ``count_is_estimate`` (the engine's estimate) or ``count_is_lower_bound`` (``COUNT_CAP``, "N+").
    """

    count_is_estimate = False
    count_is_lower_bound = False

    @cached_property
    def count(self) -> int:
        queryset = self.object_list
        if not isinstance(queryset, QuerySet):
            return len(queryset)
        exact = bounded_count(queryset)
        if exact <= COUNT_CAP:
            return exact
        if not queryset.query.has_filters():
            estimate = estimated_table_rows(queryset.model, using=queryset.db)
            # A stale estimate below what we just saw is no use.
            if estimate is not None and estimate > COUNT_CAP:
                self.count_is_estimate = True
                return estimate
        self.count_is_lower_bound = True
        return COUNT_CAP


if TYPE_CHECKING:
    _ModelAdmin = ModelAdmin[Any]
else:
    _ModelAdmin = object


class CanonicalIdsAdmin(_ModelAdmin):
    """A ``ModelAdmin`` mixin taking ids only as ``core.parsing`` writes them (Django's ``int()`` reads
    "011" or "١٢"): a change page with another is "no such object", an action a 400.
    """

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        if from_field is None and id_or_none(object_id) is None:
            return None
        return super().get_object(request, object_id, from_field)

    def response_action(self, request: HttpRequest, queryset: QuerySet[Any], *args: Any, **kwargs: Any) -> HttpResponse | None:
        if any(id_or_none(value) is None for value in request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)):
            raise InvalidInput("The selected rows are not ids of rows; nothing was done.")
        return super().response_action(request, queryset, *args, **kwargs)

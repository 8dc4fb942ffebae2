"""Admin helpers: a paginator that never counts a whole table, and ids taken only in canonical form.

Django's admin asks ``Paginator.count`` for every list page, which is a
``SELECT COUNT(*)`` over the (filtered) table: on InnoDB that walks a whole
index, which grows with the table (bench/results has the figures).
This paginator counts at most ``COUNT_CAP + 1`` rows (a ``LIMIT`` subquery,
so the work is bounded), and past that answers:

- unfiltered lists: the table's row estimate kept by the storage engine
  (``information_schema.TABLES.TABLE_ROWS`` on MariaDB/MySQL, the figure
  ``EXPLAIN`` and ``SHOW TABLE STATUS`` also print; InnoDB samples it, so it
  can be off by tens of percent);
- filtered or searched lists: ``COUNT_CAP`` as a lower bound ("10,000+").

The same idea as the "estimated count" paginators people use on large
PostgreSQL admins (``reltuples``), and as ``show_full_result_count = False``
which stops the second, unfiltered COUNT.
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
    """Rows of ``queryset``, counting at most ``cap + 1`` of them.

    One query: ``SELECT COUNT(*) FROM (SELECT id ... LIMIT cap+1)``.

    :returns: the exact count when it is ``<= cap``, else ``cap + 1``.
    """
    return queryset.order_by().values("pk")[: cap + 1].count()


def estimated_table_rows(model: Any, using: str = "default") -> int | None:
    """The storage engine's row estimate for ``model``'s table, or None.

    MariaDB/MySQL only (``information_schema.TABLES.TABLE_ROWS``, one
    indexed lookup); other backends return None and the caller counts.
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
    """Paginator whose ``count`` is exact up to ``COUNT_CAP`` rows and bounded above it.

    ``count_is_estimate`` is True when ``count`` came from the engine's
    estimate; ``count_is_lower_bound`` when it is ``COUNT_CAP`` standing for
    "at least that many" (filtered lists). The admin's pagination template
    shows "about N" / "N+" accordingly.
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
    """A ``ModelAdmin`` mixin that takes ids only as ``core.parsing`` writes them.

    Django's admin turns an id with ``int()``, which also reads "١٢", "𝟙𝟘"
    and "011" as 12, 10 and 11; an action could then change a row nobody
    selected. Here a change page with such an id is "no such object"
    (Django's redirect and message) and an action with one selected is a
    400 that changes nothing.
    """

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        if from_field is None and id_or_none(object_id) is None:
            return None
        return super().get_object(request, object_id, from_field)

    def response_action(self, request: HttpRequest, queryset: QuerySet[Any], *args: Any, **kwargs: Any) -> HttpResponse | None:
        if any(id_or_none(value) is None for value in request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)):
            raise InvalidInput("The selected rows are not ids of rows; nothing was done.")
        return super().response_action(request, queryset, *args, **kwargs)

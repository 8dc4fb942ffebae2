"""Bulk reads of follow edges with the follow time as integer unix seconds.

Epoch seconds are computed in SQL and fetched through the raw cursor (converting each DATETIME
to an aware datetime was a large share of a rebuild); with ``inactive_user_ids`` passed, edges are
read by covering-index range scans and filtered in Python instead of joined to the users table.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from django.db import connections
from django.db.models import BigIntegerField, Func

from users.models import User

from .models import Follow


class EpochSeconds(Func):
    """Whole unix seconds of a UTC datetime column, computed by the database (MariaDB: ``TIMESTAMPDIFF``,
    independent of the session time zone unlike UNIX_TIMESTAMP; SQLite: ``strftime('%s', col)``).
    """

    output_field = BigIntegerField()

    def as_mysql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(
            compiler, connection, template="TIMESTAMPDIFF(SECOND, '1970-01-01 00:00:00', %(expressions)s)", **extra
        )

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(compiler, connection, template="CAST(strftime('%%%%s', %(expressions)s) AS INTEGER)", **extra)

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(compiler, connection, template="CAST(FLOOR(EXTRACT(EPOCH FROM %(expressions)s)) AS BIGINT)", **extra)


def _fetch(queryset: Any) -> list[tuple[int, int, int]]:
    """Rows of a ``values_list`` queryset straight from the cursor (no per-row converters)."""
    sql, params = queryset.query.get_compiler(using=queryset.db).as_sql()
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(sql, params)
        return [tuple(row) for row in cursor.fetchall()]


def inactive_user_ids() -> set[int]:
    """Ids of the deactivated accounts (one scan of the users table)."""
    return set(User.objects.filter(is_active=False).values_list("pk", flat=True))


def active_edges_in_range(
    field: str, low: int, high: int, *, inactive: Collection[int] | None = None
) -> list[tuple[int, int, int]]:
    """Active edges whose ``field`` (``follower_id`` or ``followee_id``) is in ``(low, high]``.

    :param inactive: ids of deactivated accounts read beforehand (no join then); None: both
        endpoints are joined and checked by the database.
    :returns: ``[(follower_id, followee_id, score_seconds)]``, both accounts active.
    """
    rows = Follow.objects.filter(**{f"{field}__gt": low, f"{field}__lte": high})
    if inactive is None:
        rows = rows.filter(follower__is_active=True, followee__is_active=True)
    edges = _fetch(rows.annotate(score=EpochSeconds("created_at")).values_list("follower_id", "followee_id", "score"))
    if inactive:
        edges = [edge for edge in edges if edge[0] not in inactive and edge[1] not in inactive]
    return edges

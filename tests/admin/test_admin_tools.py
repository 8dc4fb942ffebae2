"""The bounded-count paginator and the indexed user search of the admin lists.

The follow and account lists must never run ``SELECT COUNT(*)`` over a
whole big table: counts are exact up to ``COUNT_CAP`` rows, then the
engine's estimate (unfiltered) or "COUNT_CAP+" (filtered).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core import admin_tools
from core.admin_tools import (
    EstimatedCountPaginator,
    bounded_count,
    estimated_table_rows,
)
from social.models import Follow
from tests.support.accounts import UserFactory
from users.selectors import user_ids_matching

pytestmark = pytest.mark.django_db


@pytest.fixture
def five_follows() -> Any:
    star = UserFactory.create(username="star")
    Follow.objects.bulk_create([Follow(follower=UserFactory.create(), followee=star) for _ in range(5)])
    return star


class TestBoundedCount:
    def test_is_exact_below_the_cap_and_cap_plus_one_above(self, five_follows: Any) -> None:
        rows = Follow.objects.all()

        assert bounded_count(rows, cap=10) == 5
        assert bounded_count(rows, cap=5) == 5
        assert bounded_count(rows, cap=3) == 4


class TestEstimatedCountPaginator:
    def test_small_lists_are_counted_exactly(self, five_follows: Any) -> None:
        paginator = EstimatedCountPaginator(Follow.objects.order_by("-id"), 2)

        assert (paginator.count, paginator.num_pages) == (5, 3)
        assert not paginator.count_is_estimate and not paginator.count_is_lower_bound

    def test_big_unfiltered_lists_use_the_engine_estimate(self, five_follows: Any, monkeypatch: Any) -> None:
        monkeypatch.setattr(admin_tools, "COUNT_CAP", 3)
        monkeypatch.setattr(admin_tools, "estimated_table_rows", lambda model, using="default": 870_000)

        paginator = EstimatedCountPaginator(Follow.objects.order_by("-id"), 100)

        assert (paginator.count, paginator.count_is_estimate) == (870_000, True)
        assert [f.pk for f in paginator.page(1).object_list] == list(Follow.objects.order_by("-id").values_list("pk", flat=True))

    def test_big_filtered_lists_say_at_least_the_cap(self, five_follows: Any, monkeypatch: Any) -> None:
        monkeypatch.setattr(admin_tools, "COUNT_CAP", 3)

        paginator = EstimatedCountPaginator(Follow.objects.filter(followee=five_follows).order_by("-id"), 2)

        assert (paginator.count, paginator.count_is_lower_bound) == (3, True)
        assert len(paginator.page(2).object_list) == 1  # the pages reach the first COUNT_CAP rows

    def test_a_stale_estimate_below_the_cap_is_not_trusted(self, five_follows: Any, monkeypatch: Any) -> None:
        monkeypatch.setattr(admin_tools, "COUNT_CAP", 3)
        monkeypatch.setattr(admin_tools, "estimated_table_rows", lambda model, using="default": 1)

        paginator = EstimatedCountPaginator(Follow.objects.order_by("-id"), 2)

        assert (paginator.count, paginator.count_is_lower_bound) == (3, True)

    @pytest.mark.django_db(transaction=True)
    def test_mariadb_gives_a_table_estimate(self, five_follows: Any) -> None:
        if connection.vendor != "mysql":
            pytest.skip("engine estimate exists on MariaDB/MySQL only")
        with connection.cursor() as cursor:  # the rows are committed (transaction=True): refresh the statistics
            cursor.execute(f"ANALYZE TABLE {Follow._meta.db_table}")

        assert estimated_table_rows(Follow) == 5  # a one-page table: InnoDB's estimate is exact


class TestChangelistNeverCountsTheWholeTable:
    def test_the_follow_list_runs_only_bounded_counts(self, five_follows: Any, superuser_client: Any) -> None:
        with CaptureQueriesContext(connection) as queries:
            response = superuser_client.get("/admin/social/follow/")

        counts = [q["sql"] for q in queries.captured_queries if "COUNT(" in q["sql"].upper()]
        assert response.status_code == 200
        assert counts and all("LIMIT" in sql.upper() for sql in counts)

    def test_the_list_says_about_n_when_estimated(self, five_follows: Any, superuser_client: Any, monkeypatch: Any) -> None:
        monkeypatch.setattr(admin_tools, "COUNT_CAP", 3)
        monkeypatch.setattr(admin_tools, "estimated_table_rows", lambda model, using="default": 870_000)

        response = superuser_client.get("/admin/social/follow/")

        assert "about 870,000 follows" in response.content.decode()

    def test_the_list_says_n_plus_when_filtered(self, five_follows: Any, superuser_client: Any, monkeypatch: Any) -> None:
        monkeypatch.setattr(admin_tools, "COUNT_CAP", 3)

        response = superuser_client.get("/admin/social/follow/", {"q": "star"})

        assert "3+ follows" in response.content.decode()


class TestUserSearch:
    def test_matches_username_prefixes_case_insensitively_and_ids(self) -> None:
        ann, anna, bob = (
            UserFactory.create(username="ann"),
            UserFactory.create(username="Anna"),
            UserFactory.create(username="bob"),
        )

        assert set(user_ids_matching("AN")) == {ann.pk, anna.pk}
        assert user_ids_matching(str(bob.pk)) == [bob.pk]
        assert user_ids_matching("nn") == []
        assert user_ids_matching("  ") == []

    def test_a_huge_number_is_not_an_error(self) -> None:
        assert user_ids_matching("9" * 40) == []

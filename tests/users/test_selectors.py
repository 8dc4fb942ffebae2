"""The account reads pages make on every request (``users.selectors``), written as raw SQL: the
same answers as the ORM's queries they replaced."""

from __future__ import annotations

import gc
import threading
import weakref
from typing import Any

import pytest
from django.db import DEFAULT_DB_ALIAS, connections
from django.utils import timezone

from core.errors import NotFound
from users.models import User
from users.selectors import LIST_FIELDS, account_by_id, accounts_from_sql, active_user_named, id_ranges, user_columns, users_by_id

pytestmark = pytest.mark.django_db


class TestActiveUserNamed:
    def test_any_case_finds_the_account_with_every_field(self, user_factory: Any) -> None:
        user = user_factory(username="Mixed_Case", display_name="Shown", bio="about me")

        for spelling in ("Mixed_Case", "mixed_case", "MIXED_CASE"):
            found = active_user_named(spelling)
            assert found.pk == user.pk
            assert (found.username, found.display_name, found.bio) == ("Mixed_Case", "Shown", "about me")
            assert found.date_joined == User.objects.get(pk=user.pk).date_joined
            assert found.get_deferred_fields() == set()

    def test_like_wildcards_in_a_name_match_only_themselves(self, user_factory: Any) -> None:
        user_factory(username="axb")
        user_factory(username="a.b")
        underscore = user_factory(username="a_b")

        assert active_user_named("a_b").pk == underscore.pk
        for absent in ("a%b", "a__b", "a_"):
            with pytest.raises(NotFound):
                active_user_named(absent)

    def test_deactivated_unknown_and_impossible_names_are_not_found(self, user_factory: Any) -> None:
        user_factory(username="gone", is_active=False)

        for name in ("gone", "nobody", "", "bad name", "x" * 200):
            with pytest.raises(NotFound):
                active_user_named(name)


class TestUsersById:
    def test_active_accounts_with_their_list_fields_loaded(self, user_factory: Any) -> None:
        shown = [user_factory(display_name=f"name {i}") for i in range(3)]
        hidden = user_factory(is_active=False)

        found = users_by_id([shown[2].pk, shown[0].pk, hidden.pk, shown[0].pk, 10**9, shown[1].pk])

        assert sorted(found) == sorted(user.pk for user in shown)
        for user in shown:
            assert (found[user.pk].username, found[user.pk].display_name) == (user.username, user.display_name)
            assert found[user.pk].is_active is True
            assert set(found[user.pk].get_deferred_fields()) == {
                field.attname for field in User._meta.concrete_fields if field.attname not in LIST_FIELDS
            }

    def test_no_ids_no_query(self, django_assert_num_queries: Any) -> None:
        with django_assert_num_queries(0):
            assert users_by_id([]) == {}


class TestAccountsFromSql:
    """The rows made into accounts without a queryset: every field as the ORM reads it (the
    database's converters applied: aware datetimes, booleans), the columns after them beside."""

    def test_every_field_equals_the_orms_and_the_columns_after_come_beside(self, user_factory: Any) -> None:
        user = user_factory(username="Row", display_name="Shown", bio="about", approve_followers=True, is_staff=True)
        User.objects.filter(pk=user.pk).update(last_login=timezone.now(), last_seen_at=timezone.now())
        table = User._meta.db_table

        found = accounts_from_sql(
            DEFAULT_DB_ALIAS,
            f"SELECT {user_columns(DEFAULT_DB_ALIAS, 'u')}, u.id + 1, 'x' FROM {table} u WHERE u.id = %s",
            [user.pk],
        )

        assert len(found) == 1
        account, others = found[0]
        expected = User.objects.get(pk=user.pk)
        names = [field.attname for field in User._meta.concrete_fields]
        assert [getattr(account, name) for name in names] == [getattr(expected, name) for name in names]
        assert account.last_login is not None and account.last_login.tzinfo is not None
        assert account.is_staff is True and account.approve_followers is True
        assert (account._state.adding, account._state.db) == (False, DEFAULT_DB_ALIAS)
        assert [int(others[0]), others[1]] == [user.pk + 1, "x"]

    def test_account_by_id_reads_active_and_deactivated_accounts(self, user_factory: Any) -> None:
        gone = user_factory(is_active=False)

        found = account_by_id(gone.pk)

        assert found is not None and (found.pk, found.is_active) == (gone.pk, False)
        assert account_by_id(10**12) is None


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("read", ["account_by_id", "users_by_id"])
def test_a_threads_connection_goes_with_the_thread(read: str, user_factory: Any) -> None:
    """A thread per request (the streaming process, runserver) reads the signed-in account on a
    connection of its own: what the read keeps for that connection goes with it, not the
    connection with the process (its database session stayed open)."""
    user = user_factory()
    reads = {"account_by_id": lambda: account_by_id(user.pk), "users_by_id": lambda: users_by_id([user.pk])}
    found: list[object] = []
    wrappers: list[weakref.ref[Any]] = []

    def request() -> None:
        wrappers.append(weakref.ref(connections[DEFAULT_DB_ALIAS]))
        found.append(reads[read]())  # and the thread ends without closing, as with CONN_MAX_AGE

    for _ in range(5):
        thread = threading.Thread(target=request)
        thread.start()
        thread.join()
    gc.collect()

    assert len(found) == 5 and all(found)
    assert [ref() for ref in wrappers] == [None] * 5


class TestIdRanges:
    def test_each_range_holds_at_most_the_batch_and_a_gap_in_the_ids_costs_no_range(self, user_factory: Any) -> None:
        near = [user_factory().pk for _ in range(5)]
        far = user_factory(pk=near[-1] + 10**12).pk
        start = near[0] - 1

        ranges = list(id_ranges(start_after=start, top=far, batch_users=2))

        assert ranges == [(start, near[1]), (near[1], near[3]), (near[3], far)]

    def test_a_walk_from_the_top_or_above_is_empty(self, user_factory: Any) -> None:
        top = user_factory().pk

        assert list(id_ranges(start_after=top, top=top, batch_users=10)) == []

    def test_a_batch_below_one_is_refused(self) -> None:
        with pytest.raises(ValueError, match="batch_users"):
            next(id_ranges(start_after=0, top=10, batch_users=0))

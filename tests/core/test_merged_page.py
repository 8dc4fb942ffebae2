"""``PAGE_LUA``'s ``merged_page`` against Python's order: score descending, then member bytes
descending (one sorted set's ZREVRANGE order), past any cursor, for members of every length and
members that are not decimal ids (the merge's numeric byte order and its fallback)."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from core.cluster import lua
from core.paging import _PAGE_SCRIPT

pytestmark = pytest.mark.django_db

# Decimal ids of 1 to 20 digits (longer than the 15 the numeric order covers), and a few that
# are not ids (the byte-by-byte comparison).
MEMBER = st.one_of(
    st.integers(min_value=0, max_value=10**20).map(str),
    st.sampled_from(["007", "0", "9", "10", "99", "100", "a", "9a", "10a", "~", "é", "", "-1", " 1", "1e5"]),
    # Either side of the 15 digits the numeric order covers.
    st.sampled_from(["99999999999999", "999999999999999", "1000000000000000", "9999999999999999", "10000000000000000"]),
)


def expected_page(rows: dict[str, int], cursor: tuple[int, str] | None, limit: int) -> list[tuple[str, int]]:
    """The first ``limit`` of ``rows`` (``{member: score}``) in ZREVRANGE order after ``cursor``."""

    def order(item: tuple[str, int]) -> tuple[int, bytes]:
        return item[1], item[0].encode()

    ranked = sorted(rows.items(), key=order, reverse=True)
    if cursor is not None:
        ranked = [item for item in ranked if order(item) < (cursor[0], cursor[1].encode())]
    return ranked[:limit]


@hypothesis_settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    members=st.lists(
        st.tuples(MEMBER, st.integers(min_value=0, max_value=3)), min_size=0, max_size=60, unique_by=lambda row: row[0]
    ),
    keys=st.integers(min_value=1, max_value=6),
    limit=st.integers(min_value=1, max_value=20),
    cursor_at=st.one_of(st.none(), st.integers(min_value=0, max_value=59), st.tuples(st.integers(0, 4), MEMBER)),
)
def test_any_members_and_ties_merge_in_one_sorted_sets_order(
    members: list[tuple[str, int]], keys: int, limit: int, cursor_at: Any, redis_client: Any
) -> None:
    names = [f"{settings.REDIS_KEY_PREFIX}test:merge:{{page}}:{k}" for k in range(keys)]
    rows = {member: 1_700_000_000 + tie for member, tie in members}
    redis_client.delete(*names)
    try:
        for index, (member, score) in enumerate(rows.items()):
            redis_client.zadd(names[index % keys], {member: score})
        cursor: tuple[int, str] | None
        if cursor_at is None:
            cursor = None
        elif isinstance(cursor_at, int):
            ranked = expected_page(rows, None, len(rows))
            cursor = (ranked[cursor_at][1], ranked[cursor_at][0]) if cursor_at < len(ranked) else None
        else:
            cursor = (1_700_000_000 + cursor_at[0], cursor_at[1])  # any position: on a member or between two
        arguments: list[int | str] = [limit, "", ""] if cursor is None else [limit, cursor[0], cursor[1]]

        reply = lua(_PAGE_SCRIPT)(keys=names, args=arguments, client=redis_client)

        flat = iter(reply)
        found = [(member.decode(), int(score)) for member, score in zip(flat, flat)]
        assert found == expected_page(rows, cursor, limit)
    finally:
        redis_client.delete(*names)


@pytest.mark.parametrize("digits", [14, 15, 16, 17, 20])
def test_ids_that_differ_in_their_last_digit_tie_in_order(digits: int, redis_client: Any) -> None:
    """Ids one apart at the length where the numeric order ends (a number past 2^53 would round
    neighbours together), one score, spread over three keys."""
    names = [f"{settings.REDIS_KEY_PREFIX}test:merge:{{page}}:{k}" for k in range(3)]
    head = "1" + "0" * (digits - 2)
    rows = {f"{head}{last}": 1_700_000_000 for last in range(10)}
    redis_client.delete(*names)
    try:
        for index, member in enumerate(sorted(rows)):
            redis_client.zadd(names[index % 3], {member: rows[member]})

        reply = lua(_PAGE_SCRIPT)(keys=names, args=[10, "", ""], client=redis_client)

        assert [member.decode() for member in reply[::2]] == [member for member, _ in expected_page(rows, None, 10)]
    finally:
        redis_client.delete(*names)

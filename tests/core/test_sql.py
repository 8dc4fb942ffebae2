"""core.sql: ids written into a query's IN list."""

from __future__ import annotations

import pytest

from core.sql import id_list


def test_ids_are_written_as_their_digits() -> None:
    assert id_list([3, 10, 42]) == "3, 10, 42"


@pytest.mark.parametrize("bad", [["1) OR (1=1"], ["7"], [1.5], []])
def test_anything_but_integers_is_refused(bad: list[object]) -> None:
    with pytest.raises(ValueError):
        id_list(bad)  # type: ignore[arg-type]


def test_none_is_refused() -> None:
    with pytest.raises(TypeError):
        id_list([None])  # type: ignore[list-item]

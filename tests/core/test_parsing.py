"""Parsing at the edge: ids are ASCII digits without a leading zero, 1..2**63-1 (C23)."""

from __future__ import annotations

import pytest

from core.errors import InvalidInput
from core.parsing import MAX_ID, parse_id


class TestParseId:
    @pytest.mark.parametrize("raw", ["1", "42", str(MAX_ID), 7, MAX_ID])
    def test_accepts_plain_positive_ids(self, raw: object) -> None:
        assert parse_id(raw) == int(raw)  # type: ignore[call-overload]

    @pytest.mark.parametrize(
        "raw",
        [
            "abc",
            "-1",
            "0",
            "1.5",
            "",
            " ",
            "99999999999999999999",
            True,
            False,
            None,
            0,
            -3,
            MAX_ID + 1,
            1.0,
            # C23: digits str.isdigit() accepts, and numbers that are not written plainly.
            "²",
            "①",
            "١٢",
            "𝟙𝟘",
            "000000000000000011",
            "13 ",
            " 13",
            "+13",
            "1_000",
            "0x1f",
            "13\n",
        ],
    )
    def test_refuses_everything_else_with_a_message(self, raw: object) -> None:
        with pytest.raises(InvalidInput) as refused:
            parse_id(raw, name="User id")

        assert refused.value.status == 400
        assert refused.value.message == "User id must be a positive integer."

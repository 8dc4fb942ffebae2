"""Parsing of request input at the edge: every value a view or the API takes is parsed here once.

Services receive typed values; every failure is an ``InvalidInput`` (400)
with a message written for people.
"""

from __future__ import annotations

import re

from .errors import InvalidInput

# The largest id a BIGINT column holds.
MAX_ID = 2**63 - 1
# ASCII digits only (str.isdigit() also accepts "²", "①", "١٢", "𝟙𝟘"), no leading zero.
_ID = re.compile(r"[1-9][0-9]{0,18}")


def parse_id(raw: object, *, name: str = "id") -> int:
    """A positive integer id from a URL segment, query value or JSON value.

    Accepts a JSON integer or a string of ASCII digits without a leading
    zero or surrounding spaces, from 1 to 2**63 - 1.

    :raises InvalidInput: anything else (``"abc"``, ``"-1"``, ``"1.5"``,
        ``True``, ``"²"``, ``"000011"``, ``"13 "``).
    """
    message = f"{name} must be a positive integer."
    if isinstance(raw, bool):
        raise InvalidInput(message)
    if isinstance(raw, int):
        value = raw
    elif isinstance(raw, str) and _ID.fullmatch(raw):
        value = int(raw)
    else:
        raise InvalidInput(message)
    if not 1 <= value <= MAX_ID:
        raise InvalidInput(message)
    return value

"""Pieces of raw SQL that followfeed's hand-written queries share."""

from __future__ import annotations

from collections.abc import Iterable


def id_list(ids: Iterable[int]) -> str:
    """``ids`` written out for an ``IN (...)`` of a query: ``"1, 2, 3"`` (at least one id).

    Written into the query, not sent as parameters: the driver escapes every parameter in Python,
    about a microsecond each, and a page's checks send up to a hundred ids. The ``d`` format
    writes nothing but an integer's digits.

    :raises ValueError: an id that is a string or a fraction, or no ids.
    :raises TypeError: an id of another type (None).
    """
    text = ", ".join([f"{value:d}" for value in ids])
    if not text:
        raise ValueError("an IN list needs at least one id")
    return text

"""Argument types the management commands share (argparse ``type=`` callables)."""

from __future__ import annotations


def fraction(raw: str) -> float:
    """A fraction ``0 < f <= 1`` written as a number (``--sample 0.1``).

    :raises ValueError: not a number, or outside (0, 1] (argparse reports it as a usage error).
    """
    value = float(raw)
    if not 0 < value <= 1:
        raise ValueError(raw)
    return value

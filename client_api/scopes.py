"""Mastodon's OAuth scopes: which granted scopes cover the scope an endpoint needs.

``read`` covers every ``read:*``, ``write`` every ``write:*``; the legacy
``follow`` covers reading and changing follows, blocks and mutes; ``profile``
only ``GET /api/v1/accounts/verify_credentials``.
"""

from __future__ import annotations

from collections.abc import Iterable

FOLLOW_COVERS = frozenset({"read:follows", "read:blocks", "read:mutes", "write:follows", "write:blocks", "write:mutes"})


def allows(granted: Iterable[str], required: str) -> bool:
    """Whether the scopes ``granted`` cover ``required`` (``"read:accounts"``, ``"write"``...)."""
    have = set(granted)
    if required in have:
        return True
    top = required.split(":", 1)[0]
    if top != required and top in have:
        return True
    return "follow" in have and required in FOLLOW_COVERS


def within(requested: Iterable[str], registered: Iterable[str]) -> bool:
    """Whether every scope of ``requested`` is covered by the application's ``registered`` scopes."""
    registered = list(registered)
    return all(allows(registered, scope) for scope in requested)

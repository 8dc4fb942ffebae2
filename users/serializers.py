"""The JSON shapes of accounts, shared by every app's API."""

from __future__ import annotations

from typing import Any, Protocol


class Shown(Protocol):
    """An account as a page shows it: a ``User``, or a timeline's lighter copy of its names."""

    @property
    def pk(self) -> Any: ...

    @property
    def username(self) -> str: ...

    @property
    def shown_name(self) -> str: ...


def user_json(user: Shown) -> dict[str, Any]:
    """The public fields of an account: ``{"id": int, "username": str, "displayName": str}``."""
    return {"id": user.pk, "username": user.username, "displayName": user.shown_name}

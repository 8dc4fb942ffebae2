"""The JSON shapes of accounts, shared by every app's API."""

from __future__ import annotations

from typing import Any

from .models import User


def user_json(user: User) -> dict[str, Any]:
    """The public fields of an account: ``{"id": int, "username": str, "displayName": str}``."""
    return {"id": user.pk, "username": user.username, "displayName": user.shown_name}

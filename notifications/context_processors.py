"""The unread notifications count in the header of every page (O(1): read with the session, else one Redis GET)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from users.models import User

from .selectors import unread_count


def unread(request: HttpRequest) -> dict[str, Any]:
    """``{"unread_count": n}`` for a signed-in reader, lazily (only a page that shows it reads it)."""
    user = getattr(request, "user", None)
    if not isinstance(user, User):
        return {}
    return {"unread_count": _Lazy(user.pk)}


class _Lazy:
    """The count, read on first use in the template."""

    def __init__(self, user_id: int) -> None:
        self.user_id = user_id
        self.value: int | None = None

    def _get(self) -> int:
        if self.value is None:
            self.value = unread_count(user_id=self.user_id)
        return self.value

    def __int__(self) -> int:
        return self._get()

    def __str__(self) -> str:
        return str(self._get())

    def __bool__(self) -> bool:
        return self._get() > 0

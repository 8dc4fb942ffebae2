"""The JSON shapes of accounts, shared by every app's API."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from .models import User


class Shown(Protocol):
    """An account as a page shows it: a ``User``, or a timeline's lighter copy of its names."""

    @property
    def pk(self) -> Any: ...

    @property
    def username(self) -> str: ...

    @property
    def shown_name(self) -> str: ...


@dataclass(frozen=True, slots=True)
class ShownAccount:
    """An active account as a page shows it: ``id`` (also ``pk``), ``username``, ``display_name``
    and ``shown_name`` (``is_active`` True). Immutable, so one instance serves every page of a
    process that shows this account with these names (``users.account_cache``)."""

    id: int
    username: str
    display_name: str
    is_active: ClassVar[bool] = True

    @property
    def pk(self) -> int:
        """The account's id (as on a model)."""
        return self.id

    @property
    def shown_name(self) -> str:
        """The display name, or the username when there is none (``User.shown_name``)."""
        return self.display_name or self.username

    @classmethod
    def of(cls, user: User) -> ShownAccount:
        """The ``ShownAccount`` of ``user``."""
        return cls(user.pk, user.username, user.display_name)


def user_json(user: Shown) -> dict[str, Any]:
    """The public fields of an account: ``{"id": int, "username": str, "displayName": str}``."""
    return {"id": user.pk, "username": user.username, "displayName": user.shown_name}

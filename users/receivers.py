"""Thin receivers of account events, connected in ``UsersConfig.ready``."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from .models import User
from .services import user_touch_seen


def on_user_logged_in(sender: Any, *, request: HttpRequest, user: User, **kwargs: Any) -> None:
    """Record the sign-in as a visit (fan-out delivers only to recently seen accounts)."""
    user_touch_seen(user=user)

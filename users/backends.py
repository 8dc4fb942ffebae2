"""How a request's account is found: Django's ``ModelBackend`` with a cheaper read."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from core.parsing import id_or_none

from .account_rows import signed_in_account
from .models import User


class AccountBackend(ModelBackend):
    """``ModelBackend`` (passwords, permissions, inactive accounts refused), its read of the
    signed-in account on every request from this process's copy while the account's version token
    says it is current, else in raw SQL (``users.account_rows``).

    ``AUTHENTICATION_BACKENDS`` lists ``ModelBackend`` after it only for the sessions signed in
    before this backend existed: a failed sign-in ends here (``PermissionDenied``), so the
    password is never hashed a second time.
    """

    def get_user(self, user_id: Any) -> User | None:
        """The active account ``user_id`` (None: none, or deactivated)."""
        parsed = id_or_none(str(user_id))
        user = None if parsed is None else signed_in_account(parsed)
        return user if user is not None and self.user_can_authenticate(user) else None

    def authenticate(
        self, request: HttpRequest | None, username: str | None = None, password: str | None = None, **kwargs: Any
    ) -> User | None:
        """``ModelBackend.authenticate``; a failure raises ``PermissionDenied`` (``authenticate``
        then answers None, after the ``user_login_failed`` signal)."""
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None:
            raise PermissionDenied
        return user

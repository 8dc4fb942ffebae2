"""Thin receivers of account events, connected in ``UsersConfig.ready``."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from . import account_rows
from .models import User
from .outbox import account_written
from .services import user_touch_seen


def on_user_logged_in(sender: Any, *, request: HttpRequest, user: User, **kwargs: Any) -> None:
    """Record the sign-in as a visit (fan-out delivers only to recently seen accounts)."""
    user_touch_seen(user=user)


def on_user_saved(
    sender: Any, *, instance: User, created: bool, raw: bool = False, update_fields: Any = None, **kwargs: Any
) -> None:
    """An account's row was written: its version token changes after commit (``users.outbox``)."""
    # raw: a fixture loaded over an existing row writes it too.
    if not created and not (update_fields is not None and set(update_fields) <= User.UNVERSIONED_FIELDS):
        account_written([instance.pk])


def on_user_deleted(sender: Any, *, instance: User, **kwargs: Any) -> None:
    """An account was deleted: a process's kept row of it must not serve again."""
    account_written([instance.pk])


def on_accounts_updated(sender: Any, *, user_ids: list[int], **kwargs: Any) -> None:
    """Accounts were updated by a queryset: their version tokens change after commit."""
    account_written(user_ids)


def on_request_started(sender: Any, **kwargs: Any) -> None:
    """A request begins: nothing read with an earlier request's session is its."""
    account_rows.request_started()

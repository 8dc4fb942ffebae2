"""Every write of accounts."""

from __future__ import annotations

from datetime import timedelta

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.errors import Conflict

from .models import User
from .signals import user_activity_changed

# last_seen_at is written at most this often per account (seconds), so
# browsing does not turn every page view into an UPDATE.
SEEN_RESOLUTION_SECONDS = 300


class UsernameTaken(Conflict):
    """Another account has that name, whatever its case (HTTP 409)."""


def user_create(*, username: str, password: str, display_name: str = "") -> User:
    """Create an active account.

    :param username: parsed (``core.parsing.parse_username``); unique ignoring case.
    :returns: the saved ``User``.
    :raises UsernameTaken: the name exists in any case, also when a concurrent sign-up
        took it between the check and the insert (409).
    :raises django.core.exceptions.ValidationError: the model's own checks.
    """
    if User.objects.filter(username__iexact=username).exists():
        raise UsernameTaken("That name is taken.")
    user = User(username=username, display_name=display_name)
    user.set_password(password)
    try:
        user.full_clean()
        # The unique index (the column's collation ignores case) decides
        # between two sign-ups of one name that both passed the check above.
        with transaction.atomic():
            user.save()
    except IntegrityError:
        raise UsernameTaken("That name is taken.") from None
    except ValidationError as exc:
        if "username" in exc.message_dict:
            raise UsernameTaken("That name is taken.") from None
        raise
    return user


def user_touch_seen(*, user: User) -> bool:
    """Record that ``user`` was active now (feeds fan out only to recently seen accounts).

    :returns: True when the stored time was updated.
    """
    now = timezone.now()
    if user.last_seen_at and now - user.last_seen_at < timedelta(seconds=SEEN_RESOLUTION_SECONDS):
        return False
    User.objects.filter(pk=user.pk).update(last_seen_at=now)
    user.last_seen_at = now
    return True


def user_set_active(*, user: User, is_active: bool) -> bool:
    """Deactivate or reactivate ``user``: its follows stop counting in database reads at once and leave
    Redis after commit (``user_activity_changed``); reactivation restores them from the kept rows.

    :returns: True when the flag changed.
    """
    if user.is_active == is_active:
        return False
    with transaction.atomic():
        User.objects.filter(pk=user.pk).update(is_active=is_active)
        user.is_active = is_active
        # Inside the transaction: receivers record their outbox entries in it.
        user_activity_changed.send(sender=User, user_id=user.pk, is_active=is_active)
    return True

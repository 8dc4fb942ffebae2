"""Thin receivers: schedule work on commit, nothing else."""

from typing import Any

from django.contrib.auth.signals import user_logged_in
from django.db.models.signals import pre_delete
from django.dispatch import Signal, receiver

# Sent after commit with ``user_id`` and ``is_active`` when an account is
# deactivated or reactivated; the feed listens.
user_activity_changed = Signal()


@receiver(user_logged_in, dispatch_uid="users.touch_last_seen")
def on_user_logged_in(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    from .services import user_touch_seen

    user_touch_seen(user=user)


@receiver(pre_delete, sender="users.User", dispatch_uid="users.remirror_deleted_user")
def on_user_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    # Any delete path (admin, shell, QuerySet.delete) cascades the follow
    # rows without the services: re-mirror the account's edges on commit.
    # pre_delete, so the edges are still there to be counted.
    from social.services import user_mirror_refresh

    user_mirror_refresh(user_id=instance.pk)

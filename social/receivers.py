"""Thin receivers: record the follow mirror's outbox entries inside the transaction of the change.

Connected in ``SocialConfig.ready`` with ``dispatch_uid``s:

- ``users.signals.user_activity_changed`` -> re-mirror every edge of the account;
  re-derive its followers' "who to follow" (``social.suggest_account``) and
  the most-followed rankings (``social.rankings``); on reactivation, its
  unfinished imports go on
- ``pre_delete`` of ``users.User`` -> the same, before the cascade removes the
  rows (any delete path: admin, shell, ``QuerySet.delete``); the followers'
  "who to follow" get one ``social.suggest`` entry each, as the rows that
  name them go with the account; the blocks and mutes of every pair the
  account has are re-mirrored, so the other side's sets lose its id

Deactivation and reactivation change no block or mute: the rows stay, in
force, and the sets keep showing them (as a rebuild from the database does).
"""

from __future__ import annotations

from typing import Any

from core import outbox
from users.models import User

from . import outbox as social_outbox
from .controls import controls_mirror_refresh
from .models import Follow
from .services import user_mirror_refresh
from .transfer import follows_imports_resume


def on_user_activity_changed(sender: Any, *, user_id: int, is_active: bool, **kwargs: Any) -> None:
    user_mirror_refresh(user_id=user_id)
    outbox.record(social_outbox.SUGGEST_ACCOUNT, subject_id=user_id)
    outbox.record(social_outbox.RANKINGS, subject_id=user_id)
    if is_active:
        follows_imports_resume(user_id=user_id)


def on_user_deleted(sender: Any, *, instance: User, **kwargs: Any) -> None:
    # pre_delete, so the edges, blocks and mutes are still there to be read.
    user_mirror_refresh(user_id=instance.pk)
    followers = Follow.objects.filter(followee_id=instance.pk).order_by("follower_id").values_list("follower_id", flat=True)
    outbox.record_many(social_outbox.SUGGEST, [(follower, instance.pk) for follower in followers])
    outbox.record(social_outbox.RANKINGS, subject_id=instance.pk)
    controls_mirror_refresh(user_id=instance.pk)

"""Thin receivers: record the follow mirror's outbox entries inside the transaction of the change.

Connected in ``SocialConfig.ready``: an account's (de)activation and its ``pre_delete`` (any
delete path, before the cascade) re-mirror its edges, re-derive its followers' suggestions and
the rankings, resume imports on reactivation, and on deletion re-mirror its blocks and mutes.
(De)activation changes no block or mute.
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

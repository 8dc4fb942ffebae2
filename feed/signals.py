"""Thin receivers: schedule feed work on commit, nothing else.

Connected in ``FeedConfig.ready`` with ``dispatch_uid``s:

- ``social.signals.follow_created`` -> backfill the followee's notes
- ``social.signals.follow_deleted`` -> remove the followee's notes
- ``users.signals.user_activity_changed`` -> withdraw or restore the author's notes
- ``django.contrib.auth.signals.user_logged_in`` -> keep the inbox synced or catch up
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from . import services


def on_follow_created(sender: Any, follower_id: int, followee_id: int, **kwargs: Any) -> None:
    services.enqueue("feed_inbox_backfill", follower_id=follower_id, followee_id=followee_id)


def on_follow_deleted(sender: Any, follower_id: int, followee_id: int, **kwargs: Any) -> None:
    services.enqueue("feed_inbox_remove_followee", follower_id=follower_id, followee_id=followee_id)


def on_user_activity_changed(sender: Any, user_id: int, is_active: bool, **kwargs: Any) -> None:
    services.enqueue("feed_author_refresh", author_id=user_id)


def on_user_logged_in(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    transaction.on_commit(lambda: services.inbox_sign_in(user_id=user.pk))

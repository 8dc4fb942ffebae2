"""Thin receivers: record the feed's outbox entries inside the transaction that caused them.

Connected in ``FeedConfig.ready`` with ``dispatch_uid``s:

- ``social.signals.follow_created`` / ``follow_deleted`` -> ``feed.pair``
  (backfill the followee's notes, or remove them)
- ``users.signals.user_activity_changed`` -> ``feed.author`` (withdraw or
  restore the author's notes; drop or rebuild its inbox)
- ``pre_delete`` of ``users.User`` -> ``feed.purge`` and a ``feed.pair`` per
  follower (any delete path)
- ``django.contrib.auth.signals.user_logged_in`` -> keep the inbox synced or
  catch up, after commit
"""

from __future__ import annotations

from functools import partial
from typing import Any

from django.db import transaction
from django.http import HttpRequest

from core import outbox
from users.models import User

from . import outbox as feed_outbox
from . import services


def on_follow_changed(sender: Any, *, follower_id: int, followee_id: int, **kwargs: Any) -> None:
    outbox.record(feed_outbox.PAIR, subject_id=follower_id, object_id=followee_id)


def on_user_activity_changed(sender: Any, *, user_id: int, is_active: bool, **kwargs: Any) -> None:
    outbox.record(feed_outbox.AUTHOR, subject_id=user_id)


def on_user_deleted(sender: Any, *, instance: User, **kwargs: Any) -> None:
    # pre_delete: the account's follow rows are still there to be read.
    feed_outbox.deletion_record(user_id=instance.pk)


def on_user_logged_in(sender: Any, *, request: HttpRequest, user: User, **kwargs: Any) -> None:
    transaction.on_commit(partial(services.inbox_sign_in, user_id=user.pk))

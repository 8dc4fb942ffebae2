"""Thin receivers: record the feed's outbox entries inside the transaction that caused them.

Follow, unfollow and mute signals record ``feed.pair``; activity changes ``feed.author`` and
``feed.author_cache``; an account's ``pre_delete`` ``feed.purge`` and a ``feed.pair`` per follower;
sign-in keeps the inbox synced. Account saves that change what a note shows, and note rows
deleted outside the services, forget the note cache (``@receiver`` here). Connected in ``FeedConfig.ready``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from django.http import HttpRequest

from core import outbox
from users.models import User

from . import note_cache, services
from . import outbox as feed_outbox
from .models import Note

# The fields of an account a page shows of a note's author, or that hide its notes.
AUTHOR_FIELDS = frozenset({"username", "display_name", "is_active"})


def on_follow_changed(sender: Any, *, follower_id: int, followee_id: int, **kwargs: Any) -> None:
    outbox.record(feed_outbox.PAIR, subject_id=follower_id, object_id=followee_id)


def on_follow_deleted(sender: Any, *, follower_id: int, followee_id: int, **kwargs: Any) -> None:
    services.list_members_unfollowed(follower_id=follower_id, followee_id=followee_id)


def on_mute_changed(sender: Any, *, muter_id: int, muted_id: int, **kwargs: Any) -> None:
    # The same job as a follow change: the inbox agrees with "follows and does not mute".
    outbox.record(feed_outbox.PAIR, subject_id=muter_id, object_id=muted_id)


def on_user_activity_changed(sender: Any, *, user_id: int, is_active: bool, **kwargs: Any) -> None:
    outbox.record(feed_outbox.AUTHOR, subject_id=user_id)
    outbox.record(feed_outbox.AUTHOR_CACHE, subject_id=user_id)
    services.lists_member_changed(account_id=user_id)


def on_user_deleted(sender: Any, *, instance: User, **kwargs: Any) -> None:
    # First: applied in this order, the purge then unlinks the tombstone too.
    outbox.record(feed_outbox.AUTHOR_CACHE, subject_id=instance.pk)
    # pre_delete: the account's follow rows are still there to be read.
    feed_outbox.deletion_record(user_id=instance.pk)
    services.lists_member_changed(account_id=instance.pk)


def on_user_logged_in(sender: Any, *, request: HttpRequest, user: User, **kwargs: Any) -> None:
    transaction.on_commit(partial(services.inbox_sign_in, user_id=user.pk))


@receiver(post_save, sender=User, dispatch_uid="feed.forget_cached_author")
def on_user_saved(
    sender: Any, *, instance: User, created: bool, raw: bool = False, update_fields: Any = None, **kwargs: Any
) -> None:
    if not created and not raw and (update_fields is None or AUTHOR_FIELDS & set(update_fields)):
        outbox.record(feed_outbox.AUTHOR_CACHE, subject_id=instance.pk)


@receiver(post_delete, sender=Note, dispatch_uid="feed.forget_deleted_note")
def on_note_deleted(sender: Any, *, instance: Note, origin: Any = None, **kwargs: Any) -> None:
    # ``origin``: what was deleted (an account, accounts, or notes themselves).
    if not (isinstance(origin, User) or (isinstance(origin, QuerySet) and issubclass(origin.model, User))):
        transaction.on_commit(partial(note_cache.cache_forget_now, note_ids=[instance.pk]))

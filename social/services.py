"""Every write of the follow graph.

Each action writes the database and a ``MirrorOutbox`` row in one
transaction; after commit the Redis mirror is applied from the database's
truth (``social.mirror``) and the ``follow_created``/``follow_deleted``
signals tell other apps (the feed backfills and cleans inboxes). If Redis is
down the follow still succeeds; the outbox entry stays pending until the
drain task applies it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, OperationalError, transaction

from .mirror import outbox_apply_after_commit
from .models import Follow, MirrorOutbox
from .signals import follow_created, follow_deleted

User = get_user_model()


class FollowError(Exception):
    """A follow or unfollow that cannot be done; ``status`` is the HTTP status to answer."""

    status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SelfFollowError(FollowError):
    """The actor named itself as the target (HTTP 400)."""


class InvalidUserIdError(FollowError):
    """The target id is not a positive integer (HTTP 400)."""


class TargetNotFoundError(FollowError):
    """No account with that id, or it is deactivated (HTTP 404)."""

    status = 404


class ActorInactiveError(FollowError):
    """A deactivated account cannot change its follows (HTTP 403)."""

    status = 403


@dataclass(frozen=True)
class FollowResult:
    """Outcome of a follow/unfollow: ``changed`` is False for an idempotent repeat."""

    changed: bool
    follower_id: int
    followee_id: int


def parse_user_id(raw: Any) -> int:
    """Turn a URL or JSON user id into an int.

    :raises InvalidUserIdError: for anything but a positive decimal integer
        below 2**63 (``"abc"``, ``-1``, ``"1.5"``, ``True``).
    """
    if isinstance(raw, bool):
        raise InvalidUserIdError("User id must be a positive integer.")
    text = str(raw).strip()
    if not text.isdigit() or len(text) > 18:
        raise InvalidUserIdError("User id must be a positive integer.")
    value = int(text)
    if value <= 0:
        raise InvalidUserIdError("User id must be a positive integer.")
    return value


# MariaDB errors after which the whole transaction may simply run again:
# 1213 deadlock (InnoDB picked us as the victim), 1205 lock wait timeout.
# A follow racing an unfollow of the same pair takes gap and insert-intention
# locks on the unique index in opposite orders, so deadlocks are expected
# under contention (MariaDB manual, "InnoDB Deadlocks": "always be prepared
# to re-issue a transaction if it fails due to deadlock").
RETRYABLE_DATABASE_ERRORS = (1213, 1205)
WRITE_ATTEMPTS = 5


def _retry_on_deadlock(write: Callable[[], FollowResult]) -> FollowResult:
    """Run the transaction ``write``; after a deadlock or lock timeout run it again (up to
    WRITE_ATTEMPTS times, with a short random back-off). Inside an outer transaction the error
    propagates, since only the outermost transaction can be retried.

    :raises OperationalError: when every attempt failed, or for any other database error.
    """
    for attempt in range(WRITE_ATTEMPTS):
        try:
            return write()
        except OperationalError as exc:
            code = exc.args[0] if exc.args else None
            if code not in RETRYABLE_DATABASE_ERRORS or attempt == WRITE_ATTEMPTS - 1:
                raise
            if transaction.get_connection().in_atomic_block:
                raise
            time.sleep(random.uniform(0, 0.005 * 2**attempt))
    raise AssertionError("unreachable")


def _schedule_mirror(entry: MirrorOutbox) -> None:
    transaction.on_commit(lambda: outbox_apply_after_commit([entry.id]))


def follow_create(*, actor: Any, target_id: Any) -> FollowResult:
    """Make ``actor`` follow the account ``target_id``; a repeat is a no-op success.

    :param actor: the signed-in user (a ``users.User``).
    :param target_id: the followee's id, raw from the request.
    :returns: ``FollowResult(changed=True)`` when a row was created.
    :raises InvalidUserIdError: malformed id (400).
    :raises SelfFollowError: ``actor`` is the target (400).
    :raises TargetNotFoundError: unknown or deactivated target (404).
    :raises ActorInactiveError: ``actor`` is deactivated (403).
    """
    followee_id = parse_user_id(target_id)
    if not actor.is_active:
        raise ActorInactiveError("Your account is deactivated.")
    if followee_id == actor.pk:
        raise SelfFollowError("You cannot follow yourself.")
    if not User.objects.filter(pk=followee_id, is_active=True).exists():
        raise TargetNotFoundError("No such user.")
    return _retry_on_deadlock(lambda: _follow_insert(follower_id=actor.pk, followee_id=followee_id))


def _follow_insert(*, follower_id: int, followee_id: int) -> FollowResult:
    with transaction.atomic():
        for _ in range(WRITE_ATTEMPTS):
            try:
                # Concurrent duplicate follows race on the unique constraint;
                # the loser's IntegrityError inside the savepoint means
                # "already following", which is a success, not a 500.
                with transaction.atomic():
                    Follow.objects.create(follower_id=follower_id, followee_id=followee_id)
                break
            except IntegrityError:
                if Follow.objects.filter(follower_id=follower_id, followee_id=followee_id).exists():
                    return FollowResult(changed=False, follower_id=follower_id, followee_id=followee_id)
                if not User.objects.filter(pk=followee_id, is_active=True).exists():
                    raise TargetNotFoundError("No such user.") from None
                # The row we collided with was deleted by a concurrent
                # unfollow after it blocked our insert: insert again.
        else:
            raise TargetNotFoundError("No such user.")  # pragma: no cover - five collisions in a row
        entry = MirrorOutbox.objects.create(kind=MirrorOutbox.KIND_PAIR, follower_id=follower_id, followee_id=followee_id)
        _schedule_mirror(entry)
        transaction.on_commit(
            lambda: follow_created.send(sender=Follow, follower_id=follower_id, followee_id=followee_id)
        )
    return FollowResult(changed=True, follower_id=follower_id, followee_id=followee_id)


def follow_delete(*, actor: Any, target_id: Any) -> FollowResult:
    """Make ``actor`` stop following ``target_id``; not following is a no-op success.

    Works when the target is deactivated (the edge is cleaned up).

    :returns: ``FollowResult(changed=True)`` when a row was deleted.
    :raises InvalidUserIdError: malformed id (400).
    :raises SelfFollowError: ``actor`` is the target (400).
    :raises TargetNotFoundError: no account with that id (404).
    """
    followee_id = parse_user_id(target_id)
    if followee_id == actor.pk:
        raise SelfFollowError("You cannot unfollow yourself.")
    if not User.objects.filter(pk=followee_id).exists():
        raise TargetNotFoundError("No such user.")
    return follow_delete_pair(follower_id=actor.pk, followee_id=followee_id)


def follow_delete_pair(*, follower_id: int, followee_id: int) -> FollowResult:
    """Delete the edge ``follower_id -> followee_id`` if present (admin and bulk paths too).

    :returns: ``FollowResult(changed=...)``; mirror and signals on commit.
    """
    return _retry_on_deadlock(lambda: _follow_remove(follower_id=follower_id, followee_id=followee_id))


def _follow_remove(*, follower_id: int, followee_id: int) -> FollowResult:
    with transaction.atomic():
        deleted, _ = Follow.objects.filter(follower_id=follower_id, followee_id=followee_id).delete()
        if not deleted:
            return FollowResult(changed=False, follower_id=follower_id, followee_id=followee_id)
        entry = MirrorOutbox.objects.create(kind=MirrorOutbox.KIND_PAIR, follower_id=follower_id, followee_id=followee_id)
        _schedule_mirror(entry)
        transaction.on_commit(
            lambda: follow_deleted.send(sender=Follow, follower_id=follower_id, followee_id=followee_id)
        )
    return FollowResult(changed=True, follower_id=follower_id, followee_id=followee_id)


# Accounts with at most this many edges (both directions) are re-mirrored
# right after commit, in the request, like a follow: their counts, lists and
# common follows change at once. Bigger ones go to Celery (a request must
# not write 200k pairs). About 2000 pairs take ~50 ms of Redis pipelines.
USER_REFRESH_INLINE_EDGES = 2000


def user_mirror_refresh(*, user_id: int) -> None:
    """Record that every edge of ``user_id`` must be re-mirrored (activation change, deletion).

    Call inside the transaction that changed the user, before a deletion
    cascades its follows (the edges are counted here). After commit a small
    account is applied at once (``outbox_apply_after_commit``); a big one,
    or one whose inline apply failed, is applied by the
    ``social_outbox_apply`` task. The entry stays pending until applied, so
    the drain repairs it if both fail.
    """
    entry = MirrorOutbox.objects.create(kind=MirrorOutbox.KIND_USER, follower_id=user_id, followee_id=None)
    edges = (
        Follow.objects.filter(follower_id=user_id).values("pk")[: USER_REFRESH_INLINE_EDGES + 1].count()
        + Follow.objects.filter(followee_id=user_id).values("pk")[: USER_REFRESH_INLINE_EDGES + 1].count()
    )
    inline = edges <= USER_REFRESH_INLINE_EDGES

    def _apply() -> None:
        from .tasks import social_outbox_apply

        if inline:
            outbox_apply_after_commit([entry.id])
            if not MirrorOutbox.objects.filter(pk=entry.id, applied_at__isnull=True).exists():
                return
        social_outbox_apply.delay(entry_ids=[entry.id])

    transaction.on_commit(_apply)

"""Every write of the follow graph.

Each action writes the database and a ``social.pair`` outbox entry
(``social.outbox``) in one transaction; after commit the entry is applied
to Redis from the database's truth. Inside the same transaction the
``follow_created``/``follow_deleted`` signals let other apps record their
own outbox entries (the feed backfills and cleans inboxes), so every side
effect is as durable as the follow. If Redis is down the follow still
succeeds; the entries stay pending until the drain applies them.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, OperationalError, transaction

from core import limits, outbox
from core.errors import DomainError, Forbidden, InvalidInput, NotFound
from users.models import User

from . import outbox as social_outbox
from .models import Follow
from .selectors import follow_counts
from .signals import follow_created, follow_deleted


class FollowError(DomainError):
    """A follow or unfollow that cannot be done (its ``status`` is the HTTP status to answer)."""


class SelfFollowError(FollowError, InvalidInput):
    """The actor named itself as the target (HTTP 400)."""


class TargetNotFoundError(FollowError, NotFound):
    """No account with that id, or it is deactivated (HTTP 404)."""


class ActorInactiveError(FollowError, Forbidden):
    """A deactivated account cannot change its follows (HTTP 403)."""


class FollowingLimitReached(FollowError):
    """The actor follows as many accounts as it may (HTTP 422)."""

    status = 422


def following_limit(*, followers: int) -> int:
    """How many accounts an account with ``followers`` may follow:
    ``max(FOLLOWING_MAX, FOLLOWING_RATIO x followers)`` (Mastodon's rule)."""
    return max(int(settings.FOLLOWING_MAX), int(followers * float(settings.FOLLOWING_RATIO)))


@dataclass(frozen=True)
class FollowResult:
    """Outcome of a follow/unfollow: ``changed`` is False for an idempotent repeat."""

    changed: bool
    follower_id: int
    followee_id: int


# MariaDB errors after which the whole transaction may simply run again:
# 1213 deadlock (InnoDB picked us as the victim), 1205 lock wait timeout.
# A follow racing an unfollow of the same pair takes gap and insert-intention
# locks on the unique index in opposite orders, so deadlocks are expected
# under contention, and InnoDB expects the client to re-issue the transaction.
RETRYABLE_DATABASE_ERRORS = (1213, 1205)
WRITE_ATTEMPTS = 5


def _retry_on_deadlock(write: Callable[[], FollowResult]) -> FollowResult:
    """Run the transaction ``write``; after a deadlock or lock timeout run it again (up to
    WRITE_ATTEMPTS times, with a short random back-off). Inside an outer transaction the error
    propagates, since only the outermost transaction can be retried.

    :raises OperationalError: when every attempt failed, or for any other database error.
    """
    attempt = 0
    while True:
        try:
            return write()
        except OperationalError as exc:
            code = exc.args[0] if exc.args else None
            attempt += 1
            if code not in RETRYABLE_DATABASE_ERRORS or attempt == WRITE_ATTEMPTS or transaction.get_connection().in_atomic_block:
                raise
            time.sleep(random.uniform(0, 0.005 * 2**attempt))


def follow_create(*, actor: User, followee_id: int) -> FollowResult:
    """Make ``actor`` follow the account ``followee_id``; a repeat is a no-op success.

    :param actor: the signed-in user.
    :param followee_id: the followee's id, parsed (``core.parsing.parse_id``).
    :returns: ``FollowResult(changed=True)`` when a row was created.
    :raises SelfFollowError: ``actor`` is the target (400).
    :raises TargetNotFoundError: unknown or deactivated target (404).
    :raises ActorInactiveError: ``actor`` is deactivated (403).
    :raises FollowingLimitReached: ``actor`` follows as many as it may (422).
    :raises RateLimited: more than ``FOLLOW_RATE`` new follows (429).
    """
    if not actor.is_active:
        raise ActorInactiveError("Your account is deactivated.")
    if followee_id == actor.pk:
        raise SelfFollowError("You cannot follow yourself.")
    if not User.objects.filter(pk=followee_id, is_active=True).exists():
        raise TargetNotFoundError("No such user.")
    if Follow.objects.filter(follower_id=actor.pk, followee_id=followee_id).exists():
        return FollowResult(changed=False, follower_id=actor.pk, followee_id=followee_id)
    counts = follow_counts(user_id=actor.pk)
    allowed = following_limit(followers=counts.followers)
    if counts.following >= allowed:
        raise FollowingLimitReached(f"You follow {counts.following:,} accounts, the most you can ({allowed:,}); unfollow some first.")
    limits.hit("follows", str(actor.pk), "FOLLOW_RATE", message="You followed too many accounts today; try again later.")
    return _retry_on_deadlock(lambda: _follow_insert(follower_id=actor.pk, followee_id=followee_id))


def _check_following_limit(*, follower_id: int) -> None:
    """The cap on followings, counted in the database under a lock on the follower's row.

    Concurrent follows by one account each pass the fast check before the
    transaction (the mirror's counts); taking the follower's row lock here
    serialises them, so the count each sees includes the others' rows.

    :raises FollowingLimitReached: the follower is at its cap (422).
    """
    User.objects.select_for_update().filter(pk=follower_id).values_list("pk", flat=True).first()
    following = Follow.objects.filter(follower_id=follower_id, followee__is_active=True).count()
    if following < int(settings.FOLLOWING_MAX):
        return  # below the floor of the cap: the followers count cannot matter
    followers = Follow.objects.filter(followee_id=follower_id, follower__is_active=True).count()
    allowed = following_limit(followers=followers)
    if following >= allowed:
        raise FollowingLimitReached(f"You follow {following:,} accounts, the most you can ({allowed:,}); unfollow some first.")


def _follow_insert(*, follower_id: int, followee_id: int) -> FollowResult:
    with transaction.atomic():
        _check_following_limit(follower_id=follower_id)
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
            raise TargetNotFoundError("No such user.")
        outbox.record(social_outbox.PAIR, subject_id=follower_id, object_id=followee_id)
        follow_created.send(sender=Follow, follower_id=follower_id, followee_id=followee_id)
    return FollowResult(changed=True, follower_id=follower_id, followee_id=followee_id)


def follow_delete(*, actor: User, followee_id: int) -> FollowResult:
    """Make ``actor`` stop following ``followee_id``; not following is a no-op success.

    Works when the target is deactivated (the edge is cleaned up).

    :returns: ``FollowResult(changed=True)`` when a row was deleted.
    :raises SelfFollowError: ``actor`` is the target (400).
    :raises TargetNotFoundError: no account with that id (404).
    """
    if followee_id == actor.pk:
        raise SelfFollowError("You cannot unfollow yourself.")
    if not User.objects.filter(pk=followee_id).exists():
        raise TargetNotFoundError("No such user.")
    return follow_delete_pair(follower_id=actor.pk, followee_id=followee_id)


def follow_delete_pair(*, follower_id: int, followee_id: int) -> FollowResult:
    """Delete the edge ``follower_id -> followee_id`` if present (admin and bulk paths too).

    :returns: ``FollowResult(changed=...)``; the mirror and the feed follow after commit.
    """
    return _retry_on_deadlock(lambda: _follow_remove(follower_id=follower_id, followee_id=followee_id))


def _follow_remove(*, follower_id: int, followee_id: int) -> FollowResult:
    with transaction.atomic():
        deleted, _ = Follow.objects.filter(follower_id=follower_id, followee_id=followee_id).delete()
        if not deleted:
            return FollowResult(changed=False, follower_id=follower_id, followee_id=followee_id)
        outbox.record(social_outbox.PAIR, subject_id=follower_id, object_id=followee_id)
        follow_deleted.send(sender=Follow, follower_id=follower_id, followee_id=followee_id)
    return FollowResult(changed=True, follower_id=follower_id, followee_id=followee_id)


# Accounts with at most this many edges (both directions) are re-mirrored
# right after commit, in the request, like a follow: their counts, lists and
# common follows change at once. Bigger ones go to Celery (a request must
# not write 200k pairs).
USER_REFRESH_INLINE_EDGES = 2000


def user_mirror_refresh(*, user_id: int) -> None:
    """Record that every edge of ``user_id`` must be re-mirrored (activation change, deletion).

    Call inside the transaction that changed the user, before a deletion
    cascades its follows (the edges are counted here). After commit a small
    account is applied at once; a big one by the Celery task. The entry
    stays pending until applied, so the drain repairs it if both fail.
    """
    edges = (
        Follow.objects.filter(follower_id=user_id).values("pk")[: USER_REFRESH_INLINE_EDGES + 1].count()
        + Follow.objects.filter(followee_id=user_id).values("pk")[: USER_REFRESH_INLINE_EDGES + 1].count()
    )
    outbox.record(social_outbox.USER, subject_id=user_id, inline=edges <= USER_REFRESH_INLINE_EDGES)

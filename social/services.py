"""Every write of the follow graph.

Each action writes the database and a ``social.pair`` outbox entry in one transaction, and
signals ``follow_created``/``follow_deleted`` so other apps record theirs in it too; after
commit the mirror is written from the database's truth. Redis down never fails a follow.
Design: docs/architecture.md#the-outbox-and-its-kinds (A follow's write path).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.db.models.constants import OnConflict

from core import limits, outbox
from core.errors import DomainError, Forbidden, InvalidInput, NotFound
from core.transactions import retry_on_deadlock
from users.models import User

from . import outbox as social_outbox
from .models import Block, Follow, FollowRequest, follow_score, now_whole_millisecond, now_whole_second
from .signals import follow_created, follow_deleted, follow_request_ended, follow_requested


class FollowError(DomainError):
    """A follow or unfollow that cannot be done (its ``status`` is the HTTP status to answer)."""


class SelfFollowError(FollowError, InvalidInput):
    """The actor named itself as the target (HTTP 400)."""


class TargetNotFoundError(FollowError, NotFound):
    """No account with that id, or it is deactivated (HTTP 404)."""


class ActorInactiveError(FollowError, Forbidden):
    """A deactivated account cannot change its follows (HTTP 403)."""


class FollowBlockedError(FollowError, Forbidden):
    """A block between the two accounts, in either direction, forbids the follow (HTTP 403)."""


class FollowingLimitReached(FollowError):
    """The actor follows as many accounts as it may (HTTP 422)."""

    status = 422


def following_limit(*, followers: int) -> int:
    """How many accounts an account with ``followers`` may follow:
    ``max(FOLLOWING_MAX, FOLLOWING_RATIO x followers)`` (Mastodon's rule)."""
    return max(int(settings.FOLLOWING_MAX), int(followers * float(settings.FOLLOWING_RATIO)))


@dataclass(frozen=True)
class FollowResult:
    """Outcome of a follow/unfollow: ``changed`` is False for an idempotent repeat;
    ``requested``: the followee approves its followers, so the change is to a follow
    request (made, or withdrawn), not to a follow."""

    changed: bool
    follower_id: int
    followee_id: int
    requested: bool = False


def follow_create(*, actor: User, followee_id: int) -> FollowResult:
    """Make ``actor`` follow the account ``followee_id``; a repeat is a no-op success.

    A followee that approves its followers gets a ``FollowRequest`` instead (``requested=True``).

    :param actor: the signed-in user.
    :param followee_id: the followee's id, parsed (``core.parsing.parse_id``).
    :returns: ``FollowResult(changed=True)`` when a row was created.
    :raises SelfFollowError: ``actor`` is the target (400).
    :raises TargetNotFoundError: unknown or deactivated target (404).
    :raises ActorInactiveError: ``actor`` is deactivated (403).
    :raises FollowBlockedError: a block between the two accounts (403).
    :raises FollowingLimitReached: ``actor`` follows as many as it may (422).
    :raises RateLimited: more than ``FOLLOW_RATE`` new follows (429).
    """
    if not actor.is_active:
        raise ActorInactiveError("Your account is deactivated.")
    if followee_id == actor.pk:
        raise SelfFollowError("You cannot follow yourself.")
    return retry_on_deadlock(lambda: _follow_insert(follower_id=actor.pk, followee_id=followee_id))


def follow_create_approved(*, follower_id: int, followee_id: int) -> FollowResult:
    """``follow_create`` for an approved request, without approval and rate limit, inside the
    caller's transaction (which holds the followee's row lock).

    :raises: as ``follow_create``.
    """
    return _follow_insert(follower_id=follower_id, followee_id=followee_id, approved=True)


@dataclass(frozen=True)
class _FollowCheck:
    """What a follow's locked read saw: follower row exists and is active, followee active, pair
    exists, active followings (counted up to ``FOLLOWING_MAX``), ``followee_private``, a block either way.
    """

    follower_active: bool
    followee_active: bool
    follows: bool
    following: int
    followee_private: bool = False
    blocked_by_follower: bool = False
    blocked_by_followee: bool = False


def _locked_follow_check(*, follower_id: int, followee_id: int) -> _FollowCheck:
    """Lock the follower's row (serialising its follows), then read everything a follow decides on: two queries."""
    users, follows, blocks = User._meta.db_table, Follow._meta.db_table, Block._meta.db_table
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT is_active FROM {users} WHERE id = %s{lock}", [follower_id])
        locked = cursor.fetchone()
        if locked is None:
            return _FollowCheck(follower_active=False, followee_active=False, follows=False, following=0)
        # A statement of its own after the lock: a statement reads the data as of its start, so
        # counting inside the locking one would miss the follows it waited for.
        cursor.execute(
            f"SELECT (SELECT t.is_active FROM {users} t WHERE t.id = %s),"
            f" EXISTS (SELECT 1 FROM {follows} f WHERE f.follower_id = %s AND f.followee_id = %s),"
            f" (SELECT COUNT(*) FROM (SELECT 1 FROM {follows} f JOIN {users} e ON e.id = f.followee_id"
            f"  WHERE f.follower_id = %s AND e.is_active LIMIT %s) capped),"
            f" (SELECT t.approve_followers FROM {users} t WHERE t.id = %s),"
            f" EXISTS (SELECT 1 FROM {blocks} b WHERE b.blocker_id = %s AND b.blocked_id = %s),"
            f" EXISTS (SELECT 1 FROM {blocks} b WHERE b.blocker_id = %s AND b.blocked_id = %s)",
            [
                followee_id,
                follower_id,
                followee_id,
                follower_id,
                int(settings.FOLLOWING_MAX),
                followee_id,
                follower_id,
                followee_id,
                followee_id,
                follower_id,
            ],
        )
        row = cursor.fetchone()
    return _FollowCheck(
        follower_active=bool(locked[0]),
        followee_active=bool(row[0]),
        follows=bool(row[1]),
        following=int(row[2]),
        followee_private=bool(row[3]),
        blocked_by_follower=bool(row[4]),
        blocked_by_followee=bool(row[5]),
    )


def _check_following_limit(*, follower_id: int, following: int) -> None:
    """The cap on followings for an account at or above its floor (``FOLLOWING_MAX``), counted
    exactly in the database (the caller holds the follower's row lock).

    :raises FollowingLimitReached: the follower is at its cap (422).
    """
    if following < int(settings.FOLLOWING_MAX):
        return  # below the floor of the cap: the followers count cannot matter
    following = Follow.objects.filter(follower_id=follower_id, followee__is_active=True).count()
    followers = Follow.objects.filter(followee_id=follower_id, follower__is_active=True).count()
    allowed = following_limit(followers=followers)
    if following >= allowed:
        raise FollowingLimitReached(f"You follow {following:,} accounts, the most you can ({allowed:,}); unfollow some first.")


def _insert_follow(*, follower_id: int, followee_id: int, created_at: datetime) -> bool:
    """``INSERT IGNORE`` the edge: a row that exists already (a concurrent duplicate follow) or a
    followee row that is gone leaves nothing inserted instead of an error.

    :returns: whether a row was inserted.
    """
    table = Follow._meta.db_table
    insert = connection.ops.insert_statement(on_conflict=OnConflict.IGNORE)
    value = connection.ops.adapt_datetimefield_value(created_at)
    with connection.cursor() as cursor:
        cursor.execute(
            f"{insert} {table} (follower_id, followee_id, created_at) VALUES (%s, %s, %s)", [follower_id, followee_id, value]
        )
        return bool(cursor.rowcount == 1)


def _follow_insert(*, follower_id: int, followee_id: int, approved: bool = False) -> FollowResult:
    unchanged = FollowResult(changed=False, follower_id=follower_id, followee_id=followee_id)
    with transaction.atomic(), outbox.batched():
        check = _locked_follow_check(follower_id=follower_id, followee_id=followee_id)
        if not check.follower_active:
            raise ActorInactiveError("Your account is deactivated.")
        if check.follows:
            return unchanged
        if not check.followee_active:
            raise TargetNotFoundError("No such user.")
        if check.blocked_by_follower:
            raise FollowBlockedError("You block this account; unblock it before following it.")
        if check.blocked_by_followee:
            raise FollowBlockedError("You cannot follow this account.")
        _check_following_limit(follower_id=follower_id, following=check.following)
        if not approved:
            limits.hit(
                "follows", str(follower_id), "FOLLOW_RATE", message="You followed too many accounts today; try again later."
            )
        if check.followee_private and not approved and _approves_followers_locked(followee_id):
            return _request_insert(follower_id=follower_id, followee_id=followee_id)
        created_at = now_whole_second()
        if not _insert_follow(follower_id=follower_id, followee_id=followee_id, created_at=created_at):
            # A duplicate follow committed after our read, or the followee's row went.
            if Follow.objects.filter(follower_id=follower_id, followee_id=followee_id).exists():
                return unchanged
            raise TargetNotFoundError("No such user.")
        outbox.record(social_outbox.PAIR, subject_id=follower_id, object_id=followee_id, hint=follow_score(created_at))
        outbox.record(social_outbox.SUGGEST, subject_id=follower_id, object_id=followee_id)
        follow_created.send(sender=Follow, follower_id=follower_id, followee_id=followee_id)
    return FollowResult(changed=True, follower_id=follower_id, followee_id=followee_id)


def _approves_followers_locked(followee_id: int) -> bool:
    """Whether ``followee_id`` approves its followers, read under a shared lock of its row (a
    privacy change in flight is waited for, so no request is made after it approved the pending ones).
    """
    lock = " LOCK IN SHARE MODE" if connection.vendor == "mysql" else ""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT approve_followers FROM {User._meta.db_table} WHERE id = %s{lock}", [followee_id])
        row = cursor.fetchone()
    return bool(row and row[0])


def _request_insert(*, follower_id: int, followee_id: int) -> FollowResult:
    """``INSERT IGNORE`` the follow request (a repeat, or a concurrent one, inserts nothing)."""
    table = FollowRequest._meta.db_table
    insert = connection.ops.insert_statement(on_conflict=OnConflict.IGNORE)
    value = connection.ops.adapt_datetimefield_value(now_whole_millisecond())
    with connection.cursor() as cursor:
        cursor.execute(
            f"{insert} {table} (requester_id, target_id, created_at) VALUES (%s, %s, %s)", [follower_id, followee_id, value]
        )
        made = cursor.rowcount == 1
    if made:
        # The requester's "who to follow" is re-derived without the account asked.
        outbox.record(social_outbox.SUGGEST, subject_id=follower_id, object_id=followee_id)
        follow_requested.send(sender=FollowRequest, requester_id=follower_id, target_id=followee_id)
    return FollowResult(changed=made, follower_id=follower_id, followee_id=followee_id, requested=True)


def follow_delete(*, actor: User, followee_id: int) -> FollowResult:
    """Make ``actor`` stop following ``followee_id`` (also when deactivated), or withdraw its pending request.

    :returns: ``FollowResult(changed=True)`` when a row was deleted (``requested=True``: a request).
    :raises SelfFollowError: ``actor`` is the target (400).
    :raises TargetNotFoundError: no account with that id (404).
    """
    if followee_id == actor.pk:
        raise SelfFollowError("You cannot unfollow yourself.")
    result = follow_delete_pair(follower_id=actor.pk, followee_id=followee_id)
    if not result.changed and _request_delete(requester_id=actor.pk, target_id=followee_id):
        return FollowResult(changed=True, follower_id=actor.pk, followee_id=followee_id, requested=True)
    # Only a delete that found nothing asks whether the account exists at all.
    if not result.changed and not User.objects.filter(pk=followee_id).exists():
        raise TargetNotFoundError("No such user.")
    return result


def _request_delete(*, requester_id: int, target_id: int) -> bool:
    """Withdraw ``requester_id``'s request to ``target_id``; the requester's "who to follow"
    may name the account again (re-derived after commit).

    :returns: whether a request was deleted.
    """
    with transaction.atomic():
        deleted = bool(FollowRequest.objects.filter(requester_id=requester_id, target_id=target_id).delete()[0])
        if deleted:
            outbox.record(social_outbox.SUGGEST, subject_id=requester_id, object_id=target_id)
            follow_request_ended.send(sender=FollowRequest, requester_id=requester_id, target_id=target_id)
    return deleted


def follow_delete_pair(*, follower_id: int, followee_id: int) -> FollowResult:
    """Delete the edge ``follower_id -> followee_id`` if present (admin and bulk paths too).

    :returns: ``FollowResult(changed=...)``; the mirror and the feed follow after commit.
    """
    return retry_on_deadlock(lambda: _follow_remove(follower_id=follower_id, followee_id=followee_id))


def _follow_remove(*, follower_id: int, followee_id: int) -> FollowResult:
    with transaction.atomic(), outbox.batched():
        with connection.cursor() as cursor:
            # One statement: Follow has no signals and nothing cascades from it.
            cursor.execute(
                f"DELETE FROM {Follow._meta.db_table} WHERE follower_id = %s AND followee_id = %s", [follower_id, followee_id]
            )
            deleted = cursor.rowcount
        if not deleted:
            return FollowResult(changed=False, follower_id=follower_id, followee_id=followee_id)
        outbox.record(social_outbox.PAIR, subject_id=follower_id, object_id=followee_id, hint=None)
        outbox.record(social_outbox.SUGGEST, subject_id=follower_id, object_id=followee_id)
        follow_deleted.send(sender=Follow, follower_id=follower_id, followee_id=followee_id)
    return FollowResult(changed=True, follower_id=follower_id, followee_id=followee_id)


# Accounts with at most this many edges (both directions) are re-mirrored
# right after commit, in the request, like a follow: their counts, lists and
# common follows change at once. Bigger ones go to Celery (a request must
# not write 200k pairs).
USER_REFRESH_INLINE_EDGES = 2000


def user_mirror_refresh(*, user_id: int) -> None:
    """Record that every edge of ``user_id`` must be re-mirrored (activation change, deletion).

    Call inside the transaction that changed the user, before a deletion cascades its follows.
    """
    edges = (
        Follow.objects.filter(follower_id=user_id).values("pk")[: USER_REFRESH_INLINE_EDGES + 1].count()
        + Follow.objects.filter(followee_id=user_id).values("pk")[: USER_REFRESH_INLINE_EDGES + 1].count()
    )
    outbox.record(social_outbox.USER, subject_id=user_id, inline=edges <= USER_REFRESH_INLINE_EDGES)

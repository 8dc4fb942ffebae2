"""Every write of the controls people have over who reaches them: block, mute, remove a
follower, and the follow requests of private accounts.

Each action is one transaction locking both accounts' rows (in id order) that writes the
database and a ``social.control`` outbox entry; follows a block ends go through the unfollow
path (``social.services``). Behaviour: docs/behaviours.md#blocks-mutes-removing-a-follower-private-accounts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from core import outbox
from core.errors import DomainError, InvalidInput, NotFound
from core.models import OutboxEntry
from core.transactions import retry_on_deadlock
from users.models import User

from . import outbox as social_outbox
from .models import Block, FollowRequest, Mute, live_mutes
from .services import ActorInactiveError, FollowingLimitReached, FollowResult, _follow_remove, follow_create_approved
from .signals import block_created, follow_request_approved, follow_request_ended, mute_changed


class ControlError(DomainError):
    """A block, mute or request action that cannot be done (``status``: the HTTP status)."""


class SelfControlError(ControlError, InvalidInput):
    """The actor named itself (HTTP 400)."""


class ControlTargetNotFoundError(ControlError, NotFound):
    """No active account with that id (HTTP 404)."""


class ControlConflictError(ControlError):
    """The action is done already, or there is nothing to undo (HTTP 409)."""

    status = 409


class FollowRequestNotFoundError(ControlError, NotFound):
    """No pending request from that account to the actor (HTTP 404)."""


@dataclass(frozen=True)
class ControlResult:
    """Outcome of a control: ``changed`` rows, and the follows it ended (``unfollowed``, pairs)."""

    changed: bool
    unfollowed: tuple[tuple[int, int], ...] = ()


def _lock_pair(actor_id: int, other_id: int, *, other_active: bool = True) -> User:
    """Lock both accounts' rows in id order (controls and follows of a pair serialise on them) and return the other account.

    :raises ControlTargetNotFoundError: no such account (or it is deactivated and ``other_active``).
    """
    locked = {
        user.pk: user for user in User.objects.select_for_update().filter(pk__in=sorted({actor_id, other_id})).order_by("pk")
    }
    other = locked.get(other_id)
    if other is None or (other_active and not other.is_active):
        raise ControlTargetNotFoundError("No such user.")
    return other


def _check_other(actor: User, other_id: int, verb: str) -> None:
    if other_id == actor.pk:
        raise SelfControlError(f"You cannot {verb} yourself.")


def _record(actor_id: int, other_id: int) -> None:
    outbox.record(social_outbox.CONTROL, subject_id=actor_id, object_id=other_id)
    social_outbox.suggestions_record(actor_id, other_id)


def controls_mirror_refresh(*, user_id: int) -> int:
    """Record a ``social.control`` entry for every pair of ``user_id`` with a block or mute either way.

    Call in the transaction deleting the account, before the cascade removes the rows (they
    name the other accounts whose sets hold ``user_id``).

    :returns: how many entries were recorded.
    """
    others: set[int] = set()
    others.update(Block.objects.filter(blocker_id=user_id).values_list("blocked_id", flat=True))
    others.update(Block.objects.filter(blocked_id=user_id).values_list("blocker_id", flat=True))
    others.update(Mute.objects.filter(muter_id=user_id).values_list("muted_id", flat=True))
    others.update(Mute.objects.filter(muted_id=user_id).values_list("muter_id", flat=True))
    return outbox.record_many(social_outbox.CONTROL, [(user_id, other) for other in sorted(others)])


def block_create(*, actor: User, target_id: int) -> ControlResult:
    """``actor`` blocks ``target_id``: follows either way end (unfollow path), pending requests either way go.

    :returns: ``ControlResult(changed=True, unfollowed=...)``.
    :raises SelfControlError: ``actor`` is the target (400).
    :raises ControlTargetNotFoundError: unknown or deactivated target (404).
    :raises ControlConflictError: ``actor`` blocks the target already (409).
    """
    _check_other(actor, target_id, "block")

    def write() -> ControlResult:
        with transaction.atomic(), outbox.batched():
            target = _lock_pair(actor.pk, target_id)
            try:
                with transaction.atomic():
                    Block.objects.create(blocker_id=actor.pk, blocked_id=target_id)
            except IntegrityError:
                raise ControlConflictError(f"You block {target.username} already.") from None
            ended = []
            for follower_id, followee_id in ((actor.pk, target_id), (target_id, actor.pk)):
                if _follow_remove(follower_id=follower_id, followee_id=followee_id).changed:
                    ended.append((follower_id, followee_id))
            FollowRequest.objects.filter(
                Q(requester_id=actor.pk, target_id=target_id) | Q(requester_id=target_id, target_id=actor.pk)
            ).delete()
            _record(actor.pk, target_id)
            block_created.send(sender=Block, blocker_id=actor.pk, blocked_id=target_id)
        return ControlResult(changed=True, unfollowed=tuple(ended))

    return retry_on_deadlock(write)


def block_delete(*, actor: User, target_id: int) -> ControlResult:
    """``actor`` unblocks ``target_id`` (also when deactivated); no follow comes back by itself.

    :raises SelfControlError: ``actor`` is the target (400).
    :raises ControlTargetNotFoundError: no such account (404).
    :raises ControlConflictError: ``actor`` does not block the target (409).
    """
    _check_other(actor, target_id, "unblock")

    def write() -> ControlResult:
        with transaction.atomic(), outbox.batched():
            target = _lock_pair(actor.pk, target_id, other_active=False)
            if not Block.objects.filter(blocker_id=actor.pk, blocked_id=target_id).delete()[0]:
                raise ControlConflictError(f"You do not block {target.username}.")
            _record(actor.pk, target_id)
        return ControlResult(changed=True)

    return retry_on_deadlock(write)


def mute_create(*, actor: User, target_id: int, duration: timedelta | None = None) -> ControlResult:
    """``actor`` mutes ``target_id`` for ``duration`` (None: until unmuted; again: the new duration).

    :returns: ``ControlResult(changed=True)``.
    :raises SelfControlError: ``actor`` is the target (400).
    :raises ControlTargetNotFoundError: unknown or deactivated target (404).
    :raises InvalidInput: a duration that is not positive (400).
    """
    _check_other(actor, target_id, "mute")
    if duration is not None and duration <= timedelta(0):
        raise InvalidInput("A mute lasts a positive time.")

    def write() -> ControlResult:
        with transaction.atomic(), outbox.batched():
            _lock_pair(actor.pk, target_id)
            expires_at = timezone.now() + duration if duration is not None else None
            Mute.objects.update_or_create(
                muter_id=actor.pk, muted_id=target_id, defaults={"expires_at": expires_at, "created_at": timezone.now()}
            )
            _record(actor.pk, target_id)
            mute_changed.send(sender=Mute, muter_id=actor.pk, muted_id=target_id)
        return ControlResult(changed=True)

    return retry_on_deadlock(write)


def mute_delete(*, actor: User, target_id: int) -> ControlResult:
    """``actor`` unmutes ``target_id`` (an expired mute counts as none).

    :raises SelfControlError: ``actor`` is the target (400).
    :raises ControlTargetNotFoundError: no such account (404).
    :raises ControlConflictError: ``actor`` does not mute the target (409).
    """
    _check_other(actor, target_id, "unmute")

    def write() -> ControlResult:
        with transaction.atomic(), outbox.batched():
            target = _lock_pair(actor.pk, target_id, other_active=False)
            found = Mute.objects.filter(live_mutes(), muter_id=actor.pk, muted_id=target_id).exists()
            Mute.objects.filter(muter_id=actor.pk, muted_id=target_id).delete()
            if not found:
                raise ControlConflictError(f"You do not mute {target.username}.")
            _record(actor.pk, target_id)
            mute_changed.send(sender=Mute, muter_id=actor.pk, muted_id=target_id)
        return ControlResult(changed=True)

    return retry_on_deadlock(write)


def mutes_expire(*, batch: int = 1000) -> int:
    """Delete expired mutes and make Redis agree (the nightly task; reads ignore them anyway).

    :returns: how many mutes were deleted.
    """
    removed = 0
    while True:
        rows = list(Mute.objects.filter(expires_at__lte=timezone.now()).values_list("pk", "muter_id", "muted_id")[:batch])
        if not rows:
            return removed
        with transaction.atomic(), outbox.batched():
            removed += Mute.objects.filter(pk__in=[pk for pk, _, _ in rows], expires_at__lte=timezone.now()).delete()[0]
            for _, muter_id, muted_id in rows:
                _record(muter_id, muted_id)
                mute_changed.send(sender=Mute, muter_id=muter_id, muted_id=muted_id)


def follower_remove(*, actor: User, follower_id: int) -> FollowResult:
    """``actor`` makes ``follower_id`` stop following it (a soft block: it may follow again).

    :raises SelfControlError: ``actor`` named itself (400).
    :raises ControlTargetNotFoundError: no such account, or it blocks ``actor`` (404).
    :raises ControlConflictError: that account does not follow ``actor`` (409).
    """
    _check_other(actor, follower_id, "remove")

    def write() -> FollowResult:
        with transaction.atomic(), outbox.batched():
            follower = _lock_pair(actor.pk, follower_id, other_active=False)
            if Block.objects.filter(blocker_id=follower_id, blocked_id=actor.pk).exists():
                # It blocks the actor: as if absent (its name is not told either).
                raise ControlTargetNotFoundError("No such user.")
            result = _follow_remove(follower_id=follower_id, followee_id=actor.pk)
            if not result.changed:
                raise ControlConflictError(f"{follower.username} does not follow you.")
        return result

    return retry_on_deadlock(write)


def follow_request_approve(*, actor: User, requester_id: int) -> FollowResult:
    """``actor`` approves ``requester_id``'s request: the request goes and the follow is created the normal way.

    :raises FollowRequestNotFoundError: no pending request from that account to ``actor`` (404).
    :raises ControlConflictError: the requester was deactivated or is at its following cap
        (409; the request stays).
    """

    def write() -> FollowResult:
        with transaction.atomic(), outbox.batched():
            requester = _lock_pair(actor.pk, requester_id, other_active=False)
            if not FollowRequest.objects.filter(requester_id=requester_id, target_id=actor.pk).delete()[0]:
                raise FollowRequestNotFoundError("No such follow request.")
            follow_request_ended.send(sender=FollowRequest, requester_id=requester_id, target_id=actor.pk)
            # The follow path words its refusals for the follower; the owner gets them about the requester.
            try:
                result = follow_create_approved(follower_id=requester_id, followee_id=actor.pk)
            except ActorInactiveError:
                raise ControlConflictError(f"@{requester.username}'s account is deactivated; it cannot follow you now.") from None
            except FollowingLimitReached:
                raise ControlConflictError(
                    f"@{requester.username} follows as many accounts as it may; it cannot follow you now."
                ) from None
            if result.changed:
                follow_request_approved.send(sender=FollowRequest, requester_id=requester_id, target_id=actor.pk)
            return result

    return retry_on_deadlock(write)


def follow_request_reject(*, actor: User, requester_id: int) -> bool:
    """``actor`` rejects ``requester_id``'s request (it may ask again).

    :raises FollowRequestNotFoundError: no pending request from that account to ``actor`` (404).
    """
    with transaction.atomic():
        if not FollowRequest.objects.filter(requester_id=requester_id, target_id=actor.pk).delete()[0]:
            raise FollowRequestNotFoundError("No such follow request.")
        follow_request_ended.send(sender=FollowRequest, requester_id=requester_id, target_id=actor.pk)
        outbox.record(social_outbox.SUGGEST, subject_id=requester_id, object_id=actor.pk)
    return True


def account_privacy_set(*, actor: User, private: bool) -> int:
    """Turn ``actor``'s "approve followers" on or off; turning it off approves every pending request.

    The flag and a ``social.privacy_open`` entry commit together under the owner's row lock;
    the entry approves the requests after commit (the drain finishes an interrupted run).

    :returns: how many requests of active accounts were pending at the change.
    """

    def write() -> int:
        with transaction.atomic():
            User.objects.select_for_update().filter(pk=actor.pk).update(approve_followers=private)
            requests = FollowRequest.objects.filter(target_id=actor.pk)
            pending = 0 if private else requests.filter(requester__is_active=True).count()
            if not private and (pending or requests.exists()):
                outbox.record(PRIVACY_OPEN, subject_id=actor.pk)
        return pending

    pending = retry_on_deadlock(write)
    actor.approve_followers = private
    return pending


def follow_requests_approve_all(*, owner_id: int, batch: int = 500) -> int:
    """Approve every pending request to ``owner_id`` while it is public, oldest first; requesters
    who cannot follow now go. Re-runnable.

    :returns: how many were approved.
    """
    approved = 0
    while True:
        owner = User.objects.filter(pk=owner_id, approve_followers=False).first()
        if owner is None:
            return approved  # gone, or private again
        pending: Sequence[int] = list(
            FollowRequest.objects.filter(target_id=owner_id)
            .order_by("created_at", "pk")
            .values_list("requester_id", flat=True)[:batch]
        )
        if not pending:
            return approved
        for requester_id in pending:
            try:
                approved += follow_request_approve(actor=owner, requester_id=requester_id).changed
            except FollowRequestNotFoundError:
                pass  # withdrawn, or approved by the owner meanwhile
            except DomainError:
                with transaction.atomic():
                    if FollowRequest.objects.filter(requester_id=requester_id, target_id=owner_id).delete()[0]:
                        follow_request_ended.send(sender=FollowRequest, requester_id=requester_id, target_id=owner_id)


def _apply_privacy_open(entries: Sequence[OutboxEntry]) -> None:
    for entry in entries:
        follow_requests_approve_all(owner_id=entry.subject_id)


# Applied in the request that turned "approve followers" off, right after commit;
# the drain finishes what an interrupted request left.
PRIVACY_OPEN = outbox.register("social.privacy_open", apply=_apply_privacy_open, inline=True, stage=2)

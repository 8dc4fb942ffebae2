"""Reads of blocks, mutes and private accounts: who sees whom, and whose notes a reader skips.

Redis answers (``social.redis_keys.blocks_key`` / ``mutes_key``, written
by ``social.control_mirror``); the database answers while Redis cannot
(``core.redis.redis_or_database``), with the same result.

Pinned rules:

- A block hides both accounts from each other: signed in, each gets a 404
  for the other's profile, notes and lists, and neither appears in any list,
  count-independent sample ("you both follow", "followed by people you
  follow", mutuals) the other sees.
- A private account (``User.approve_followers``) shows its profile (name,
  counts, lock) to everyone, but its notes and its followers/following
  lists only to itself and to its followers (approved requests).
- A mute only keeps the muted account's notes out of the muter's home feed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import redis
from django.db.models import Q
from django.utils import timezone

from core.errors import Forbidden, NotFound
from core.redis import redis_or_database
from users.models import User

from . import redis_keys
from .models import Block, Mute, live_mutes
from .selectors import is_following


def hidden_ids(*, viewer_id: int) -> set[int]:
    """The accounts hidden from ``viewer_id`` by a block either way (SMEMBERS: O(blocks))."""
    return redis_or_database(
        lambda client: {int(member) for member in client.smembers(redis_keys.blocks_key(viewer_id))},
        lambda: {
            other
            for blocker, blocked in Block.objects.filter(Q(blocker_id=viewer_id) | Q(blocked_id=viewer_id)).values_list("blocker_id", "blocked_id")
            for other in (blocker, blocked)
            if other != viewer_id
        },
        keys=[redis_keys.blocks_key(viewer_id)],
    )


def now_ms() -> int:
    """The current time in unix ms (the scale of mute scores)."""
    return int(timezone.now().timestamp() * 1000)


def muted_ids_from(client: redis.Redis, *, user_id: int) -> set[int]:
    """The accounts ``user_id`` mutes now, read from ``client`` (ZRANGEBYSCORE above now).

    :raises: ``REDIS_ERRORS``.
    """
    reply = client.zrangebyscore(redis_keys.mutes_key(user_id), f"({now_ms()}", "+inf")
    return {int(member) for member in reply if isinstance(member, (bytes, str))}


def muted_ids_database(*, user_id: int) -> set[int]:
    """The accounts ``user_id`` mutes now, from the database."""
    live = live_mutes()
    return set(Mute.objects.filter(live, muter_id=user_id).values_list("muted_id", flat=True))


def muted_ids(*, user_id: int) -> set[int]:
    """The accounts ``user_id`` mutes now (expired mutes count as none)."""
    return redis_or_database(
        lambda client: muted_ids_from(client, user_id=user_id),
        lambda: muted_ids_database(user_id=user_id),
        keys=[redis_keys.mutes_key(user_id)],
    )


@dataclass(frozen=True)
class Access:
    """What ``viewer`` may see of an account: ``hidden`` (the account blocks the viewer: answer
    404, as if absent), ``blocking`` (the viewer blocks it: its profile shows, with "Unblock",
    nothing else), ``private`` (it approves its followers), ``content`` (its notes and lists)."""

    hidden: bool
    blocking: bool
    private: bool
    content: bool


def access(*, viewer: User | None, user: User) -> Access:
    """What ``viewer`` (None: signed out) may see of ``user`` (see the module's rules): one
    indexed query for the blocks between them, and one SISMEMBER for a private account."""
    private = bool(user.approve_followers)
    if viewer is not None and viewer.pk == user.pk:
        return Access(hidden=False, blocking=False, private=private, content=True)
    blockers: set[int] = set()
    if viewer is not None:
        pair = Q(blocker_id=viewer.pk, blocked_id=user.pk) | Q(blocker_id=user.pk, blocked_id=viewer.pk)
        blockers = set(Block.objects.filter(pair).values_list("blocker_id", flat=True))
    if blockers:
        return Access(hidden=user.pk in blockers, blocking=viewer is not None and viewer.pk in blockers, private=private, content=False)
    content = not private or (viewer is not None and is_following(follower_id=viewer.pk, followee_id=user.pk))
    return Access(hidden=False, blocking=False, private=private, content=content)


def require_shown(*, viewer: User | None, user: User) -> None:
    """Nothing, unless ``user`` blocks ``viewer`` (None: signed out).

    :raises NotFound: it does (404, as if absent: not even a redirect to the name's spelling).
    """
    if viewer is not None and viewer.pk != user.pk and Block.objects.filter(blocker_id=user.pk, blocked_id=viewer.pk).exists():
        raise NotFound("No such account.")


def require_content(*, viewer: User | None, user: User) -> Access:
    """``access`` for a page or endpoint that shows ``user``'s notes or lists.

    :raises NotFound: ``user`` blocks ``viewer`` (404, as if absent).
    :raises Forbidden: ``user`` is private and ``viewer`` is not its follower, or
        ``viewer`` blocks ``user`` (403).
    """
    seen = access(viewer=viewer, user=user)
    if seen.hidden:
        raise NotFound("No such account.")
    if seen.blocking:
        raise Forbidden(f"You block @{user.username}; unblock them to see their notes and lists.")
    if not seen.content:
        raise Forbidden(f"@{user.username}'s account is private: only the accounts it approved see its notes and lists.")
    return seen


Shown = TypeVar("Shown")


def without_hidden(items: Sequence[Shown], *, viewer_id: int | None, user_id_of: Iterable[int]) -> list[Shown]:
    """``items`` without those whose account (``user_id_of``, aligned with ``items``) is hidden
    from ``viewer_id`` (None: signed out, nothing is hidden)."""
    ids = list(user_id_of)
    if viewer_id is None:
        return list(items)
    hidden = hidden_ids(viewer_id=viewer_id)
    if not hidden:
        return list(items)
    return [item for item, user_id in zip(items, ids) if user_id not in hidden]

"""Reads of blocks, mutes and private accounts: who sees whom, and whose notes a reader skips.

Redis answers the list filters (or the database while it cannot); whether a reader may see an
account is decided against the database on the primary (``access``, ``account_and_access``,
``hidden_authors``), so a committed change is in force on the next request. Rules: docs/behaviours.md#blocks-mutes-removing-a-follower-private-accounts
and #visibility-at-read-time.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import redis
from django.db import connection, connections, router
from django.db.models import Q
from django.utils import timezone

from core.cluster import pipeline
from core.errors import Forbidden, NotFound
from core.redis import redis_or_database
from core.sql import id_list
from users.models import User
from users.selectors import accounts_from_sql, user_columns, username_condition

from . import redis_keys
from .models import Block, Follow, Mute, live_mutes


def hidden_ids(*, viewer_id: int) -> set[int]:
    """The accounts hidden from ``viewer_id`` by a block either way (SMEMBERS: O(blocks))."""
    return redis_or_database(
        lambda client: {int(member) for member in client.smembers(redis_keys.blocks_key(viewer_id))},
        lambda: hidden_ids_database(viewer_id=viewer_id),
        keys=[redis_keys.blocks_key(viewer_id)],
    )


def hidden_ids_database(*, viewer_id: int) -> set[int]:
    """``hidden_ids`` from the database."""
    return {
        other
        for blocker, blocked in Block.objects.filter(Q(blocker_id=viewer_id) | Q(blocked_id=viewer_id)).values_list(
            "blocker_id", "blocked_id"
        )
        for other in (blocker, blocked)
        if other != viewer_id
    }


def hidden_and_muted_ids(*, viewer_id: int) -> tuple[set[int], set[int]]:
    """``hidden_ids`` and ``muted_ids`` of ``viewer_id`` in one round trip (both keys carry its hash tag)."""

    def from_redis(client: redis.Redis) -> tuple[set[int], set[int]]:
        pipe = pipeline(client)
        pipe.smembers(redis_keys.blocks_key(viewer_id))
        pipe.zrangebyscore(redis_keys.mutes_key(viewer_id), f"({now_ms()}", "+inf")
        blocked, muted = pipe.execute()
        return {int(member) for member in blocked}, {int(member) for member in muted}

    return redis_or_database(
        from_redis,
        lambda: (hidden_ids_database(viewer_id=viewer_id), muted_ids_database(user_id=viewer_id)),
        keys=[redis_keys.blocks_key(viewer_id), redis_keys.mutes_key(viewer_id)],
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
    nothing else), ``private`` (it approves its followers), ``content`` (its notes and lists),
    ``follows`` (the viewer follows it, in the database now; False signed out and for oneself)."""

    hidden: bool
    blocking: bool
    private: bool
    content: bool
    follows: bool = False


@dataclass(frozen=True, slots=True)
class Standing:
    """What the database says of an account for one viewer now: ``private`` (it approves its
    followers), ``follows`` (the viewer follows it), ``hides`` (it blocks the viewer),
    ``blocked`` (the viewer blocks it)."""

    private: bool
    follows: bool
    hides: bool
    blocked: bool


def standing(*, viewer_id: int, user_id: int) -> Standing | None:
    """How ``viewer_id`` stands with account ``user_id`` in the database now (None: no such account).

    One index-only statement on the primary (never a replica or the mirror); raw SQL, since
    building it with the ORM costs more than running it.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT u.approve_followers, {STANDING_FLAGS} FROM {User._meta.db_table} u{_standing_joins()} WHERE u.id = %s",
            [viewer_id, viewer_id, viewer_id, user_id],
        )
        row = cursor.fetchone()
    return None if row is None else Standing(*(bool(value) for value in row))


# What the joins of ``_standing_joins`` found, in the order of ``Standing``'s fields after ``private``.
STANDING_FLAGS = "f.id IS NOT NULL AS standing_follows, h.id IS NOT NULL AS standing_hides, b.id IS NOT NULL AS standing_blocked"


@functools.cache
def _standing_joins() -> str:
    """The joins to the account ``u`` that tell how a viewer (three ``%s``, each its id) stands
    with it: ``f`` its follow of ``u``, ``h`` a block of it by ``u``, ``b`` its block of ``u``."""
    follows, blocks = Follow._meta.db_table, Block._meta.db_table
    # Joins, not EXISTS subqueries: MariaDB runs a dependent subquery at several times the
    # cost of an eq_ref join step. Each unique key matches one row at most.
    return (
        f" LEFT JOIN {follows} f ON f.follower_id = %s AND f.followee_id = u.id"
        f" LEFT JOIN {blocks} h ON h.blocker_id = u.id AND h.blocked_id = %s"
        f" LEFT JOIN {blocks} b ON b.blocker_id = %s AND b.blocked_id = u.id"
    )


def access(*, viewer: User | None, user: User) -> Access:
    """What ``viewer`` (None: signed out) may see of ``user``: signed in, one query (``standing``);
    signed out, none (``user.approve_followers`` as loaded).
    """
    if viewer is not None and viewer.pk == user.pk:
        return Access(hidden=False, blocking=False, private=bool(user.approve_followers), content=True)
    if viewer is None:
        private = bool(user.approve_followers)
        return Access(hidden=False, blocking=False, private=private, content=not private)
    found = standing(viewer_id=viewer.pk, user_id=user.pk)
    if found is None:  # deleted since it was loaded
        return Access(hidden=True, blocking=False, private=bool(user.approve_followers), content=False)
    return _access_of(found)


def _access_of(found: Standing) -> Access:
    if found.hides or found.blocked:
        return Access(hidden=found.hides, blocking=found.blocked, private=found.private, content=False, follows=found.follows)
    return Access(
        hidden=False, blocking=False, private=found.private, content=not found.private or found.follows, follows=found.follows
    )


def account_and_access(
    *, viewer: User | None, username: str | None = None, user_id: int | None = None
) -> tuple[User, Access] | None:
    """The active account called ``username`` (whatever its case: the caller redirects to the
    stored spelling) or else with id ``user_id``, and ``access`` of ``viewer`` (None: signed out)
    to it; None when there is no such account. One query, where ``active_user_named`` and
    ``access`` took two: the account's row with ``standing``'s joins, on the primary for another
    viewer (as ``standing``), where page reads go for none or the account itself.

    :raises NotFound: ``username`` is not a possible username (404).
    """
    own = viewer is not None and (user_id == viewer.pk if username is None else username == viewer.username)
    alias = router.db_for_write(User) if viewer is not None and not own else router.db_for_read(User)
    value: object
    if username is not None:
        condition, value = username_condition(alias, username, column=f"u.{connections[alias].ops.quote_name('username')}")
    else:
        condition, value = "u.id = %s", user_id
    viewer_id = viewer.pk if viewer is not None else None
    found = accounts_from_sql(
        alias,
        # standing's joins (no row joins for no viewer) and their flags after the account's
        # columns; the lowest id first, as active_user_named.
        f"SELECT {user_columns(alias, 'u')}, {STANDING_FLAGS} FROM {User._meta.db_table} u{_standing_joins()}"
        f" WHERE {condition} AND u.is_active = %s ORDER BY u.id LIMIT 1",
        [viewer_id, viewer_id, viewer_id, value, True],
    )
    if not found:
        return None
    user, flags = found[0]
    if viewer is None or viewer.pk == user.pk:
        return user, access(viewer=viewer, user=user)
    return user, _access_of(Standing(bool(user.approve_followers), *(bool(flag) for flag in flags)))


def shown_account(*, viewer: User | None, username: str) -> tuple[User, Access]:
    """``account_and_access`` of a page's account called ``username``.

    :raises NotFound: no such active account, or it blocks ``viewer`` (404, as if absent: not even
        a redirect to the name's spelling).
    """
    found = account_and_access(viewer=viewer, username=username)
    if found is None or found[1].hidden:
        raise NotFound("No such account.")
    return found


def hidden_authors(*, reader_id: int, author_ids: Collection[int]) -> set[int]:
    """The accounts among ``author_ids`` whose notes may not be in ``reader_id``'s home feed now:
    those the reader does not follow in the database (a block, removal, unfollow or deletion
    leaves no follow row; a private account's notes are for followers).

    One index-only range read of ``follow_unique_pair`` on the primary; none for no ids.
    """
    if not author_ids:
        return set()
    ids = sorted(author_ids)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT followee_id FROM {Follow._meta.db_table} WHERE follower_id = %s AND followee_id IN ({id_list(ids)})",
            [reader_id],
        )
        followed = {int(row[0]) for row in cursor.fetchall()}
    return set(ids) - followed


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
    return content_shown(access(viewer=viewer, user=user), user=user)


def content_shown(seen: Access, *, user: User) -> Access:
    """``seen`` (``access`` to ``user``), for a page or endpoint that shows ``user``'s notes or
    lists; raises as ``require_content``."""
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

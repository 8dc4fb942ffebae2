"""Every read of accounts."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from core.errors import NotFound
from core.parsing import id_or_none, username_problem

from .models import Marker, User

DIRECTORY_LIMIT = 50
# Accounts an admin search term may name at once (username prefix matches).
SEARCH_MATCH_LIMIT = 50
# The fields a list row shows; the others load on access.
LIST_FIELDS = ("id", "username", "display_name", "is_active")


def users_search(*, query: str, limit: int = DIRECTORY_LIMIT) -> list[User]:
    """Active accounts whose username starts with ``query`` (case-insensitive), by username.

    :returns: at most ``limit`` users; none for an empty ``query``.
    """
    if not query:
        return []
    return list(User.objects.filter(username__istartswith=query, is_active=True).order_by("username")[:limit])


def sign_in_identity(raw: str) -> str:
    """Whom a sign-in attempt names, for counting its failures: ``"user:<id>"`` for the account the
    backend would check (trimmed, NFKC, ignoring case and accents), else ``"name:<folded name>"``.

    :param raw: the username as posted (any text).
    :returns: a key of at most 160 characters.
    """
    name = unicodedata.normalize("NFKC", raw.strip())[:150]
    if not name:
        return ""
    user_id = User.objects.filter(username=name).values_list("pk", flat=True).first()
    return f"user:{user_id}" if user_id is not None else f"name:{name.casefold()}"


def active_user_named(username: str) -> User:
    """The active account called ``username``, whatever its case (the caller redirects to the stored spelling).

    :raises NotFound: not a possible username (``core.parsing``), no such
        account, or it is deactivated (404).
    """
    if username_problem(username) is not None:
        raise NotFound("No such account.")
    user = User.objects.filter(username__iexact=username, is_active=True).first()
    if user is None:
        raise NotFound("No such account.")
    return user


def users_by_id(ids: Sequence[int]) -> dict[int, User]:
    """Active users with these ids in one query, ``{id: User}``, with ``LIST_FIELDS`` loaded."""
    wanted = sorted({int(i) for i in ids})
    if not wanted:
        return {}
    return {user.pk: user for user in User.objects.filter(pk__in=wanted, is_active=True).only(*LIST_FIELDS)}


def user_ids_matching(term: str, *, limit: int = SEARCH_MATCH_LIMIT) -> list[int]:
    """Ids of accounts an admin search ``term`` names: a numeric id, or a username prefix (the unique
    index; ``'%term%'`` would scan every account).

    :returns: at most ``limit`` ids (a numeric term also matches usernames starting with it).
    """
    term = term.strip()
    if not term:
        return []
    ids: list[int] = []
    term_id = id_or_none(term)
    if term_id is not None:
        ids.append(term_id)
    ids += list(User.objects.filter(username__istartswith=term).order_by("username").values_list("pk", flat=True)[:limit])
    return list(dict.fromkeys(ids))


def markers_of(*, user_id: int, timelines: Sequence[str]) -> dict[str, Marker]:
    """``user_id``'s markers of ``timelines`` that were ever written, by timeline name."""
    return {marker.timeline: marker for marker in Marker.objects.filter(user_id=user_id, timeline__in=list(timelines))}


def marker_position(*, user_id: int, timeline: str) -> int:
    """``user_id``'s ``timeline`` marker's ``last_read_id`` (0 when never written)."""
    return int(Marker.objects.filter(user_id=user_id, timeline=timeline).values_list("last_read_id", flat=True).first() or 0)

"""Every read of accounts."""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field
from django.db.models.sql.compiler import SQLCompiler
from django.db.models.sql.query import Query

from core.errors import NotFound
from core.parsing import id_or_none, username_problem
from core.sql import id_list

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
    alias = router.db_for_read(User)
    condition, value = username_condition(alias, username, column=connections[alias].ops.quote_name("username"))
    # The lowest id first, as ``.first()`` orders.
    found = _raw_users(alias, f"{condition} AND is_active = %s ORDER BY id LIMIT 1", [value, True])
    if not found:
        raise NotFound("No such account.")
    return found[0]


def username_condition(alias: str, username: str, *, column: str) -> tuple[str, str]:
    """``(sql, value)``: the SQL condition (one ``%s``, for ``value``) that ``column`` names
    ``username`` whatever its case, as the ORM's own iexact compares on the database ``alias``
    (MariaDB's LIKE, the value's wildcards escaped).

    :raises NotFound: not a possible username (``core.parsing``; 404).
    """
    if username_problem(username) is not None:
        raise NotFound("No such account.")
    ops = connections[alias].ops
    comparison = connections[alias].operators["iexact"]  # type: ignore[attr-defined]  # every backend's wrapper has it
    return f"{ops.lookup_cast('iexact', 'CharField') % column} {comparison}", ops.prep_for_iexact_query(username)


def user_columns(alias: str, table: str) -> str:
    """Every column of the accounts' table for the database ``alias``, each as ``table.column``:
    the select list of a raw query that joins other tables to the account's row."""
    quote = connections[alias].ops.quote_name
    return ", ".join(f"{table}.{quote(str(field.column))}" for field in _loaded_fields(None))


def account_by_id(user_id: int, *, alias: str | None = None) -> User | None:
    """The account ``user_id`` with every field, active or not (None: no such account), read on the
    database ``alias`` (None: where account reads go); the read a signed-in request makes when it
    has no kept copy (``users.account_rows``)."""
    found = _raw_users(alias or router.db_for_read(User), "id = %s", [user_id])
    return found[0] if found else None


def users_by_id(ids: Sequence[int]) -> dict[int, User]:
    """Active users with these ids in one query, ``{id: User}``, with ``LIST_FIELDS`` loaded."""
    wanted = sorted({int(i) for i in ids})
    if not wanted:
        return {}
    found = _raw_users(router.db_for_read(User), f"id IN ({id_list(wanted)}) AND is_active = %s", [True], LIST_FIELDS)
    return {user.pk: user for user in found}


def _raw_users(alias: str, where: str, params: Sequence[object], fields: tuple[str, ...] | None = None) -> list[User]:
    """The accounts matching the SQL condition ``where`` (``%s`` placeholders for ``params``), with
    ``fields`` loaded (None: every field; the others load on access).
    """
    return [user for user, _ in accounts_from_sql(alias, f"{_select(alias, fields)} WHERE {where}", params, fields)]


def accounts_from_sql(
    alias: str, sql: str, params: Sequence[Any], fields: tuple[str, ...] | None = None
) -> list[tuple[User, tuple[Any, ...]]]:
    """Run ``sql`` on the database ``alias`` and make an account of each row, as Django's ``raw``
    would, without building a queryset per call (it cost more than a query this small).

    :param sql: its first columns are the accounts' ``fields`` in the model's order (None: every
        field, as ``_select`` and ``user_columns`` list them); any columns after them come back as
        they are, beside each account.
    :returns: ``[(account, the row's other columns)]`` in the rows' order.
    """
    connection = connections[alias]
    reader = _row_reader(connection, fields)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows: Iterable[Sequence[Any]] = cursor.fetchall()
    if reader.converters:
        rows = reader.compiler.apply_converters(rows, reader.converters)
    width = len(reader.names)
    return [(User.from_db(alias, reader.names, row[:width]), tuple(row[width:])) for row in rows]


@dataclass(frozen=True)
class _RowReader:
    """How a row's account columns become field values, as Django's ``raw`` makes them: the
    fields' names, and Django's compiler with the converters of the columns that need them
    (``SQLCompiler.get_converters``, ``apply_converters``)."""

    names: list[str]
    compiler: SQLCompiler
    converters: dict[int, tuple[list[Any], Any]]


# Kept on the connection object itself: its compiler and its backend's converters point back to
# it, so a table of readers outside it (even one of weak keys) would keep every connection that
# ever read an account alive, and its database session open (a thread per request: the streaming
# process, runserver).
_READERS_ATTRIBUTE = "_followfeed_account_row_readers"


def _row_reader(connection: BaseDatabaseWrapper, fields: tuple[str, ...] | None) -> _RowReader:
    readers: dict[tuple[str, ...] | None, _RowReader] = connection.__dict__.setdefault(_READERS_ATTRIBUTE, {})
    reader = readers.get(fields)
    if reader is None:
        loaded = _loaded_fields(fields)
        compiler = connection.ops.compiler("SQLCompiler")(Query(User), connection, connection.alias)
        converters = compiler.get_converters([field.get_col(User._meta.db_table) for field in loaded])
        reader = readers[fields] = _RowReader(names=[field.attname for field in loaded], compiler=compiler, converters=converters)
    return reader


@functools.cache
def loaded_names() -> list[str]:
    """The attribute names of every field of an account, in the order ``account_by_id`` reads them
    (``Model.from_db``'s ``field_names``)."""
    return [field.attname for field in _loaded_fields(None)]


@functools.cache
def _loaded_fields(fields: tuple[str, ...] | None) -> tuple[Field[Any, Any], ...]:
    """The accounts' concrete fields named in ``fields`` (None: every one), in the model's order:
    the columns ``_select`` lists and ``accounts_from_sql`` reads."""
    return tuple(field for field in User._meta.concrete_fields if fields is None or field.attname in fields)


@functools.cache
def _select(alias: str, fields: tuple[str, ...] | None) -> str:
    """``SELECT <the columns of fields> FROM <the accounts' table>`` for the database ``alias``."""
    quote = connections[alias].ops.quote_name
    columns = [str(field.column) for field in _loaded_fields(fields)]
    return f"SELECT {', '.join(quote(column) for column in columns)} FROM {quote(User._meta.db_table)}"


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


def id_ranges(*, start_after: int, top: int, batch_users: int) -> Iterator[tuple[int, int]]:
    """Ranges ``(low, high)`` of account ids (``low < id <= high``) from ``start_after`` to ``top``,
    each holding at most ``batch_users`` accounts: a walk in batches that costs nothing for a gap in
    the ids (deletions, imports with their own ids). Each high is its batch's last id, the last
    range's is ``top``; consecutive ranges meet (one's high is the next's low).

    :raises ValueError: ``batch_users`` below 1.
    """
    if batch_users < 1:
        raise ValueError("batch_users must be at least 1")
    low = start_after
    while low < top:
        # The batch's last id: one seek on the primary key.
        last = list(
            User.objects.filter(pk__gt=low, pk__lte=top)
            .order_by("pk")
            .values_list("pk", flat=True)[batch_users - 1 : batch_users]
        )
        high = last[0] if last else top
        yield low, high
        low = high

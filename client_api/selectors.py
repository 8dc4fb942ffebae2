"""Reads of the Mastodon client API that followfeed's own selectors do not answer: the token of
a request, relationships in Mastodon's terms, and notifications with a client's dismissals."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connections, router
from django.db.models import Model, Q, QuerySet
from django.utils import timezone
from oauth2_provider.models import AccessToken

from core.errors import Forbidden, InvalidInput, NotFound
from core.paging import Cursor
from core.redis import REDIS_ERRORS, get_redis
from core.sql import id_list
from feed.models import DIRECT, FEED_VISIBILITIES, AuthorNoteCount, Note, to_ms
from feed.paging import FeedNote, Position
from feed.selectors import (
    TimelinePage,
    home_timeline,
    note_detail,
    pull_authors_cached,
    shown_visibilities,
    timeline_page_of,
    timeline_rows_query,
)
from notifications.models import Notification
from social import visibility
from social.models import Block, Follow, FollowRequest, Mute, live_mutes
from social.selectors import active_follows
from users.models import User

from .models import ClientApp, NotificationDismissal


def _columns(model: type[Model], alias: str) -> tuple[list[str], str]:
    """``model``'s concrete fields' attribute names, and their columns under ``alias`` for a SELECT."""
    fields = model._meta.concrete_fields
    return [field.attname for field in fields], ", ".join(f"{alias}.{field.column}" for field in fields)


@dataclass(frozen=True)
class _TokenRead:
    """The token read's SQL, each model's attribute names and its slice of the row, and the row's
    converters, ``[(index, column, [converter])]`` for the fields that have any: worked out once per
    database connection (the ORM's work of each call otherwise)."""

    sql: str
    parts: tuple[tuple[type[Model], list[str], slice], ...]
    converters: tuple[tuple[int, Any, tuple[Callable[..., Any], ...]], ...]


def _token_read(connection: Any) -> _TokenRead:
    """``_TokenRead`` of ``connection``, kept on it for the ``USE_TZ`` it was made under (which
    decides the datetime fields' converters)."""
    kept = connection.__dict__.get("_client_api_token_read")
    if kept is not None and kept[0] == settings.USE_TZ:
        return kept[1]  # type: ignore[no-any-return]
    app_model = AccessToken._meta.get_field("application").related_model
    models: list[tuple[type[Model], str]] = [(AccessToken, "t"), (User, "u"), (app_model, "a")]
    parts: list[tuple[type[Model], list[str], slice]] = []
    columns: list[str] = []
    fields: list[Any] = []
    start = 0
    for model, alias in models:
        names, selected = _columns(model, alias)
        parts.append((model, names, slice(start, start + len(names))))
        columns.append(selected)
        fields += model._meta.concrete_fields
        start += len(names)
    converters = []
    for index, field in enumerate(fields):
        column = field.get_col(field.model._meta.db_table)
        found_converters = (*connection.ops.get_db_converters(column), *column.get_db_converters(connection))
        if found_converters:
            converters.append((index, column, found_converters))
    found = _TokenRead(
        sql=(
            f"SELECT {', '.join(columns)} FROM {AccessToken._meta.db_table} t"
            f" LEFT JOIN {User._meta.db_table} u ON u.id = t.user_id"
            f" LEFT JOIN {app_model._meta.db_table} a ON a.id = t.application_id"
            " WHERE t.token_checksum = %s"
        ),
        parts=tuple(parts),
        converters=tuple(converters),
    )
    connection.__dict__["_client_api_token_read"] = (settings.USE_TZ, found)
    return found


def access_token(raw: str) -> AccessToken | None:
    """The live (unrevoked, unexpired) access token whose value is ``raw``, with its user and application loaded, or None."""
    checksum = hashlib.sha256(raw.encode("utf-8")).hexdigest()
    # Every API call reads its token: one hand-written join, where the ORM's select_related took
    # longer to compile than the database took to answer.
    database = router.db_for_read(AccessToken)
    connection = connections[database]
    read = _token_read(connection)
    with connection.cursor() as cursor:
        cursor.execute(read.sql, [checksum])
        row = cursor.fetchone()
    if row is None:
        return None
    values = list(row)
    for index, column, converters in read.converters:
        for converter in converters:
            values[index] = converter(values[index], column, connection)
    (_, token_names, token_part), (_, user_names, user_part), (app_model, app_names, app_part) = read.parts
    token = AccessToken.from_db(database, token_names, values[token_part])
    user = User.from_db(database, user_names, values[user_part]) if values[user_part.start] is not None else None
    AccessToken._meta.get_field("user").set_cached_value(token, user)
    application = app_model.from_db(database, app_names, values[app_part]) if values[app_part.start] is not None else None
    AccessToken._meta.get_field("application").set_cached_value(token, application)
    if token.is_expired():
        return None
    return token


@dataclass(frozen=True)
class Relation:
    """Everything Mastodon's Relationship says about ``viewer`` and ``user_id``."""

    user_id: int
    following: bool
    followed_by: bool
    blocking: bool
    blocked_by: bool
    muting: bool
    requested: bool
    requested_by: bool


def relations(*, viewer_id: int, user_ids: Sequence[int]) -> list[Relation]:
    """``viewer_id``'s relationship to each of ``user_ids`` (in their order): follows, blocks,
    live mutes and pending requests from the database (four queries for the whole list)."""
    ids = list(dict.fromkeys(user_ids))
    blocks = set(
        Block.objects.filter(
            Q(blocker_id=viewer_id, blocked_id__in=ids) | Q(blocked_id=viewer_id, blocker_id__in=ids)
        ).values_list("blocker_id", "blocked_id")
    )
    muted = set(Mute.objects.filter(live_mutes(), muter_id=viewer_id, muted_id__in=ids).values_list("muted_id", flat=True))
    requests = set(
        FollowRequest.objects.filter(
            Q(requester_id=viewer_id, target_id__in=ids) | Q(target_id=viewer_id, requester_id__in=ids)
        ).values_list("requester_id", "target_id")
    )
    # The database, not the mirror: a follow this request just made shows at once (its mirror
    # write runs after commit).
    follows = set(
        active_follows()
        .filter(Q(follower_id=viewer_id, followee_id__in=ids) | Q(followee_id=viewer_id, follower_id__in=ids))
        .values_list("follower_id", "followee_id")
    )
    found = []
    for user_id in ids:
        found.append(
            Relation(
                user_id=user_id,
                following=(viewer_id, user_id) in follows,
                followed_by=(user_id, viewer_id) in follows,
                blocking=(viewer_id, user_id) in blocks,
                blocked_by=(user_id, viewer_id) in blocks,
                muting=user_id in muted,
                requested=(viewer_id, user_id) in requests,
                requested_by=(user_id, viewer_id) in requests,
            )
        )
    return found


def active_account(user_id: int) -> User | None:
    """The active account ``user_id``, or None."""
    return User.objects.filter(pk=user_id, is_active=True).first()


def active_account_named(username: str) -> User | None:
    """The active account named ``username`` (any case), or None."""
    return User.objects.filter(username__iexact=username, is_active=True).first()


def active_accounts(user_ids: Sequence[int]) -> dict[int, User]:
    """``{id: User}`` of the active accounts among ``user_ids``."""
    return {user.pk: user for user in User.objects.filter(pk__in=list(user_ids), is_active=True)}


def active_account_count() -> int:
    """How many accounts are active (the instance's user count)."""
    return User.objects.filter(is_active=True).count()


def app_website(application_id: int) -> str:
    """The website an application registered with ("" when none)."""
    return ClientApp.objects.filter(application_id=application_id).values_list("website", flat=True).first() or ""


def shown_notifications(*, recipient_id: int) -> QuerySet[Notification]:
    """``recipient_id``'s notifications a client has not dismissed, from active actors that no
    block hides from the recipient either way, with the actors loaded (unordered)."""
    rows = Notification.objects.filter(recipient_id=recipient_id, actor__is_active=True).select_related("actor")
    hidden = visibility.hidden_ids(viewer_id=recipient_id)
    if hidden:
        rows = rows.exclude(actor_id__in=sorted(hidden))
    dismissals = list(NotificationDismissal.objects.filter(recipient_id=recipient_id).values_list("notification_id", "up_to"))
    for notification_id, up_to in dismissals:
        if notification_id is None:
            rows = rows.filter(created_at__gt=up_to)
        else:
            rows = rows.exclude(pk=notification_id, created_at__lte=up_to)
    return rows


def notifications_page(
    *, recipient_id: int, kinds: Sequence[str] | None, max_id: int | None, since_id: int | None, min_id: int | None, limit: int
) -> list[Notification]:
    """A page of ``recipient_id``'s notifications, newest id first, as Mastodon pages them:
    ``max_id`` (older than), ``since_id`` (newer than, the newest ``limit``), ``min_id`` (the
    ``limit`` just newer than), ``kinds`` (None: all)."""
    rows = shown_notifications(recipient_id=recipient_id)
    if kinds is not None:
        rows = rows.filter(kind__in=list(kinds))
    if max_id is not None:
        rows = rows.filter(pk__lt=max_id)
    if since_id is not None:
        rows = rows.filter(pk__gt=since_id)
    if min_id is not None:
        return list(reversed(rows.filter(pk__gt=min_id).order_by("pk")[:limit]))
    return list(rows.order_by("-pk")[:limit])


def notification_of(*, recipient_id: int, notification_id: int) -> Notification | None:
    """``recipient_id``'s shown notification ``notification_id``, or None."""
    return shown_notifications(recipient_id=recipient_id).filter(pk=notification_id).first()


def now_iso() -> str:
    """The current time in ISO 8601 (UTC)."""
    return timezone.now().isoformat()


# --- Mastodon's id paging over followfeed's timelines ------------------------

Reader = Callable[[Cursor | None, int], TimelinePage]
SCAN_BATCH = 100
SCAN_ROUNDS = 10
# How deep a ``min_id`` page is looked for (it is the page just above the bound, read from the top).
DEEP_SCAN_ROUNDS = 100


# The place of an id above every note's: before the whole timeline (a score past any unix ms).
TOP = Position(2**62, 0)


def _position_of(note_id: int) -> Position | None:
    """Where the id ``note_id`` stands in the feed order: its note's position; for an id no note
    has (deleted with its account, or never used), ``TOP`` when no note has a greater id, None (the
    bottom) when none has a smaller one, else the start of the millisecond after the note of the
    next smaller id (ids rise with time; a place between notes, so none is on neither side)."""
    exact = Note.objects.filter(pk=note_id).values_list("created_at", flat=True).first()
    if exact is not None:
        return Position(to_ms(exact), note_id)
    if not Note.objects.filter(pk__gt=note_id).exists():
        return TOP
    older = Note.objects.filter(pk__lt=note_id).order_by("-pk").values_list("created_at", flat=True).first()
    if older is None:
        return None
    return Position(to_ms(older) + 1, 0)


def _start(max_id: int | None) -> tuple[Cursor | None, bool]:
    """The timeline position of ``max_id`` (a page holds what comes after it; None: the top), and
    whether any note lies below."""
    if max_id is None:
        return None, True
    position = _position_of(max_id)
    if position is None:
        return None, False
    if position == TOP:
        return None, True
    return Cursor(score=position.score, member=position.note_id), True


def _newer(note: Note | FeedNote, bound: Position | None) -> bool:
    """Whether ``note`` comes before ``bound`` in the feed order (None: the bottom, below every note)."""
    return bound is None or Position(note.published_ms, note.pk).precedes(bound.score, bound.note_id)


@dataclass
class HomeTimelinePage(TimelinePage):
    """A page of ``home_with_own``, with the ``StatusFacts`` of its notes (read with its own notes)."""

    facts: StatusFacts | None = None


def home_with_own(*, user: User) -> Reader:
    """``user``'s home timeline with its own notes (every visibility), as Mastodon's home: the inbox
    read merged with ``user_timeline`` viewed by its author, both keyset-paged from the same
    position and order; each page a ``HomeTimelinePage`` (one query gives the own notes and the
    facts of the page's notes).
    """

    def read(cursor: Cursor | None, n: int) -> TimelinePage:
        home = home_timeline(user_id=user.pk, cursor=cursor, limit=n)
        # A full page of the inbox bounds the own notes that can be among the first n: none older
        # than its last (those of its millisecond are read, and the merge orders them by id).
        bottom = home.notes[-1].published_ms if home.next_cursor is not None and home.notes else None
        own, facts = own_page_and_facts(
            author=user,
            cursor=cursor,
            limit=n,
            author_ids=[note.author_id for note in home.notes],
            note_ids=[note.pk for note in home.notes if not note.visibility],
            since_ms=bottom,
        )
        merged: dict[int, Note | FeedNote] = {}
        for note in sorted([*home.notes, *own.notes], key=lambda note: (-note.published_ms, note.pk)):
            merged.setdefault(note.pk, note)
        notes = list(merged.values())
        shown = notes[:n]
        more = len(notes) > n or home.next_cursor is not None or own.next_cursor is not None
        last = shown[-1] if shown else None
        next_cursor = Cursor(score=last.published_ms, member=last.pk) if more and last is not None else None
        return HomeTimelinePage(
            notes=shown, next_cursor=next_cursor, catching_up=home.catching_up, source=home.source, facts=facts
        )

    return read


def facts_of_pages(pages: Sequence[TimelinePage]) -> StatusFacts | None:
    """The ``StatusFacts`` the ``HomeTimelinePage``s among ``pages`` carry, together (None: none carries any)."""
    carried = [page.facts for page in pages if isinstance(page, HomeTimelinePage) and page.facts is not None]
    return StatusFacts.joined(carried) if carried else None


def timeline_window(
    read: Reader, *, max_id: int | None, since_id: int | None, min_id: int | None, limit: int
) -> tuple[list[Note | FeedNote], bool]:
    """A page of a timeline read by ``read(cursor, limit)`` as Mastodon pages by id, an id standing
    for its note's place in the timeline's order (newest first, one millisecond's notes by id
    ascending): after ``max_id``; before ``since_id`` (the newest ``limit``) or ``min_id`` (the
    ``limit`` just before it). So every note is on one page once, even notes of one millisecond,
    or published with an older time than notes of smaller ids. At most ``SCAN_ROUNDS`` x
    ``SCAN_BATCH`` notes deep, ``DEEP_SCAN_ROUNDS`` x ``SCAN_BATCH`` for ``min_id``.

    :returns: the notes newest first, and whether older ones may follow.
    :raises InvalidInput: the ``min_id`` page lies deeper than that (400).
    """
    cursor, any_below = _start(max_id)
    if not any_below:
        return [], False
    bounded = bool(since_id or min_id)
    # Both given: the nearer (newer) one bounds; either is exclusive.
    # (None: no note below the id, so no bound.)
    bounds = [position for bound in (since_id, min_id) if bound and (position := _position_of(bound)) is not None]
    lower = max(bounds, key=lambda bound: (bound.score, -bound.note_id), default=None)
    found: list[Note | FeedNote] = []
    more = False
    ended = False
    deep = min_id is not None
    for _ in range(DEEP_SCAN_ROUNDS if deep else SCAN_ROUNDS):
        batch = limit + 1 if not bounded and not found else SCAN_BATCH
        page = read(cursor, batch)
        reached_bottom = False
        for note in page.notes:
            if not _newer(note, lower):
                reached_bottom = True
                break
            found.append(note)
        if not deep and len(found) > limit:
            return found[:limit], True
        if deep:
            del found[:-limit]  # only the ``limit`` nearest the bound can be the page
        if page.next_cursor is None or reached_bottom:
            ended = True
            more = page.next_cursor is not None and not bounded
            break
        cursor = page.next_cursor
    if deep:
        if not ended:
            raise InvalidInput(
                f"min_id lies more than {DEEP_SCAN_ROUNDS * SCAN_BATCH:,} notes down this timeline; page down with max_id instead."
            )
        return found[-limit:], False
    return found[:limit], more or len(found) > limit


@dataclass
class NotificationGroupPage:
    """Mastodon's grouped notifications: ``groups`` newest first, each ``(group_key, rows newest
    first)``, and whether older ones may follow."""

    groups: list[tuple[str, list[Notification]]]
    more: bool


def group_key(notification: Notification) -> str:
    """Mastodon's ``group_key``: follows of one day share followfeed's ``NotificationGroup``;
    follow requests stand alone (``ungrouped-<id>``), as on Mastodon."""
    if notification.kind != "follow_request" and notification.group_id is not None:
        return f"follow-{notification.group_id}"
    return f"ungrouped-{notification.pk}"


def grouped_notifications_page(
    *, recipient_id: int, kinds: Sequence[str] | None, max_id: int | None, since_id: int | None, min_id: int | None, limit: int
) -> NotificationGroupPage:
    """Up to ``limit`` groups of ``recipient_id``'s notifications, paged by notification id as
    ``notifications_page``, each group holding the page's notifications of its key."""
    groups: dict[str, list[Notification]] = {}
    rows = notifications_page(
        recipient_id=recipient_id, kinds=kinds, max_id=max_id, since_id=since_id, min_id=min_id, limit=limit * 4
    )
    more = len(rows) == limit * 4
    for row in rows:
        key = group_key(row)
        if key not in groups and len(groups) == limit:
            more = True
            break
        groups.setdefault(key, []).append(row)
    return NotificationGroupPage(groups=list(groups.items()), more=more)


def notification_group(*, recipient_id: int, key: str) -> list[Notification]:
    """``recipient_id``'s shown notifications of group ``key``, newest first (empty: no such group)."""
    kind, _, raw = key.partition("-")
    if not raw.isdigit():
        return []
    rows = shown_notifications(recipient_id=recipient_id)
    if kind == "ungrouped":
        return list(rows.filter(pk=int(raw)))
    if kind == "follow":
        return list(rows.filter(group_id=int(raw)).exclude(kind="follow_request").order_by("-pk")[:80])
    return []


@dataclass(frozen=True)
class AuthorFacts:
    """What an Account needs beyond the names a timeline carries: ``statuses_count`` (notes shown
    to others: direct ones left out, a count must not tell that an author keeps notes to itself),
    ``bio``, ``locked`` (approves its followers) and ``joined_day`` (``YYYY-MM-DD``, UTC, as
    Mastodon shows when an account was made)."""

    statuses_count: int
    bio: str
    locked: bool
    joined_day: str | None


@dataclass(frozen=True)
class StatusFacts:
    """What a page of statuses needs beyond its notes: ``authors`` ``{author id: AuthorFacts}``
    and ``settings`` ``{note id: (visibility, spoiler_text)}``."""

    authors: dict[int, AuthorFacts]
    settings: dict[int, tuple[str, str]]

    @classmethod
    def joined(cls, parts: Iterable[StatusFacts]) -> StatusFacts:
        """The facts of ``parts`` together (of an author or note in several, the last part's)."""
        authors: dict[int, AuthorFacts] = {}
        settings: dict[int, tuple[str, str]] = {}
        for part in parts:
            authors.update(part.authors)
            settings.update(part.settings)
        return cls(authors, settings)


def status_facts(*, author_ids: Sequence[int], note_ids: Sequence[int]) -> StatusFacts:
    """``StatusFacts`` of a page's authors and of its notes (the home timeline's cached notes
    carry no visibility, its authors no bio), in one round trip: two selects as one UNION ALL."""
    return _facts_and_own(author_ids=author_ids, note_ids=note_ids, own=None)[0]


def own_page_and_facts(
    *,
    author: User,
    cursor: Cursor | None,
    limit: int,
    author_ids: Sequence[int],
    note_ids: Sequence[int],
    since_ms: int | None = None,
) -> tuple[TimelinePage, StatusFacts]:
    """``user_timeline(author=author, cursor=cursor, limit=limit, viewer_id=author.pk)`` (its own
    notes of every visibility), only those published at ``since_ms`` or later (None: however
    old), and the ``status_facts`` of ``author_ids`` (``author`` among them) and ``note_ids``, in
    one query: the home timeline of the API reads both for every page."""
    # A part of _facts_and_own's union, in its layout. Inside parentheses the query keeps its ORDER
    # BY and LIMIT with no derived table (a temporary table per query); SQLite takes no parentheses
    # around a part of a union, so there a derived table does it.
    tagged = connections[router.db_for_read(Note)].vendor != "sqlite"
    sql, params = timeline_rows_query(
        author_id=author.pk,
        visibilities=shown_visibilities(viewer_id=author.pk, author_id=author.pk),
        cursor=cursor,
        count=limit + 1,
        since_ms=since_ms,
        around=(f"{_OWN}, ", ", 0, 0") if tagged else ("", ""),
    )
    part = f"({sql})" if tagged else f"SELECT {_OWN}, own.*, 0, 0 FROM ({sql}) own"
    facts, rows = _facts_and_own(author_ids=[*author_ids, author.pk], note_ids=note_ids, own=(part, params))
    return timeline_page_of(author, rows, limit), facts


# The kinds of the rows of _facts_and_own's query, told apart by its first column.
_AUTHOR, _SETTINGS, _OWN = 0, 1, 2


def _facts_and_own(
    *, author_ids: Sequence[int], note_ids: Sequence[int], own: tuple[str, list[Any]] | None
) -> tuple[StatusFacts, list[tuple[int, datetime | str, str, str, str]]]:
    """``StatusFacts`` of ``author_ids`` and ``note_ids``, and the own notes' rows of ``own`` (a
    part of the union in its layout, of own notes, and its parameters; None: none), in one UNION ALL."""
    authors, notes = sorted(set(author_ids)), sorted(set(note_ids))
    if not authors and not notes and own is None:
        return StatusFacts({}, {}), []
    users, table = User._meta.db_table, Note._meta.db_table
    # Every part gives (kind, id, time, body, spoiler, text, count, locked), the own notes' row
    # (id, created_at, body, spoiler_text, visibility) between the kind and two zeros: an author
    # (bio, the day it joined, its counted notes, locked), a note's settings (spoiler text,
    # visibility), or one of the own notes. The day as text: the driver makes a datetime of a time
    # in Python, and a page has some forty authors.
    parts: list[str] = []
    params: list[Any] = []
    if authors:
        parts.append(
            # The count cast: MariaDB types the union's column DECIMAL, which the driver converts in Python.
            f"SELECT {_AUTHOR}, u.id, NULL, u.bio, DATE(u.date_joined), '',"
            f" CAST(COALESCE(c.notes, (SELECT COUNT(*) FROM {table} n WHERE n.author_id = u.id"
            f" AND n.deleted_at IS NULL AND n.is_hidden = 0 AND n.visibility IN ({', '.join(['%s'] * len(FEED_VISIBILITIES))})))"
            f" AS SIGNED), u.approve_followers FROM {users} u"
            f" LEFT JOIN {AuthorNoteCount._meta.db_table} c ON c.author_id = u.id"
            f" WHERE u.id IN ({id_list(authors)})"
        )
        params += FEED_VISIBILITIES
    if notes:
        parts.append(
            f"SELECT {_SETTINGS}, id, NULL, '', spoiler_text, visibility, 0, 0 FROM {table} WHERE id IN ({id_list(notes)})"
        )
    if own is not None:
        parts.append(own[0])
        params += own[1]
    found: dict[int, AuthorFacts] = {}
    settings: dict[int, tuple[str, str]] = {}
    rows: list[tuple[int, datetime | str, str, str, str]] = []
    with connections[router.db_for_read(Note)].cursor() as cursor:
        cursor.execute(" UNION ALL ".join(parts), params)
        for kind, key, moment, body, spoiler, text, count, locked in cursor.fetchall():
            if kind == _AUTHOR:
                found[int(key)] = AuthorFacts(int(count), str(body), bool(locked), str(spoiler) if spoiler else None)
            elif kind == _SETTINGS:
                settings[int(key)] = (str(text), str(spoiler))
            else:
                rows.append((int(key), moment, str(body), str(spoiler), str(text)))
    return StatusFacts(found, settings), rows


def stream_note(*, reader: User, note_id: int) -> Note | None:
    """The note ``note_id`` with its author if ``reader``'s home feed shows it now (a live
    ``update``): visible to the reader, and the reader's own or of an account it follows, does
    not mute, and may see (blocks, privacy); else None."""
    note = note_detail(note_id=note_id, viewer_id=reader.pk)
    if note is None or note.author_id == reader.pk:
        return note
    if not Follow.objects.filter(follower_id=reader.pk, followee_id=note.author_id).exists():
        return None
    if note.author_id in visibility.muted_ids(user_id=reader.pk):
        return None
    try:
        visibility.require_content(viewer=reader, user=note.author)
    except (Forbidden, NotFound):
        return None
    return note


def stream_delete_shown(*, reader: User, note_id: int) -> bool:
    """Whether a ``delete`` of note ``note_id`` may go to ``reader``'s stream: the reader's own
    note, or another's that is not direct whose author the reader follows now (a former follower
    of a private account, or a stream opened before an unfollow, learns nothing of it); a note
    gone from the database may."""
    row = Note.objects.filter(pk=note_id).values_list("author_id", "visibility").first()
    if row is None:
        return True
    author_id, shown_as = row
    if author_id == reader.pk:
        return True
    return shown_as != DIRECT and Follow.objects.filter(follower_id=reader.pk, followee_id=author_id).exists()


def followed_pull_authors(*, user_id: int) -> list[int]:
    """The pulled (big) authors ``user_id`` follows, whose notes reach no inbox (none while Redis is down)."""
    try:
        pulled = pull_authors_cached(get_redis())
    except REDIS_ERRORS:
        return []
    if not pulled:
        return []
    return list(Follow.objects.filter(follower_id=user_id, followee_id__in=pulled).values_list("followee_id", flat=True))

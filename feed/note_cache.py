"""The note cache: what a page shows of a note and of its author, in Redis, filled on a miss.

Keys are ``feed.redis_keys``' (``note_cache_key``); only visible notes are cached, and their
authors in the account cache (``users.account_cache``); the fan-out writes (``SET``), a reader's
miss fills (``SET NX``, through ``feed.fallback.load_notes`` on the primary), a change forgets
with a tombstone.
Design: docs/architecture.md#notes-and-the-home-feed (The note cache).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import redis

from core.cluster import Pipe, is_cluster, pipeline
from core.redis import REDIS_ERRORS, breaker_node, get_redis, redis_available, redis_failed
from core.replica import primary_reads
from users.account_cache import forget_gone_fills, is_cached, parsed_account, queue_account_fill, queue_account_forget
from users.models import User
from users.redis_keys import account_keys

from . import redis_keys
from .fallback import load_notes
from .models import Note, from_ms
from .paging import FeedAuthor, FeedNote

# Values are plain UTF-8, not JSON: parsing is most of what a cached page
# costs per note. A note is "<author id> <publish ms> <body>" (the body is the
# rest, spaces and all).
# A note with a content warning stores "\x1f<warning>\x1f<body>" as its body: a
# control character neither a body nor a warning may hold (``core.parsing.parse_text``).
WARNING_MARK = "\x1f"


def note_value(note: Note) -> bytes:
    """The note cache's value for ``note``: ``b"<author id> <publish ms> <body>"``."""
    text = f"{WARNING_MARK}{note.spoiler_text}{WARNING_MARK}{note.body}" if note.spoiler_text else note.body
    return b"%d %d %s" % (note.author_id, note.published_ms, text.encode())


def split_warning(text: str) -> tuple[str, str]:
    """``(content warning, body)`` of a cached note's body text (no warning: ``""``)."""
    if not text.startswith(WARNING_MARK):
        return "", text
    warning, _, body = text[1:].partition(WARNING_MARK)
    return warning, body


def parse_note_value(value: bytes) -> tuple[int, int, str]:
    """``(author_id, published_ms, body)`` of a ``note_value``.

    :raises ValueError: not a note value.
    """
    author_id, published_ms, body = value.split(b" ", 2)
    return int(author_id), int(published_ms), body.decode()


# Parsed values by their bytes, per process: a value's bytes are its content,
# so one parse (and one datetime) serves every page that meets the same note,
# as the pages of its followers do. Bounded: emptied when full.
PARSED_MAX = 20_000
_parsed_notes: dict[bytes, tuple[int, datetime, str, int, str]] = {}


def _parsed_note(value: bytes) -> tuple[int, datetime, str, int, str]:
    found = _parsed_notes.get(value)
    if found is None:
        if len(_parsed_notes) >= PARSED_MAX:
            _parsed_notes.clear()
        author_id, published_ms, text = parse_note_value(value)
        warning, body = split_warning(text)
        found = _parsed_notes[value] = (author_id, from_ms(published_ms), body, published_ms, warning)
    return found


def queue_cache_fill(pipe: Pipe, notes: Iterable[Note], *, replace: bool) -> int:
    """Queue writes of the cache entries of ``notes`` and their (loaded) authors on ``pipe``; invisible
    notes and inactive authors are left out.

    :param replace: ``SET`` over entries and tombstones (the fan-out); False: ``SET NX`` only
        where neither is (a reader's fill). Authors are always ``NX``.
    :returns: the number of commands queued.
    """
    queued = 0
    authors: dict[int, User] = {}
    for note in notes:
        if not note.is_visible:
            continue
        key = redis_keys.note_cache_key(note.pk)
        pipe.set(key, note_value(note), ex=redis_keys.NOTE_CACHE_TTL_SECONDS, nx=not replace)
        authors[note.author_id] = note.author
        queued += 1
    return queued + queue_account_fill(pipe, authors.values())


def queue_cache_forget(pipe: Pipe, *, note_ids: Iterable[int] = (), author_ids: Iterable[int] = ()) -> int:
    """Queue the tombstones of notes ``note_ids`` and accounts ``author_ids`` on ``pipe``; returns the number of commands queued."""
    keys = [redis_keys.note_cache_key(note_id) for note_id in note_ids]
    for key in keys:
        pipe.set(key, redis_keys.CACHE_TOMBSTONE, ex=redis_keys.CACHE_TOMBSTONE_SECONDS)
    return len(keys) + queue_account_forget(pipe, author_ids)


def cache_forget(client: redis.Redis, *, note_ids: Iterable[int] = (), author_ids: Iterable[int] = ()) -> int:
    """Forget the cached notes ``note_ids`` and accounts ``author_ids`` (tombstones, one round trip).

    :returns: the number of entries forgotten.
    :raises: Redis errors (``REDIS_ERRORS``).
    """
    pipe = pipeline(client)
    count = queue_cache_forget(pipe, note_ids=note_ids, author_ids=author_ids)
    if count:
        pipe.execute()
    return count


def cache_forget_now(*, note_ids: Sequence[int]) -> bool:
    """Forget the cached notes ``note_ids`` right after a commit, best effort (nothing while the breaker
    is open; a failure opens it); the note's ``feed.note`` job forgets again either way.

    :returns: True when the tombstones were written.
    """
    if not note_ids:
        return True
    node = breaker_node(redis_keys.note_cache_key(note_ids[0]))
    if not redis_available(node):
        return False
    try:
        cache_forget(get_redis(), note_ids=note_ids)
    except REDIS_ERRORS as exc:
        redis_failed(exc, node)
        return False
    return True


def lookup(client: redis.Redis, keys: Sequence[str], set_key: str, members: Sequence[int]) -> tuple[list[Any], list[bool]]:
    """The values of the string ``keys`` (None where missing) and whether each of ``members`` is in
    ``set_key``, in one round trip (raw ``MGET`` and ``SMISMEMBER``; on a cluster one ``GET`` each, routed).

    :raises: Redis errors (``REDIS_ERRORS``).
    """
    if not keys and not members:
        return [], []
    if is_cluster(client):
        pipe = pipeline(client)
        for key in keys:
            pipe.get(key)
        if members:
            pipe.smismember(set_key, list(members))
        replies = pipe.execute()
        values = replies[: len(keys)]
    else:
        raw: Pipe = client.pipeline(transaction=False)
        if keys:
            raw.execute_command("MGET", *keys)
        if members:
            raw.execute_command("SMISMEMBER", set_key, *members)
        replies = raw.execute()
        values = list(replies[0]) if keys else []
    return values, [bool(member) for member in replies[-1]] if members else []


@dataclass(slots=True)
class NoteReads:
    """The note cache read with a page's first round (``feed.page_reader.inbox_round``): ``notes``
    the entries of some ids (None: missing; the tombstone), ``authors`` the entries of their
    authors, ``followed`` whether the reader follows each of those authors."""

    notes: dict[int, bytes | None]
    authors: dict[int, bytes | None]
    followed: dict[int, bool]

    @classmethod
    def of(
        cls,
        note_ids: Sequence[Any],
        values: Sequence[Any],
        author_ids: Sequence[Any],
        entries: Sequence[Any],
        flags: Sequence[Any],
    ) -> NoteReads:
        """The reads of ``INBOX_ROUND_LUA``'s replies: the ids it looked up with their ``values``,
        the authors it found in them with their ``entries`` and following ``flags``."""
        authors = [int(author_id) for author_id in author_ids]
        return cls(
            notes=dict(zip((int(note_id) for note_id in note_ids), values)),
            authors=dict(zip(authors, entries)),
            followed={author_id: bool(flag) for author_id, flag in zip(authors, flags)},
        )

    def answer(self, note_ids: Sequence[int], authors: Sequence[int]) -> tuple[list[Any], list[bool]] | None:
        """``lookup``'s answer for ``note_ids`` and ``authors`` when these reads hold all of it, else None."""
        notes, entries, followed = self.notes, self.authors, self.followed
        if not all(note_id in notes for note_id in note_ids) or not all(author_id in followed for author_id in authors):
            return None
        return [notes[note_id] for note_id in note_ids] + [entries[author_id] for author_id in authors], [
            followed[author_id] for author_id in authors
        ]


@dataclass
class Resolved:
    """The notes behind some ids for one reader: ``shown`` the ones the reader's feed shows
    (visible, by an author the reader follows, not the reader's own) with their authors,
    ``stale`` the ids whose note is gone or not visible (confirmed on the primary)."""

    shown: dict[int, FeedNote]
    stale: set[int]


# Note id -> author id, per process: a note's author never changes, so a
# round can ask for the authors' entries and the following check together
# with the notes' entries (one round trip instead of two) for every id this
# process has met. Bounded: emptied when full.
NOTE_AUTHORS_MAX = 200_000
_note_authors: dict[int, int] = {}


def forget_note_authors() -> None:
    """Empty this process's note -> author table (tests)."""
    _note_authors.clear()


def resolve_notes(
    client: redis.Redis,
    note_ids: Sequence[int],
    *,
    reader_id: int,
    following_key: str,
    muted: Collection[int] = (),
    reads: NoteReads | None = None,
) -> Resolved:
    """Look up ``note_ids`` and their authors in the note cache, and whether ``reader_id`` (following
    set ``following_key``) follows those authors.

    No round trip when ``reads`` (made in this request, of the same following set) hold all of it;
    one when this process met every id before, else two; misses cost a query for notes and one
    for authors, on the primary, and a fill (``SET NX``).

    :raises: Redis errors (``REDIS_ERRORS``).
    """
    if not note_ids:
        return Resolved(shown={}, stale=set())
    known = _note_authors
    if len(known) > NOTE_AUTHORS_MAX:
        known.clear()
    if reads is not None:
        for note_id in note_ids:
            value = reads.notes.get(note_id)
            if value is not None and value != redis_keys.CACHE_TOMBSTONE and note_id not in known:
                known[note_id] = _parsed_note(value)[0]
    guessed = [author_id for author_id in dict.fromkeys(map(known.get, note_ids)) if author_id is not None]
    answered = None if reads is None else reads.answer(note_ids, guessed)
    values, flags = answered or lookup(
        client, redis_keys.note_cache_keys(note_ids) + account_keys(guessed), following_key, guessed
    )
    tombstone = redis_keys.CACHE_TOMBSTONE
    followed = {user_id for user_id, member in zip(guessed, flags) if member}
    followed.discard(reader_id)  # a reader's own notes are not in its feed
    followed.difference_update(muted)  # nor the notes of accounts it mutes
    authors: dict[int, FeedAuthor] = {}
    author_values: dict[int, Any] = {}  # the entries found missing or tombstoned
    for user_id, value in zip(guessed, values[len(note_ids) :]):
        if is_cached(value):
            authors[user_id] = parsed_account(user_id, value)
        else:
            author_values[user_id] = value
    shown: dict[int, FeedNote] = {}
    missing: list[int] = []
    tombstoned: set[int] = set()
    waiting: list[tuple[int, tuple[int, datetime, str, int, str]]] = []  # cached notes whose author is not known yet
    parsed_notes = _parsed_notes
    for note_id, value in zip(note_ids, values):
        if value is None or value == tombstone:
            missing.append(note_id)
            if value is not None:
                tombstoned.add(note_id)
            continue
        parsed = parsed_notes.get(value) or _parsed_note(value)
        author_id = known[note_id] = parsed[0]
        author = authors.get(author_id)
        if author is None:
            waiting.append((note_id, parsed))
        elif author_id in followed:
            shown[note_id] = FeedNote(note_id, author_id, author, parsed[2], parsed[1], parsed[3], parsed[4])
    stale: set[int] = set()
    if missing or waiting or author_values:
        _resolve_rest(
            client,
            following_key,
            reader_id,
            set(guessed),
            missing,
            tombstoned,
            waiting,
            authors,
            author_values,
            followed,
            shown,
            stale,
            muted,
        )
    return Resolved(shown=shown, stale=stale)


def _resolve_rest(
    client: redis.Redis,
    following_key: str,
    reader_id: int,
    asked: set[int],
    missing: list[int],
    tombstoned: set[int],
    waiting: list[tuple[int, tuple[int, datetime, str, int, str]]],
    authors: dict[int, FeedAuthor],
    author_values: dict[int, Any],
    followed: set[int],
    shown: dict[int, FeedNote],
    stale: set[int],
    muted: Collection[int],
) -> None:
    # What the first round trip left open: notes not cached, authors not
    # guessed (``asked``: those whose membership is known) or not cached.
    # Fills ``shown`` and ``stale`` in place.
    loaded: dict[int, Note] = {}
    fill: list[Note] = []
    if missing:
        # The primary: a fill must not write a lagging replica's older state,
        # and removing an id (a write) needs the note confirmed gone there.
        with primary_reads():
            rows = load_notes(missing)
        for note_id in missing:
            row = rows.get(note_id)
            if row is None or not row.is_visible:
                stale.add(note_id)
                continue
            loaded[note_id] = row
            _note_authors[note_id] = row.author_id
            if row.author_id not in authors:
                authors[row.author_id] = FeedAuthor.of(row.author)
            if note_id not in tombstoned:
                fill.append(row)
    waiting_authors = {parsed[0] for _, parsed in waiting}
    entries = sorted(waiting_authors - authors.keys() - author_values.keys())
    members = sorted((waiting_authors | {row.author_id for row in loaded.values()}) - asked)
    if entries or members:
        values, flags = lookup(client, account_keys(entries), following_key, members)
        followed.update(
            user_id for user_id, member in zip(members, flags) if member and user_id != reader_id and user_id not in muted
        )
        for user_id, value in zip(entries, values):
            if is_cached(value):
                authors[user_id] = parsed_account(user_id, value)
            else:
                author_values[user_id] = value
    fill_authors: list[User] = []
    unknown = [user_id for user_id in author_values if user_id not in authors]
    if unknown:
        with primary_reads():
            found = User.objects.only("id", "username", "display_name", "is_active").in_bulk(unknown)
        for user_id, user in found.items():
            if user.is_active:
                authors[user_id] = FeedAuthor.of(user)
                if author_values[user_id] is None:  # a miss, not a tombstone
                    fill_authors.append(user)
    for note_id, (author_id, created_at, body, published_ms, warning) in waiting:
        author = authors.get(author_id)
        if author is None:
            stale.add(note_id)  # the author is deactivated or gone: so is the note
        elif author_id in followed:
            shown[note_id] = FeedNote(note_id, author_id, author, body, created_at, published_ms, warning)
    for note_id, row in loaded.items():
        if row.author_id in followed:
            shown[note_id] = FeedNote(
                row.pk, row.author_id, authors[row.author_id], row.body, row.created_at, row.published_ms, row.spoiler_text
            )
    if fill or fill_authors:
        pipe = pipeline(client)
        queue_cache_fill(pipe, fill, replace=False)
        queue_account_fill(pipe, fill_authors)
        pipe.execute()
        with primary_reads():
            forget_gone_fills(client, {row.author_id for row in fill} | {user.pk for user in fill_authors})

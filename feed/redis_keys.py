"""The Redis key layout of notes and home feeds; the only place that builds these keys.

Per-user keys carry the user's hash tag (``{42}``), so an inbox, its build copy and markers share
a slot; members are note ids as decimal strings (``note_member``), scores publish times in unix
ms (exact in a double). ``REDIS_KEY_PREFIX`` is read at call time; each function names its key's
type and content. Design: docs/architecture.md#notes-and-the-home-feed.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings

# A queued or running inbox rebuild holds its flag at most this long
# (seconds); a crashed worker's flag expires and the next visit retries.
REBUILDING_TTL_SECONDS = 300


def prefix() -> str:
    """The configured key prefix (``REDIS_KEY_PREFIX``), e.g. ``"ff:"``."""
    return str(settings.REDIS_KEY_PREFIX)


def inbox_max_len() -> int:
    """How many note ids an inbox or an outbox keeps (``INBOX_MAX_LEN``, default 800)."""
    return int(settings.INBOX_MAX_LEN)


def note_member(note_id: int | str | bytes) -> str:
    """The one member string of a note in every inbox and outbox: ``"123"``.

    :raises ValueError: when ``note_id`` is not an integer (``"12.0"``, ``"x"``).
    """
    if isinstance(note_id, bytes):
        note_id = note_id.decode("ascii")
    return str(int(note_id))


def inbox_key(user_id: int) -> str:
    """ZSET of note ids in ``user_id``'s home timeline, scored by publish time (ms)."""
    return f"{prefix()}feed:inbox:{{{int(user_id)}}}"


def outbox_key(author_id: int) -> str:
    """ZSET of ``author_id``'s own recent note ids, scored by publish time (ms)."""
    return f"{prefix()}feed:outbox:{{{int(author_id)}}}"


def pull_authors_key() -> str:
    """SET of author ids whose notes readers pull at read time (hybrid)."""
    return f"{prefix()}feed:{{pull_authors}}"


def pull_generation_key() -> str:
    """STRING: a counter raised each time the pull set is derived again (authors may have left it);
    a list timeline kept under an older generation is built again (``list_synced_key``)."""
    return f"{prefix()}feed:{{pull_authors}}:generation"


def inbox_floor_key(user_id: int) -> str:
    """STRING: the highest score (ms) trimmed from ``user_id``'s inbox at the cap. Older notes are
    not added afterwards: above its lowest score an inbox must hold every note, and the
    trimmed ones are gone (the database serves what lies below)."""
    return f"{prefix()}feed:inbox:floor:{{{int(user_id)}}}"


def inbox_synced_key(user_id: int) -> str:
    """STRING present while ``user_id``'s inbox is complete (expires with the user's activity)."""
    return f"{prefix()}feed:inbox:synced:{{{int(user_id)}}}"


def inbox_rebuilding_key(user_id: int) -> str:
    """STRING present while a rebuild of ``user_id``'s inbox is queued or running."""
    return f"{prefix()}feed:inbox:rebuilding:{{{int(user_id)}}}"


def inbox_build_key(user_id: int) -> str:
    """STRING holding the token of the rebuild building ``user_id``'s inbox aside right now."""
    return f"{prefix()}feed:inbox:build:{{{int(user_id)}}}"


def inbox_build_removed_key(user_id: int) -> str:
    """SET of note members removed from ``user_id``'s inbox while its rebuild ran."""
    return f"{prefix()}feed:inbox:build:removed:{{{int(user_id)}}}"


def rebuild_tmp_key(key: str) -> str:
    """Where a rebuild builds ``key`` aside (same hash tag, so RENAME stays in one slot)."""
    return key + ":rebuild"


def list_members_key(user_id: int, list_id: int) -> str:
    """SET of the account ids of list ``list_id`` of reader ``user_id`` that its timeline shows
    (members the reader follows, active); valid while ``list_id`` is in ``list_index_key``."""
    return f"{list_members_base(user_id)}:{int(list_id)}"


def list_index_key(user_id: int) -> str:
    """SET of the ids of ``user_id``'s lists whose ``list_members_key`` is written (an empty list
    has no SET, so its id here says "built, empty")."""
    return f"{prefix()}feed:lists:{{{int(user_id)}}}"


# A list's timeline is kept like an inbox while its synced marker lives: a ZSET of its members'
# notes (less pulled authors) that fan-out adds to, with a floor, a build lock, a build copy and
# a removed-during-build set. Each key is ``<base>(reader) + ":" + list id``: scripts build them
# from the base's template (``core.cluster.tag_template``) and the list ids in the list index.


def list_inbox_base(user_id: int) -> str:
    """The head of ``user_id``'s list inbox keys (``list_inbox_key``)."""
    return f"{prefix()}feed:list:inbox:{{{int(user_id)}}}"


def list_inbox_key(user_id: int, list_id: int) -> str:
    """ZSET of note ids of list ``list_id``'s timeline (its members' notes, less pulled authors),
    scored by publish time (ms); complete above its lowest score while ``list_synced_key`` lives."""
    return f"{list_inbox_base(user_id)}:{int(list_id)}"


def list_synced_base(user_id: int) -> str:
    """The head of ``user_id``'s ``list_synced_key``s."""
    return f"{prefix()}feed:list:synced:{{{int(user_id)}}}"


def list_synced_key(user_id: int, list_id: int) -> str:
    """STRING present while ``list_inbox_key`` is complete, holding the pull set's generation it was
    built under (``pull_generation_key``); expires as the reader's inbox marker would."""
    return f"{list_synced_base(user_id)}:{int(list_id)}"


def list_floor_base(user_id: int) -> str:
    """The head of ``user_id``'s ``list_floor_key``s."""
    return f"{prefix()}feed:list:floor:{{{int(user_id)}}}"


def list_floor_key(user_id: int, list_id: int) -> str:
    """STRING: the highest score (ms) trimmed from ``list_inbox_key`` at the cap (as ``inbox_floor_key``)."""
    return f"{list_floor_base(user_id)}:{int(list_id)}"


def list_build_base(user_id: int) -> str:
    """The head of ``user_id``'s ``list_build_key``s."""
    return f"{prefix()}feed:list:build:{{{int(user_id)}}}"


def list_build_key(user_id: int, list_id: int) -> str:
    """STRING holding the token of the build of ``list_inbox_key`` under way (a queued build's too)."""
    return f"{list_build_base(user_id)}:{int(list_id)}"


def list_copy_base(user_id: int) -> str:
    """The head of ``user_id``'s ``list_copy_key``s."""
    return f"{prefix()}feed:list:copy:{{{int(user_id)}}}"


def list_copy_key(user_id: int, list_id: int) -> str:
    """ZSET: where a build fills ``list_inbox_key`` aside (deliveries write it too)."""
    return f"{list_copy_base(user_id)}:{int(list_id)}"


def list_removed_base(user_id: int) -> str:
    """The head of ``user_id``'s ``list_removed_key``s."""
    return f"{prefix()}feed:list:removed:{{{int(user_id)}}}"


def list_removed_key(user_id: int, list_id: int) -> str:
    """SET of note members withdrawn from list ``list_id``'s timeline while its build ran."""
    return f"{list_removed_base(user_id)}:{int(list_id)}"


def list_timeline_keys(user_id: int, list_id: int) -> list[str]:
    """Every key of list ``list_id``'s kept timeline (what dropping it deletes)."""
    return [
        list_inbox_key(user_id, list_id),
        list_synced_key(user_id, list_id),
        list_floor_key(user_id, list_id),
        list_build_key(user_id, list_id),
        list_copy_key(user_id, list_id),
        list_removed_key(user_id, list_id),
    ]


def list_members_base(user_id: int) -> str:
    """The head of ``user_id``'s ``list_members_key``s."""
    return f"{prefix()}feed:list:{{{int(user_id)}}}"


def excluded_key(user_id: int) -> str:
    """SET of the account ids of ``user_id``'s exclusive lists: their notes stay out of its home feed."""
    return f"{prefix()}feed:excluded:{{{int(user_id)}}}"


def all_user_keys(user_id: int) -> list[str]:
    """Every feed key of ``user_id`` (for deletes and tests)."""
    return [
        inbox_key(user_id),
        outbox_key(user_id),
        inbox_synced_key(user_id),
        inbox_floor_key(user_id),
        inbox_rebuilding_key(user_id),
        inbox_build_key(user_id),
        inbox_build_removed_key(user_id),
        list_index_key(user_id),
        excluded_key(user_id),
        rebuild_tmp_key(inbox_key(user_id)),
        rebuild_tmp_key(outbox_key(user_id)),
    ]


# --- the note cache -------------------------------------------------------------
#
# What a home feed page shows of a note, so a page reads no database row in the
# common case (``feed.note_cache``; its authors are in the account cache,
# ``users.redis_keys.account_key``):
#
# - ``ff:feed:note:42``  STRING note 42's author id, publish time (ms) and body
#   (``b"<author id> <ms> <body>"``); only visible notes. No hash tag: only
#   single-key commands touch it, so notes spread over every slot
#
# The key holds ``CACHE_TOMBSTONE`` for ``CACHE_TOMBSTONE_SECONDS`` after it was
# forgotten (the note changed): readers then read the database and write
# nothing back until it expires.

# How long (seconds) a cached note lives without being written again.
NOTE_CACHE_TTL_SECONDS = 2 * 86400
# How long (seconds) a forgotten entry refuses fills. A reader fills from a
# database read made before it writes; a read from before the change that
# arrives after this long would write the old state back.
CACHE_TOMBSTONE_SECONDS = 60
CACHE_TOMBSTONE = b"~"


def note_cache_key(note_id: int) -> str:
    """STRING: the cached fields of visible note ``note_id`` (author id, publish ms, body)."""
    return f"{prefix()}feed:note:{int(note_id)}"


def note_cache_key_head() -> str:
    """``head`` with ``note_cache_key(n) == head + str(n)``, for a script that builds the keys of the ids it read."""
    return f"{prefix()}feed:note:"


def note_cache_keys(note_ids: Iterable[int]) -> list[str]:
    """``note_cache_key`` of each of ``note_ids``, in order (the prefix read once: a page builds dozens)."""
    head = note_cache_key_head()
    return [f"{head}{int(note_id)}" for note_id in note_ids]

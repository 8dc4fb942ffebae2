"""The home timeline's order, positions and pages: pure rules, no Redis and no query.

Order: publish time (ms) descending, then note id ascending. A page continues strictly after a
``Position``; the cursor and the scroll contract ``(lastId, offset)`` both map to one. ``Page``s
hold ``FeedNote``s built by ``feed.page_reader``. Design: docs/architecture.md#notes-and-the-home-feed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from users.serializers import ShownAccount

from .models import VISIBILITIES, Note

VISIBILITY_LABELS = dict(VISIBILITIES)

# The largest note id a position can name: "after every note at this score".
MAX_NOTE_ID = 2**63 - 1


@dataclass(frozen=True, order=True)
class Position:
    """A place in the feed order (a page holds the notes strictly after it): ``score`` in unix ms;
    ``note_id`` 0 is "before every note of that ms", ``MAX_NOTE_ID`` "after all of them".
    """

    score: int
    note_id: int

    def precedes(self, score: int, note_id: int) -> bool:
        """Whether the note ``(score, note_id)`` comes strictly after this position."""
        return score < self.score or (score == self.score and note_id > self.note_id)


def feed_order(item: tuple[int, int]) -> tuple[int, int]:
    """Sort key of the feed order for ``(note_id, score)``: newest first, ties by id ascending."""
    return (-item[1], item[0])


# A note's author is an account as a page shows it.
FeedAuthor = ShownAccount


@dataclass(slots=True, eq=False)
class FeedNote:
    """A note as a timeline shows it: ``id`` (also ``pk``), ``author_id``, ``author``
    (``FeedAuthor``), ``body``, ``created_at``, ``published_ms`` (its score), ``spoiler_text``,
    and ``visibility`` ("" where the page does not show it: the home timeline's notes). Not a
    model (descriptors cost more than the cache read); holds all that rendering reads, so no query.
    """

    id: int
    author_id: int
    author: FeedAuthor
    body: str
    created_at: datetime
    published_ms: int
    spoiler_text: str = ""  # the content warning (empty: none)
    visibility: str = ""

    def get_visibility_display(self) -> str:
        """The visibility's label, as ``Note.get_visibility_display`` gives it."""
        return VISIBILITY_LABELS.get(self.visibility, self.visibility)

    @property
    def pk(self) -> int:
        """The note's id (as on a model)."""
        return self.id

    @classmethod
    def of(cls, note: Note) -> FeedNote:
        """The ``FeedNote`` of ``note`` (its author loaded)."""
        return cls(
            note.pk, note.author_id, FeedAuthor.of(note.author), note.body, note.created_at, note.published_ms, note.spoiler_text
        )


@dataclass
class Page:
    """A page in feed order; ``has_more`` when another note follows the last one."""

    notes: list[FeedNote]
    has_more: bool
    redis_notes: int = 0
    stale_removed: int = 0

    @property
    def last(self) -> Position | None:
        """Position of the last note shown (the next page continues after it)."""
        if not self.notes:
            return None
        return Position(self.notes[-1].published_ms, self.notes[-1].pk)


def scroll_state(page: Page, last_id: int | None, seen: int) -> tuple[int | None, int]:
    """``(minTime, offset)`` to send back after ``page``: the notes at ``minTime`` the client has seen,
    including earlier pages' when the whole page shares the previous minimum.
    """
    if not page.notes:
        return last_id, seen
    min_time = page.notes[-1].published_ms
    here = sum(1 for note in page.notes if note.published_ms == min_time)
    if min_time == last_id:
        here += seen
    return min_time, here

"""The home timeline from the database, the truth: what a page reads past the Redis horizon,
and all of it when the mirror is missing, being rebuilt or down (``feed.page_reader``), in the
feed order (``feed.paging``); and the notes a miss of the note cache loads (``feed.note_cache``).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from django.db.models import Q, QuerySet

from .models import FEED_VISIBILITIES, Note, from_ms
from .paging import Position


def load_notes(note_ids: Collection[int]) -> dict[int, Note]:
    """Notes with these ids and their authors, in one query: ``{id: Note}``."""
    if not note_ids:
        return {}
    return {note.pk: note for note in Note.objects.filter(pk__in=list(note_ids)).select_related("author")}


def visible_notes() -> QuerySet[Note]:
    """Notes that may be shown in feeds: not hidden, not deleted, author active, not direct."""
    return Note.objects.filter(is_hidden=False, deleted_at__isnull=True, author__is_active=True, visibility__in=FEED_VISIBILITIES)


def after_filter(after: Position) -> Q:
    """Database filter for the notes strictly after ``after`` in feed order."""
    at = from_ms(after.score)
    # The bounded range (created_at <= at) lets MariaDB use the index; the
    # OR then splits the millisecond run by id.
    return Q(created_at__lte=at) & (Q(created_at__lt=at) | Q(created_at=at, id__gt=after.note_id))


def database_after(followees: Collection[int] | QuerySet[Any], after: Position | None, n: int) -> list[Note]:
    """Up to ``n`` visible notes of ``followees`` strictly after ``after``, in feed order.

    :param followees: author ids, or a ``values("followee_id")`` queryset
        (then one query does both).
    """
    if not isinstance(followees, QuerySet) and not followees:
        return []
    rows = visible_notes().filter(author_id__in=followees if isinstance(followees, QuerySet) else list(followees))
    if after is not None:
        rows = rows.filter(after_filter(after))
    return list(rows.select_related("author").order_by("-created_at", "id")[:n])


def database_run(followees: Collection[int] | QuerySet[Any], score: int) -> list[tuple[int, int]]:
    """``(id, author id)`` of the visible notes of ``followees`` published at exactly ``score`` (ms), ids ascending."""
    if not isinstance(followees, QuerySet) and not followees:
        return []
    rows = visible_notes().filter(
        author_id__in=followees if isinstance(followees, QuerySet) else list(followees), created_at=from_ms(score)
    )
    return list(rows.order_by("id").values_list("id", "author_id"))

"""Feed helpers of the tests: publishing with fan-out run, reading inboxes and kept list timelines, paging to the end."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from core.paging import Cursor
from feed import rebuild, redis_keys, selectors, services
from feed.models import Note, from_ms
from tests.support.commits import run_on_commit


class Publisher:
    """``publish(author, body=None, *, at_ms=None, at=None)``: ``note_create`` with its fan-out run
    (eager); a note without a body is "note 1", "note 2"... counted per publisher."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, author: Any, body: str | None = None, *, at_ms: int | None = None, at: datetime | None = None) -> Note:
        created_at = from_ms(at_ms) if at_ms is not None else at
        if not body:
            self.count += 1
            body = f"note {self.count}"
        with run_on_commit():
            return services.note_create(author=author, body=body, created_at=created_at)


def fanned_out(*notes: Note) -> bool:
    """Whether every note of ``notes`` has been fanned out (``fanned_out_at`` set)."""
    return Note.objects.filter(pk__in=[n.pk for n in notes], fanned_out_at__isnull=False).count() == len(notes)


def inbox(client: Any, user: Any) -> list[tuple[bytes, int]]:
    """The inbox of ``user`` newest first: ``[(member, score_ms)]``."""
    return [(member, int(score)) for member, score in client.zrevrange(redis_keys.inbox_key(user.pk), 0, -1, withscores=True)]


def inbox_ids(client: Any, user: Any) -> list[int]:
    """Note ids in ``user``'s inbox, newest first."""
    return [int(member) for member, _ in inbox(client, user)]


def scroll_all(user, limit, *, between_pages=None, max_pages=50):
    """Page with the scroll contract until the end: ``(ids, [(minTime, offset)], pages)``."""
    seen: list[int] = []
    states: list[tuple[int | None, int]] = []
    pages = 0
    last_id, offset = None, 0
    while pages < max_pages:
        page = selectors.home_timeline_scroll(user_id=user.pk, last_id=last_id, offset=offset, limit=limit)
        pages += 1
        seen.extend(n.pk for n in page.notes)
        states.append((page.min_time, page.offset))
        if not page.has_more:
            return seen, states, pages
        last_id, offset = page.min_time, page.offset
        if between_pages:
            between_pages(pages)
    raise AssertionError("the feed never ended")


def cursor_all(user, limit, *, between_pages=None, max_pages=50):
    """Page with the opaque cursor until the end: ``(ids, pages)``."""
    seen: list[int] = []
    cursor: Cursor | None = None
    pages = 0
    while pages < max_pages:
        page = selectors.home_timeline(user_id=user.pk, cursor=cursor, limit=limit)
        pages += 1
        seen.extend(n.pk for n in page.notes)
        if page.next_cursor is None:
            return seen, pages
        assert len(page.notes) == limit  # no short page before the end
        cursor = page.next_cursor
        if between_pages:
            between_pages(pages)
    raise AssertionError("the feed never ended")


def kept_ids(client: Any, reader: Any, list_: Any) -> list[int]:
    """Note ids of the kept timeline of ``reader``'s list ``list_``, newest first."""
    return [int(member) for member in client.zrevrange(redis_keys.list_inbox_key(reader.pk, list_.pk), 0, -1)]


def is_kept(reader: Any, list_: Any) -> bool | None:
    """Whether a page of ``list_`` read now comes from its kept timeline (``TimelinePage.kept``)."""
    return selectors.list_timeline(reader_id=reader.pk, list_id=list_.pk, cursor=None, limit=5).kept


def build_kept(reader: Any, list_: Any) -> rebuild.ListTimelineBuild:
    """Build the kept timeline of ``reader``'s list ``list_`` now; it must be kept and not lost."""
    result = rebuild.list_timeline_rebuild(reader_id=reader.pk, list_id=list_.pk)
    assert result.kept and not result.lost
    return result

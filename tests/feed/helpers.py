"""Helpers shared by the feed tests."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from core.paging import Cursor
from feed import redis_keys, selectors
from feed.rebuild import inbox_rebuild, synced_until
from tests.conftest import UserFactory


def make_user(username: str | None = None, *, active: bool = True, **fields: Any) -> Any:
    """A user; ``active`` readers were seen now and their (empty) inbox is synced, as after a
    sign-in, so fan-out delivers to them."""
    if username is not None:
        fields["username"] = username
    if active:
        fields.setdefault("last_seen_at", timezone.now())
    user = UserFactory.create(**fields)
    if active and synced_until(user.last_seen_at) is not None:
        inbox_rebuild(user_id=user.pk)
    return user


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

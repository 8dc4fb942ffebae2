"""Checks of invariant 6: once background work has drained, the Redis feed equals the database's."""

from __future__ import annotations

from typing import Any

from feed import selectors

PAGES = 5
PAGE_SIZE = 10


def feed_pages(
    user_id: int, *, database_only: bool, pages: int = PAGES, limit: int = PAGE_SIZE
) -> tuple[list[list[tuple[int, int]]], set[str]]:
    """The first ``pages`` pages of ``user_id``'s home feed as ``[(note_id, score_ms)]`` per page,
    and the sources that served them."""
    found: list[list[tuple[int, int]]] = []
    sources: set[str] = set()
    cursor = None
    for _ in range(pages):
        page = selectors.home_timeline(user_id=user_id, cursor=cursor, limit=limit, database_only=database_only)
        found.append([(note.pk, note.published_ms) for note in page.notes])
        sources.add(page.source)
        cursor = page.next_cursor
        if cursor is None:
            break
    return found, sources


def feed_differences(user_ids: list[int]) -> dict[int, Any]:
    """``{user_id: (redis pages, database pages)}`` for every reader whose Redis feed (which must be
    served from Redis) differs from the database's in its first pages; empty when all agree."""
    differ: dict[int, Any] = {}
    for user_id in user_ids:
        from_redis, sources = feed_pages(user_id, database_only=False)
        from_database, _ = feed_pages(user_id, database_only=True)
        if sources != {"redis"} or from_redis != from_database:
            differ[user_id] = (sorted(sources), from_redis, from_database)
    return differ

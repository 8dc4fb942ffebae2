"""Helpers of the browser journeys: viewports, waiting for the worker, reading pages, checking accessibility."""

from __future__ import annotations

import re
from typing import Any, cast

from core.redis import get_redis
from feed import redis_keys
from feed.models import Note
from tests.support.faults import wait_until

DESKTOP = {"width": 1280, "height": 900}
MOBILE = {"width": 390, "height": 844}

__all__ = [
    "DESKTOP",
    "MOBILE",
    "WORKER_TIMEOUT",
    "count_of",
    "follow_state",
    "inbox_id_set",
    "note_ids",
    "people_on_page",
    "unlabelled_controls",
    "wait_for_fan_out",
    "wait_for_synced_inbox",
    "wait_until",
]


def note_ids(page: Any) -> list[int]:
    """Ids of the notes shown on the page, top to bottom."""
    return [int(value) for value in page.locator("li.note").evaluate_all("items => items.map(i => i.dataset.noteId)")]


def people_on_page(page: Any) -> list[str]:
    """Usernames of a followers/following list page, top to bottom."""
    hrefs = page.locator("ol.follow-list .person a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    return [re.fullmatch(r"/u/([^/]+)/", href).group(1) for href in hrefs]  # type: ignore[union-attr]


def unlabelled_controls(page: Any) -> list[str]:
    """Visible form controls without an accessible name (label, aria-label or aria-labelledby)."""
    return page.evaluate(
        """() => Array.from(document.querySelectorAll('input, select, textarea, button'))
            .filter(el => el.type !== 'hidden' && el.offsetParent !== null)
            .filter(el => {
              if (el.tagName === 'BUTTON') return !el.textContent.trim() && !el.getAttribute('aria-label');
              return !(el.labels && el.labels.length) && !el.getAttribute('aria-label') && !el.getAttribute('aria-labelledby');
            })
            .map(el => el.outerHTML.slice(0, 120))"""
    )


def follow_state(page: Any) -> tuple[str, str]:
    """The follow button's (text, aria-pressed)."""
    button = page.locator("button.follow-button")
    return button.inner_text().strip(), button.get_attribute("aria-pressed") or ""


def count_of(page: Any, element_id: str) -> tuple[str, str]:
    """A count element's (shown text, exact number in its title)."""
    element = page.locator(f"#{element_id}")
    return element.inner_text().strip(), element.get_attribute("title") or ""


WORKER_TIMEOUT = 30.0  # seconds; a task normally lands in well under one


def inbox_id_set(user: Any) -> set[int]:
    """Note ids in ``user``'s Redis inbox (what fan-out wrote)."""
    members = cast("list[bytes]", get_redis().zrange(redis_keys.inbox_key(user.pk), 0, -1))
    return {int(member) for member in members}


def wait_for_synced_inbox(user: Any) -> None:
    """Until ``user``'s inbox is complete in Redis (the worker's rebuild, after a visit or sign-in)."""
    wait_until(lambda: get_redis().exists(redis_keys.inbox_synced_key(user.pk)), timeout=WORKER_TIMEOUT, what="synced inbox")


def wait_for_fan_out(note_ids_: list[int]) -> None:
    """Until the worker has fanned out every note in ``note_ids_``."""
    wait_until(
        lambda: Note.objects.filter(pk__in=note_ids_, fanned_out_at__isnull=False).count() == len(note_ids_),
        timeout=WORKER_TIMEOUT,
        what=f"fan-out of {len(note_ids_)} notes",
    )

"""Helpers of the browser journeys: waiting for the worker, reading pages, checking accessibility."""

from __future__ import annotations

import re
from typing import Any

from tests.social.faults import wait_until

__all__ = ["count_of", "follow_state", "note_ids", "people_on_page", "unlabelled_controls", "wait_until"]


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

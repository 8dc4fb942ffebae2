"""Fixtures of the feed tests: more active readers, publishing with fan-out run, synced inboxes.

The feed tests' personas are the root conftest's *active* ones (``active_alice``,
``active_bob``, ``active_charlie``: ``last_seen_at`` now): fan-out skips accounts
never seen (see ``feed.delivery.follower_batches``). ``follow`` and ``unfollow``
are the root conftest's too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from core.redis import redis_reset_breaker
from feed.rebuild import inbox_rebuild
from tests.support.accounts import make_user
from tests.support.feed import Publisher


@pytest.fixture
def people(db: Any) -> Callable[..., list[Any]]:
    """``people(n, active=True)``: n more users."""

    def build(n: int, *, active: bool = True, **fields: Any) -> list[Any]:
        return [make_user(active=active, **fields) for _ in range(n)]

    return build


@pytest.fixture
def publish() -> Publisher:
    """``publish(author, body="...", at_ms=None)``: note_create with its fan-out run (eager)."""
    return Publisher()


@pytest.fixture
def cast(active_alice: Any, active_bob: Any, active_charlie: Any, follow: Any, synced: Any) -> tuple[Any, Any, Any]:
    """alice follows bob and charlie, her inbox synced: ``(alice, bob, charlie)``."""
    follow(active_alice, active_bob)
    follow(active_alice, active_charlie)
    synced(active_alice)
    return active_alice, active_bob, active_charlie


@pytest.fixture
def synced(db: Any) -> Callable[[Any], None]:
    """``synced(user)``: rebuild the user's inbox so reads use Redis."""

    def run(user: Any) -> None:
        result = inbox_rebuild(user_id=user.pk)
        assert result.synced, "the reader must be active"

    return run


DEAD_REDIS = "redis://127.0.0.1:1/0"


@pytest.fixture
def redis_switch(settings: Any) -> Callable[[bool], None]:
    """``redis_switch(up: bool)``: point the cache at the real Redis or at a closed port."""
    live = settings.CACHES

    def switch(up: bool) -> None:
        if up:
            settings.CACHES = live
        else:
            settings.CACHES = {**live, "default": {**live["default"], "LOCATION": DEAD_REDIS}}
        redis_reset_breaker()

    return switch

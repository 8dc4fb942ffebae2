"""Fixtures of the feed tests: active personas, publishing and following with side effects run.

The personas here are *active* readers (``last_seen_at`` now): fan-out skips
accounts never seen (see ``feed.delivery.follower_batches``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

from feed import services
from feed.models import Note, from_ms
from feed.rebuild import inbox_rebuild
from social import services as social_services
from tests.feed.helpers import make_user


@pytest.fixture
def alice(db: Any) -> Any:
    """The follower persona, an active reader."""
    return make_user("alice")


@pytest.fixture
def bob(db: Any) -> Any:
    """The followee persona (an author), active."""
    return make_user("bob")


@pytest.fixture
def charlie(db: Any) -> Any:
    """The stranger persona, active."""
    return make_user("charlie")


@pytest.fixture
def people(db: Any) -> Callable[..., list[Any]]:
    """``people(n, active=True)``: n more users."""

    def build(n: int, *, active: bool = True, **fields: Any) -> list[Any]:
        return [make_user(active=active, **fields) for _ in range(n)]

    return build


@pytest.fixture
def follow(django_capture_on_commit_callbacks: Any) -> Callable[[Any, Any], None]:
    """``follow(a, b)``: a follows b, with the mirror and the feed backfill run."""

    def run(a: Any, b: Any) -> None:
        with django_capture_on_commit_callbacks(execute=True):
            social_services.follow_create(actor=a, followee_id=b.pk)

    return run


@pytest.fixture
def unfollow(django_capture_on_commit_callbacks: Any) -> Callable[[Any, Any], None]:
    """``unfollow(a, b)``: a stops following b, with the mirror and the inbox cleanup run."""

    def run(a: Any, b: Any) -> None:
        with django_capture_on_commit_callbacks(execute=True):
            social_services.follow_delete(actor=a, followee_id=b.pk)

    return run


@pytest.fixture
def publish(django_capture_on_commit_callbacks: Any) -> Callable[..., Note]:
    """``publish(author, body="...", at_ms=None)``: note_create with its fan-out run (eager)."""
    counter = iter(range(1, 10**9))

    def run(author: Any, body: str | None = None, *, at_ms: int | None = None, at: datetime | None = None) -> Note:
        created_at = from_ms(at_ms) if at_ms is not None else at
        with django_capture_on_commit_callbacks(execute=True):
            return services.note_create(author=author, body=body or f"note {next(counter)}", created_at=created_at)

    return run


@pytest.fixture
def synced(db: Any) -> Callable[[Any], None]:
    """``synced(user)``: rebuild the user's inbox so reads use Redis."""

    def run(user: Any) -> None:
        result = inbox_rebuild(user_id=user.pk)
        assert result.synced, "the reader must be active"

    return run

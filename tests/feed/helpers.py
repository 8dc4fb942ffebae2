"""Helpers shared by the feed tests."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from feed import redis_keys
from feed.rebuild import inbox_rebuild, synced_until
from tests.conftest import UserFactory


def make_user(username: str | None = None, *, active: bool = True, **fields: Any) -> Any:
    """A user; ``active`` readers were seen now and their (empty) inbox is synced, as after a
    sign-in, so fan-out delivers to them."""
    if username is not None:
        fields["username"] = username
    if active:
        fields.setdefault("last_seen_at", timezone.now())
    user = UserFactory(**fields)
    if active and synced_until(user.last_seen_at) is not None:
        inbox_rebuild(user_id=user.pk)
    return user


def inbox(client: Any, user: Any) -> list[tuple[bytes, int]]:
    """The inbox of ``user`` newest first: ``[(member, score_ms)]``."""
    return [(member, int(score)) for member, score in client.zrevrange(redis_keys.inbox_key(user.pk), 0, -1, withscores=True)]


def inbox_ids(client: Any, user: Any) -> list[int]:
    """Note ids in ``user``'s inbox, newest first."""
    return [int(member) for member, _ in inbox(client, user)]

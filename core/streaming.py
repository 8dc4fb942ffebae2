"""Publishing live events to the streaming process over Redis pub/sub: one JSON message per event
on a channel of ``core.redis_keys`` (a reader's user stream, a list stream or a pulled author's
channel). A message names the event and an id only; the streaming process reads the database
and formats the Mastodon entity for each reader when it sends, so what a message reaches is
checked against the graph then. Design: docs/architecture.md#live-updates-streaming.

Publishing is best effort: a message published while nobody listens, or while Redis is down, is
gone; a reader's stream replays from its last event id (the inbox read), so no note is lost.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

import redis

from .cluster import pipeline
from .redis import REDIS_ERRORS, redis_failed

UPDATE = "update"
DELETE = "delete"
NOTIFICATION = "notification"


@dataclass(frozen=True)
class Event:
    """A live event: ``kind`` (``update``, ``delete``, ``notification``) and the id of its note or notification."""

    kind: str
    object_id: int

    def encode(self) -> str:
        """The message text: ``{"event": kind, "id": object_id}``."""
        return json.dumps({"event": self.kind, "id": self.object_id})

    @classmethod
    def decode(cls, raw: bytes | str) -> Event | None:
        """The event of a message text, or None for a message of another shape."""
        try:
            data = json.loads(raw)
            return cls(kind=str(data["event"]), object_id=int(data["id"]))
        except (ValueError, TypeError, KeyError):
            return None


def publish(client: redis.Redis, channels: Iterable[str], event: Event) -> int:
    """PUBLISH ``event`` on every channel of ``channels`` (one pipeline); never raises for Redis.

    On a cluster a plain PUBLISH reaches the subscribers of every node, so the streaming
    process may listen on any one of them; the channels carry the reader's hash tag so a move
    to sharded pub/sub (SPUBLISH) keeps their names.

    :returns: the number of messages published (0 when Redis failed).
    """
    names = list(channels)
    if not names:
        return 0
    message = event.encode()
    try:
        pipe = pipeline(client)
        for name in names:
            pipe.publish(name, message)
        pipe.execute()
    except REDIS_ERRORS as exc:
        redis_failed(exc)
        return 0
    return len(names)

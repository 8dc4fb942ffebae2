"""The Redis keys the core owns; the only place that builds them.

- ``ff:mirror:sentinel``      STRING written when every app's mirror was rebuilt
  (``core.outbox.rebuild_locked``), holding the drain's last heartbeat (ms);
  its absence means Redis lost its data and readers use the database. On a
  cluster there is one per hash slot instead, ``ff:mirror:sentinel:{<tag>}``,
  the tag chosen to hash to that slot (``core.cluster.slot_tag``)
- ``ff:mirror:rebuild:lock``  STRING held (token, TTL) by the one background rebuild
- ``ff:stream:{<reader>}``     pub/sub channel of a reader's live events (``update``, ``delete``,
  ``notification``), read by the streaming process (``client_api.streams``)
- ``ff:stream:list:<list>:{<reader>}``  pub/sub channel of one list timeline of a reader
- ``ff:stream:author:{<author>}``  pub/sub channel of a pulled (big) author's ``update`` and
  ``delete`` events: their notes reach no inbox, so the streaming process listens here for
  the readers who follow that author and checks each event against the graph

``ff:`` is ``REDIS_KEY_PREFIX``, read at call time so tests can isolate.
"""

from __future__ import annotations

from django.conf import settings

from .cluster import slot_tag


def prefix() -> str:
    """The configured key prefix (``REDIS_KEY_PREFIX``), e.g. ``"ff:"``."""
    return str(settings.REDIS_KEY_PREFIX)


def sentinel_key() -> str:
    """STRING set when the mirror was fully built; missing means Redis lost data."""
    return f"{prefix()}mirror:sentinel"


def slot_sentinel_key(slot: int) -> str:
    """STRING on hash slot ``slot`` of a cluster: the mirror of that slot was fully built."""
    return f"{prefix()}mirror:sentinel:{{{slot_tag(slot)}}}"


def rebuild_lock_key() -> str:
    """STRING lock (token, TTL) held by the background rebuild after Redis lost its data."""
    return f"{prefix()}mirror:rebuild:lock"


def stream_channel(reader_id: int) -> str:
    """Pub/sub channel of ``reader_id``'s user stream, under the reader's hash tag."""
    return f"{prefix()}stream:{{{reader_id}}}"


def author_stream_channel(author_id: int) -> str:
    """Pub/sub channel of an author's notes as they reach its outbox (``update``) and leave
    (``delete``): list streams, and the user streams of a pulled author's followers, listen on it."""
    return f"{prefix()}stream:author:{{{author_id}}}"

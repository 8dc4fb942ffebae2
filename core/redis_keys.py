"""The Redis keys the core owns; the only place that builds them.

- ``ff:mirror:sentinel``      STRING written when every app's mirror was rebuilt
  (``core.outbox.rebuild_locked``); its absence means Redis lost its data and
  readers use the database
- ``ff:mirror:rebuild:lock``  STRING held (token, TTL) by the one background rebuild

``ff:`` is ``REDIS_KEY_PREFIX``, read at call time so tests can isolate.
"""

from __future__ import annotations

from django.conf import settings


def prefix() -> str:
    """The configured key prefix (``REDIS_KEY_PREFIX``), e.g. ``"ff:"``."""
    return str(settings.REDIS_KEY_PREFIX)


def sentinel_key() -> str:
    """STRING set when the mirror was fully built; missing means Redis lost data."""
    return f"{prefix()}mirror:sentinel"


def rebuild_lock_key() -> str:
    """STRING lock (token, TTL) held by the background rebuild after Redis lost its data."""
    return f"{prefix()}mirror:rebuild:lock"

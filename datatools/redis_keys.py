"""The Redis keys of the demo (``manage.py run_demo``); the only place that builds them.

- ``ff:demo:watermark``  STRING: the database fingerprint
  (``datatools.selectors.database_fingerprint``) the mirror was last warmed
  up from. With the sentinel, and no outbox entry pending, it says the
  mirror is current and a restart needs no warm-up.
- ``ff:demo:warmup``     HASH while a warm-up runs: ``stage``, ``done``,
  ``total``, ``started_ms``; it expires ``WARMUP_TTL_SECONDS`` after its
  last progress, so a killed warm-up leaves none behind. A failed warm-up
  leaves ``stage`` ``failed`` and its ``error``, without expiry, until the
  next warm-up.

``ff:`` is ``REDIS_KEY_PREFIX``, read at call time so tests can isolate.
"""

from __future__ import annotations

from core.redis_keys import prefix

# A warm-up writes progress at least this often (seconds): a few batches of accounts.
WARMUP_TTL_SECONDS = 60


def watermark_key() -> str:
    """STRING: the database fingerprint the mirror was warmed up from."""
    return f"{prefix()}demo:watermark"


def warmup_key() -> str:
    """HASH: the progress of the warm-up running now (``stage``, ``done``, ``total``, ``started_ms``)."""
    return f"{prefix()}demo:warmup"

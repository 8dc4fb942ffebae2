"""The Redis keys of the demo (``manage.py run_demo``); the only place that builds them.

``ff:demo:watermark`` (STRING): the database fingerprint the mirror was warmed up from.
``ff:demo:warmup`` (HASH ``stage``, ``done``, ``total``, ``started_ms``): a warm-up's progress,
expiring ``WARMUP_TTL_SECONDS`` after its last step; a failure leaves ``stage`` ``failed`` and ``error``.
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

"""Cursors in tests."""

from __future__ import annotations

import base64


def forged(text: str) -> str:
    """A cursor token around ``text`` (what a client forging one would send)."""
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()

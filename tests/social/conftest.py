"""Fixtures of the follow graph's tests."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def low_threshold(settings: Any) -> Any:
    """Shard at 10 followers into 4 shards; back to one key below 8."""
    settings.FOLLOWERS_SHARD_THRESHOLD = 10
    settings.FOLLOWERS_SHARDS = 4
    settings.FOLLOWERS_UNSHARD_RATIO = 0.8
    return settings

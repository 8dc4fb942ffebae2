"""Database connection checks paid only where they can catch something: after an idle spell.

Django's ``CONN_HEALTH_CHECKS`` pings a kept connection before the first query of every request,
a round trip per request. A connection that answered a request a moment ago is as good as the
ping would say, so ``skip_recent_health_checks`` marks it checked when its last request ended
less than ``DATABASE_HEALTH_CHECK_IDLE_SECONDS`` ago; one idle longer (where a server's
``wait_timeout``, a proxy or a restart may have closed it) is pinged as before, and replaced when
the ping fails.
"""

from __future__ import annotations

import time
from typing import Any
from weakref import WeakKeyDictionary

from django.conf import settings
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

# When each open connection's last request ended (time.monotonic() seconds), per process.
_finished_at: WeakKeyDictionary[BaseDatabaseWrapper, float] = WeakKeyDictionary()


def remember_request_end(**kwargs: Any) -> None:
    """``request_finished`` receiver: note when each connection still open was last used."""
    now = time.monotonic()
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None:
            _finished_at[connection] = now


def skip_recent_health_checks(**kwargs: Any) -> None:
    """``request_started`` receiver, after Django's ``close_old_connections``: a connection whose
    last request ended less than ``DATABASE_HEALTH_CHECK_IDLE_SECONDS`` ago is taken as checked."""
    now = time.monotonic()
    idle_limit = float(settings.DATABASE_HEALTH_CHECK_IDLE_SECONDS)
    for connection in connections.all(initialized_only=True):
        finished_at = _finished_at.get(connection)
        # health_check_enabled and health_check_done are Django's (5.1+), not in its stubs.
        if (
            getattr(connection, "health_check_enabled", False)
            and connection.connection is not None
            and finished_at is not None
            and now - finished_at < idle_limit
        ):
            setattr(connection, "health_check_done", True)  # noqa: B010

"""core.connections: a kept database connection is pinged before reuse only after an idle spell."""

from __future__ import annotations

from weakref import WeakKeyDictionary

import pytest
from django.core.signals import request_finished, request_started
from django.db import connections

import core.connections
from core.connections import skip_recent_health_checks
from users.models import User

# Real request signals run Django's close_old_connections, which drops a connection left
# inside a transaction: these tests run in autocommit, as requests do.
pytestmark = pytest.mark.django_db(transaction=True)

# The wrapper itself, not django.db.connection's proxy, so monkeypatch restores its attributes.
connection = connections["default"]


class Pings:
    """The pings a connection was given (each answered ``usable``)."""

    def __init__(self) -> None:
        self.answers: list[bool] = []
        self.usable = True

    def is_usable(self) -> bool:
        self.answers.append(self.usable)
        return self.usable


@pytest.fixture
def pings(monkeypatch: pytest.MonkeyPatch) -> Pings:
    """Production's connection settings (kept connections, health checks) on an open connection,
    its pings recorded."""
    recorded = Pings()
    # django.test.Client disconnects close_old_connections for each of its requests and connects it
    # again, after ours: put ours back after it, where core.apps put it and a server keeps it.
    request_started.disconnect(dispatch_uid="core.skip_recent_health_checks")
    request_started.connect(skip_recent_health_checks, dispatch_uid="core.skip_recent_health_checks")
    User.objects.count()  # a connection is open
    monkeypatch.setattr(core.connections, "_finished_at", WeakKeyDictionary())  # no request ended on it yet
    monkeypatch.setattr(connection, "close_at", None)  # kept (CONN_MAX_AGE)
    monkeypatch.setattr(connection, "health_check_enabled", True)  # CONN_HEALTH_CHECKS
    monkeypatch.setattr(connection, "is_usable", recorded.is_usable)
    return recorded


def a_request() -> int:
    request_started.send(sender=None)
    count = User.objects.count()
    request_finished.send(sender=None)
    return count


class TestHealthChecks:
    def test_a_connection_busy_a_moment_ago_is_not_pinged(self, pings, settings):
        settings.DATABASE_HEALTH_CHECK_IDLE_SECONDS = 60
        a_request()
        opened = connection.connection

        a_request()
        a_request()

        assert pings.answers == [True]  # the first request's: its connection had no request before
        assert connection.connection is opened

    def test_a_connection_idle_longer_is_pinged_before_reuse(self, pings, settings):
        settings.DATABASE_HEALTH_CHECK_IDLE_SECONDS = 0

        a_request()
        a_request()

        assert pings.answers == [True, True]

    def test_a_connection_that_fails_its_ping_is_replaced(self, pings, settings, django_user_model):
        settings.DATABASE_HEALTH_CHECK_IDLE_SECONDS = 0
        django_user_model.objects.create(username="kept")
        a_request()
        opened = connection.connection
        pings.usable = False

        count = a_request()

        assert pings.answers == [True, False]
        assert connection.connection is not opened
        assert count == 1

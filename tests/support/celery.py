"""The Celery app's configuration in tests: changed for a block, or pointed at a refusing broker."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from core.sender import flush_sends


@contextlib.contextmanager
def celery_conf(**values: Any) -> Iterator[Any]:
    """Inside the block the Celery app's configuration has ``values``; after it each key is as it
    was: the value set on the app before, or none (then the Django settings answer again, as
    pytest-django's ``settings`` fixture changes them). Assigning the old value back instead
    would pin it on the app for every later test.

    :returns: (as the block's value) the app.
    """
    from config.celery_app import app

    app.conf.task_always_eager  # noqa: B018 - finalizes the configuration (its ``changes`` layer)
    changes = app.conf.changes
    saved = {name: changes[name] for name in values if name in changes}
    app.conf.update(values)
    try:
        yield app
    finally:
        for name in values:
            if name in saved:
                changes[name] = saved[name]
            else:
                changes.pop(name, None)


@contextlib.contextmanager
def refusing_broker() -> Iterator[None]:
    """Inside the block, Celery sends to a broker that refuses connections, with no retries:
    every send fails at once with kombu's ``OperationalError`` (then the real broker again)."""
    refusing = {
        "task_always_eager": False,
        "broker_url": "amqp://guest:guest@127.0.0.1:1//",
        "broker_connection_retry": False,
        "broker_connection_max_retries": 0,
        "task_publish_retry": False,
    }
    with celery_conf(**refusing) as app:
        # Celery builds its connection and producer pools on first use: pools for the refusing broker.
        app._pool = None
        app.amqp._producer_pool = None
        try:
            yield
            flush_sends()  # what the block committed meets the refusing broker
        finally:
            app._pool = None
            app.amqp._producer_pool = None

"""Shared fixtures: factories, an isolated Redis prefix per test, personas.

Every test gets its own REDIS_KEY_PREFIX (``redis_isolated``, autouse), so
tests never see each other's keys, and the prefix's keys are unlinked
afterwards. The mirror's sentinel key is set so reads use Redis.

``--redis-cluster`` runs the session against a private 6-node Redis Cluster
(``tests.cluster``) instead of the Redis of the test settings.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import factory
import pytest
from django.test import Client, override_settings
from factory.declarations import LazyAttribute, Sequence

from core.cluster import cluster_nodes
from core.outbox import now_ms
from core.redis import forget_sentinel, get_redis, redis_reset_breaker, write_sentinels
from core.sender import flush_sends
from tests.cluster import RedisClusterNodes
from users.models import User


def pytest_addoption(parser: Any) -> None:
    parser.addoption("--redis-cluster", action="store_true", help="run against a private 6-node Redis Cluster")


def cluster_caches(base: dict[str, Any], url: str) -> dict[str, Any]:
    """``base`` (the CACHES setting) with the default cache on the cluster at ``url``."""
    options = {**base["default"]["OPTIONS"], "CONNECTION_FACTORY": "core.cluster.ClusterConnectionFactory", "CLUSTER_NODES": cluster_nodes(url)}
    return {**base, "default": {**base["default"], "LOCATION": url.split(",", maxsplit=1)[0], "OPTIONS": options}}


@pytest.fixture(scope="session", autouse=True)
def redis_backend(request: Any) -> Iterator[RedisClusterNodes | None]:
    """With ``--redis-cluster``: a private cluster for the whole session, which the settings point
    at (Celery workers started by tests get its URL through ``REDIS_URL``)."""
    if not request.config.getoption("--redis-cluster"):
        yield None
        return
    from django.conf import settings

    nodes = RedisClusterNodes()
    nodes.start()
    try:
        with override_settings(CACHES=cluster_caches(settings.CACHES, nodes.url), REDIS_URL=nodes.url, REDIS_CLUSTER=True):
            yield nodes
    finally:
        nodes.stop()


class UserFactory(factory.django.DjangoModelFactory[User]):
    class Meta:
        model = User
        skip_postgeneration_save = True

    username = Sequence(lambda n: f"user{n}")
    display_name = LazyAttribute(lambda o: o.username.title())
    password = factory.django.Password("pw")
    is_active = True


def unlink_prefix(client: Any, prefix: str) -> int:
    """Unlink every key under ``prefix`` (SCAN, never KEYS); returns how many."""
    removed = 0
    batch: list[bytes] = []
    for key in client.scan_iter(match=f"{prefix}*", count=1000):
        batch.append(key)
        if len(batch) >= 500:
            removed += client.unlink(*batch)
            batch = []
    if batch:
        removed += client.unlink(*batch)
    return removed


@pytest.fixture(autouse=True)
def redis_isolated(settings: Any) -> Iterator[str]:
    """A fresh key prefix for this test; its keys are removed afterwards."""
    prefix = f"test:{uuid.uuid4().hex[:12]}:"
    settings.REDIS_KEY_PREFIX = prefix
    # The Django caches (the abuse limits count in them) under the same prefix.
    settings.CACHES = {**settings.CACHES, "default": {**settings.CACHES["default"], "KEY_PREFIX": f"{prefix}cache"}}
    redis_reset_breaker()
    forget_sentinel()
    client = get_redis()
    write_sentinels(client, now_ms())
    yield prefix
    redis_reset_breaker()
    forget_sentinel()
    # The client from set-up: a test may have pointed settings at a dead Redis.
    unlink_prefix(client, prefix)


@pytest.fixture
def user_factory() -> type[UserFactory]:
    return UserFactory


@pytest.fixture
def alice(db: Any) -> User:
    """The follower persona."""
    return UserFactory.create(username="alice")


@pytest.fixture
def bob(db: Any) -> User:
    """The followee persona."""
    return UserFactory.create(username="bob")


@pytest.fixture
def charlie(db: Any) -> User:
    """The stranger persona (for permission tests)."""
    return UserFactory.create(username="charlie")


@pytest.fixture
def run_commits(django_capture_on_commit_callbacks: Any) -> Any:
    """``run_commits(action)``: run ``action()`` and its after-commit work, as a request would;
    returns what ``action`` returned."""

    def run(action: Any) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return action()

    return run


def signed_in(user: Any) -> Client:
    """A test client signed in as ``user``."""
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def redis_client() -> Any:
    return get_redis()


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

"""Shared fixtures: factories, an isolated Redis prefix per test, personas.

Every test that uses a service is marked ``services`` at collection
(``pytest_collection_modifyitems``): one that uses the database (the
``django_db`` marker or a database fixture), Redis (``redis_client``) or a
broker and worker (the ``worker``, ``replica`` and ``browser`` markers).
``-m "not services"`` runs the rest with no MariaDB, Redis or RabbitMQ.

Every ``services`` test gets its own REDIS_KEY_PREFIX (``redis_isolated``,
autouse; a test with the database reaches Redis through the application),
so tests never see each other's keys, and the prefix's keys are unlinked
afterwards. The mirror's sentinel key is set so reads use Redis. The other
tests never connect to Redis.

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


# A test with one of these markers or fixtures uses MariaDB, Redis or RabbitMQ (and a worker).
SERVICE_MARKERS = frozenset({"django_db", "worker", "replica", "browser"})
SERVICE_FIXTURES = frozenset(
    {
        "db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback", "django_db_setup",
        "live_server", "admin_user", "admin_client", "redis_client",
    }
)


def uses_services(item: Any) -> bool:
    """Whether ``item`` uses the database, Redis or a broker (its markers and fixture closure)."""
    if any(item.get_closest_marker(name) for name in SERVICE_MARKERS):
        return True
    return bool(SERVICE_FIXTURES.intersection(getattr(item, "fixturenames", ())))


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """Mark every test that uses a service ``services`` (see the module docstring)."""
    for item in items:
        if item.get_closest_marker("services") is None and uses_services(item):
            item.add_marker(pytest.mark.services)


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


@pytest.fixture(scope="session", autouse=True)
def process_logs(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The logs of the workers and servers tests start go to this session's temporary directory."""
    from tests.social import faults

    faults.LOG_DIR = tmp_path_factory.mktemp("process-logs")


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
def redis_isolated(request: Any) -> Iterator[str | None]:
    """A fresh key prefix for this ``services`` test; its keys are removed afterwards.

    A test without services gets none (``None``) and no connection to Redis.
    """
    if request.node.get_closest_marker("services") is None:
        yield None
        return
    settings = request.getfixturevalue("settings")
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

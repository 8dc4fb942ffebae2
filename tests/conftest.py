"""Shared fixtures: factories, an isolated Redis prefix per test, personas, follow, a worker.

Fixtures are defined in conftest files only (here, or a layer's for its own tests), each
name with one meaning across the suite; the helpers they use, and tests import, are plain
functions in ``tests.support`` (nothing imports this module). The personas ``alice``,
``bob`` and ``charlie`` are never-seen accounts; ``active_alice``, ``active_bob`` and
``active_charlie`` are the same people as active readers (the feed tests use them).

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

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.test import Client, override_settings

from core import redis_keys as core_keys
from core.cluster import cluster_nodes
from core.outbox import now_ms
from core.redis import forget_sentinel, get_redis, redis_reset_breaker, write_sentinels
from tests.cluster import RedisClusterNodes
from tests.support import graph
from tests.support.accounts import UserFactory, make_user, signed_in
from tests.support.broker import broker_turn as turn_on_the_broker
from tests.support.celery import celery_conf
from tests.support.faults import CeleryWorker, RedisServer, point_at, purge_queue
from tests.support.redis import unlink_prefix
from users.account_rows import forget_kept
from users.models import User


def pytest_addoption(parser: Any) -> None:
    parser.addoption("--redis-cluster", action="store_true", help="run against a private 6-node Redis Cluster")


# A test with one of these markers or fixtures uses MariaDB, Redis or RabbitMQ (and a worker).
SERVICE_MARKERS = frozenset({"django_db", "worker", "replica", "browser"})
SERVICE_FIXTURES = frozenset(
    {
        "db",
        "transactional_db",
        "django_db_reset_sequences",
        "django_db_serialized_rollback",
        "django_db_setup",
        "live_server",
        "admin_user",
        "admin_client",
        "redis_client",
    }
)


def uses_services(item: Any) -> bool:
    """Whether ``item`` uses the database, Redis or a broker (its markers and fixture closure)."""
    if any(item.get_closest_marker(name) for name in SERVICE_MARKERS):
        return True
    return bool(SERVICE_FIXTURES.intersection(getattr(item, "fixturenames", ())))


# The fixtures of a test that talks to the machine's RabbitMQ (the e2e ones: tests/e2e/conftest.py).
BROKER_FIXTURES = frozenset({"queue", "worker", "celery_worker", "stack"})


def uses_broker(item: Any) -> bool:
    """Whether ``item`` talks to the machine's RabbitMQ: marked ``broker`` or ``worker``, or a
    broker fixture in its closure."""
    if item.get_closest_marker("broker") or item.get_closest_marker("worker"):
        return True
    return bool(BROKER_FIXTURES.intersection(getattr(item, "fixturenames", ())))


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """Mark every test that uses a service ``services`` (see the module docstring), and every
    test that talks to the machine's RabbitMQ ``broker`` (``broker_turn``)."""
    for item in items:
        if item.get_closest_marker("services") is None and uses_services(item):
            item.add_marker(pytest.mark.services)
        if uses_broker(item):
            item.add_marker(pytest.mark.broker)


@pytest.fixture(autouse=True)
def broker_turn(request: Any) -> Iterator[None]:
    """A ``broker`` test holds the machine's RabbitMQ shared while it runs, a ``broker_outage`` one
    (the soak test, which stops it) alone: across pytest-xdist's processes (``tests.support.broker``)."""
    if request.node.get_closest_marker("broker") is None:
        yield
        return
    with turn_on_the_broker(alone=request.node.get_closest_marker("broker_outage") is not None):
        yield


def cluster_caches(base: dict[str, Any], url: str) -> dict[str, Any]:
    """``base`` (the CACHES setting) with the default cache on the cluster at ``url``."""
    options = {
        **base["default"]["OPTIONS"],
        "CONNECTION_FACTORY": "core.cluster.ClusterConnectionFactory",
        "CLUSTER_NODES": cluster_nodes(url),
    }
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
def jinja2_rendering_signals() -> Iterator[None]:
    """The test client's ``response.context`` for Jinja2 pages too: Django's test set-up instruments
    only its own template language. A page's context is sent before its rows' (rendered inside it),
    so a name the page and a row both use finds the page's."""
    from django.template.backends import jinja2 as backend
    from django.test.signals import template_rendered

    render = backend.Template.render

    def instrumented(self: Any, context: dict[str, Any] | None = None, request: Any = None) -> str:
        context = {} if context is None else context
        template_rendered.send(sender=self, template=self, context=context)
        return render(self, context, request)

    backend.Template.render = instrumented  # type: ignore[method-assign]
    yield
    backend.Template.render = render  # type: ignore[method-assign]


@pytest.fixture(scope="session", autouse=True)
def process_logs(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The logs of the workers and servers tests start go to this session's temporary directory."""
    from tests.support import faults

    faults.LOG_DIR = tmp_path_factory.mktemp("process-logs")


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
    forget_kept()  # kept rows name tokens of another prefix; and ids repeat on SQLite
    client = get_redis()
    write_sentinels(client, now_ms())
    yield prefix
    redis_reset_breaker()
    forget_sentinel()
    # The client from set-up: a test may have pointed settings at a dead Redis.
    unlink_prefix(client, prefix)


@pytest.fixture
def private_redis(settings: Any, redis_isolated: str | None) -> Iterator[RedisServer]:
    """A redis-server of this test's own, which the application uses, with the sentinel set: a
    test may kill, pause or restart it (``tests.support.faults``)."""
    server = RedisServer()
    server.start()
    point_at(settings, server)
    server.client().set(core_keys.sentinel_key(), now_ms())
    redis_reset_breaker()
    yield server
    server.stop()
    redis_reset_breaker()


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


# The personas as active readers (``last_seen_at`` now, inbox synced): fan-out skips accounts
# never seen (see ``feed.delivery.follower_batches``), so the feed tests use these.


@pytest.fixture
def active_alice(db: Any) -> User:
    """The follower persona, an active reader."""
    return make_user("alice")


@pytest.fixture
def active_bob(db: Any) -> User:
    """The followee persona (an author), active."""
    return make_user("bob")


@pytest.fixture
def active_charlie(db: Any) -> User:
    """The stranger persona, active."""
    return make_user("charlie")


@pytest.fixture
def superuser(db: Any) -> User:
    """A superuser (staff)."""
    return UserFactory.create(username="root", is_staff=True, is_superuser=True)


@pytest.fixture
def superuser_client(superuser: User) -> Client:
    """A test client signed in as ``superuser``."""
    return signed_in(superuser)


@pytest.fixture
def run_commits(django_capture_on_commit_callbacks: Any) -> Any:
    """``run_commits(action)``: run ``action()`` and its after-commit work, as a request would;
    returns what ``action`` returned."""

    def run(action: Any) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return action()

    return run


@pytest.fixture
def redis_client() -> Any:
    return get_redis()


@pytest.fixture
def follow() -> Callable[[Any, Any], None]:
    """``follow(a, b)``: ``a`` follows ``b`` through the service, after-commit work run
    (``tests.support.graph.follow``)."""
    return graph.follow


@pytest.fixture
def unfollow() -> Callable[[Any, Any], None]:
    """``unfollow(a, b)``: ``a`` stops following ``b`` through the service, after-commit work run
    (``tests.support.graph.unfollow``)."""
    return graph.unfollow


@pytest.fixture
def queue() -> Iterator[str]:
    """A queue of this test's own; the test process sends its tasks there instead of running them."""
    from config.celery_app import app

    name = f"ff_feed_{uuid.uuid4().hex[:10]}"
    # Fresh broker connections: one the server closed while earlier tests ran (missed
    # heartbeats) would refuse this test's first message.
    app._pool = None
    app.amqp._producer_pool = None
    with celery_conf(task_always_eager=False, task_default_queue=name):
        yield name
    purge_queue(name)


@pytest.fixture
def worker(queue: str) -> Iterator[Callable[..., CeleryWorker]]:
    """``worker(**env)``: start a worker on this test's queue with extra settings in ``env``."""
    from django.conf import settings

    started: list[CeleryWorker] = []

    def start(**env: str) -> CeleryWorker:
        process = CeleryWorker(queue=queue, redis_url=str(settings.REDIS_URL), extra_env=env)
        started.append(process)
        process.start()
        return process

    yield start
    for process in started:
        process.stop()

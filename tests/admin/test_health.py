"""The mirror health page: figures from the database, Redis and the broker, and never a hang.

Only holders of ``core.view_outboxentry`` (superusers, operators) see it
(see test_permissions); here the superuser reads its figures, including
while Redis or the broker is unreachable or the broker never answers.
"""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import redis
from django.utils import timezone

from core import health
from core.models import OutboxEntry
from core.redis import all_sentinel_keys, get_redis, watched_servers
from social.models import OUTBOX_PAIR
from social.reconcile import reconcile_run
from tests.support.faults import free_port

pytestmark = pytest.mark.django_db
HEALTH = "/admin/core/outboxentry/health/"


@pytest.fixture
def silent_broker() -> Iterator[int]:
    """A TCP port that accepts connections and never says a word (a hung broker)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for connection in accepted:
        connection.close()
    server.close()


class TestOutboxBacklog:
    def test_counts_pending_entries_and_the_oldest_age(self, superuser_client: Any) -> None:
        old = timezone.now() - timedelta(minutes=5)
        OutboxEntry.objects.create(kind=OUTBOX_PAIR, subject_id=1, object_id=2, created_at=old)
        OutboxEntry.objects.create(kind=OUTBOX_PAIR, subject_id=3, object_id=4, last_error="ConnectionError")
        OutboxEntry.objects.create(kind=OUTBOX_PAIR, subject_id=5, object_id=6, applied_at=timezone.now())

        response = superuser_client.get(HEALTH)

        outbox = response.context["health"].outbox
        assert response.status_code == 200
        assert (outbox.pending, outbox.stuck) == (2, 1)
        assert [(kind.kind, kind.pending, kind.stuck) for kind in outbox.kinds] == [(str(OUTBOX_PAIR), 2, 1)]
        assert b"<tr><td>social.pair</td><td>2</td><td>1</td>" in response.content
        assert outbox.oldest_created_at == old
        assert 300 <= outbox.oldest_age_seconds < 400

    def test_empty_backlog(self, superuser_client: Any) -> None:
        outbox = superuser_client.get(HEALTH).context["health"].outbox

        assert (outbox.pending, outbox.oldest_created_at) == (0, None)


class TestRedisFigures:
    def test_reports_memory_and_key_counts(self, superuser_client: Any, redis_client: Any, redis_isolated: str) -> None:
        redis_client.set(f"{redis_isolated}extra", "1")

        figures = superuser_client.get(HEALTH).context["health"].redis

        assert figures.reachable and figures.breaker_closed
        assert figures.used_memory_bytes > 0
        assert figures.dbsize >= 2
        assert figures.sentinel_present is True
        assert figures.prefix == redis_isolated
        if figures.prefix_scan_complete:
            # "extra", the admin's session (core.sessions), its account's version token
            # (users.account_rows) and the sentinels: one on one server, one per master's run of
            # slots on a cluster.
            assert figures.prefix_keys_seen == 3 + len(all_sentinel_keys(redis_client))
        assert figures.keys_examined > 0

    def test_unreachable_redis_is_shown_not_raised(self, superuser_client: Any, monkeypatch: Any) -> None:
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        dead = redis.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
        monkeypatch.setattr(health, "get_redis", lambda: dead)

        response = superuser_client.get(HEALTH)

        figures = response.context["health"].redis
        assert response.status_code == 200
        assert figures.reachable is False
        assert "ConnectionError" in figures.error


class TestBrokerFigures:
    def test_eager_mode_says_so(self, superuser_client: Any, settings: Any) -> None:
        settings.CELERY_TASK_ALWAYS_EAGER = True

        response = superuser_client.get(HEALTH)

        assert response.context["health"].broker.eager is True
        assert b"eager mode" in response.content

    @pytest.mark.broker
    def test_reads_queue_lengths_from_the_real_broker(self, superuser_client: Any, settings: Any) -> None:
        settings.CELERY_TASK_ALWAYS_EAGER = False
        settings.CELERY_BROKER_URL = "amqp://guest:guest@127.0.0.1:5672//"
        # A queue of this test's own (not the shared "celery"), deleted afterwards.
        settings.CELERY_TASK_DEFAULT_QUEUE = queue = f"test-health-{uuid.uuid4().hex[:10]}"
        from kombu.connection import Connection

        with Connection(settings.CELERY_BROKER_URL, connect_timeout=2) as connection:
            channel = connection.channel()
            channel.queue_declare(queue=queue, durable=True, auto_delete=False)
            channel.close()
            try:
                broker = superuser_client.get(HEALTH).context["health"].broker
            finally:
                channel = connection.channel()
                channel.queue_delete(queue)
                channel.close()

        assert broker.error == ""
        assert broker.url == "amqp://guest:**@127.0.0.1:5672//"
        assert [q.name for q in broker.queues] == [queue]
        assert broker.queues[0].error == "" and broker.queues[0].messages == 0

    def test_a_broker_that_refuses_connections_is_an_error_line(self, superuser_client: Any, settings: Any) -> None:
        settings.CELERY_TASK_ALWAYS_EAGER = False
        settings.CELERY_BROKER_URL = f"amqp://guest:guest@127.0.0.1:{free_port()}//"

        response = superuser_client.get(HEALTH)

        assert response.status_code == 200
        assert response.context["health"].broker.error
        assert b"unreachable" in response.content

    def test_a_broker_that_never_answers_does_not_hang_the_page(
        self, superuser_client: Any, settings: Any, silent_broker: int, monkeypatch: Any
    ) -> None:
        monkeypatch.setattr(health, "BROKER_TIMEOUT_SECONDS", 0.3)
        settings.CELERY_TASK_ALWAYS_EAGER = False
        settings.CELERY_BROKER_URL = f"amqp://guest:guest@127.0.0.1:{silent_broker}//"

        response = superuser_client.get(HEALTH)

        assert response.status_code == 200
        assert response.context["health"].broker.error


class TestReconcileFigures:
    def test_shows_the_newest_whole_graph_run_not_single_accounts(self, superuser_client: Any, alice: Any) -> None:
        whole, _ = reconcile_run()
        reconcile_run(user_id=alice.pk)

        figures = superuser_client.get(HEALTH).context["health"].sections["reconcile"]

        assert figures.state == "finished"
        assert figures.started_at == whole.started_at
        assert dict(figures.figures)["users_checked"] == whole.users_checked
        assert dict(figures.figures)["edges_missing"] == 0

    def test_no_run_yet(self, superuser_client: Any) -> None:
        figures = superuser_client.get(HEALTH).context["health"].sections["reconcile"]

        assert figures.figures == []
        assert "no reconcile" in figures.note


class TestFeedAndRestartFigures:
    def test_shows_the_last_inbox_reconcile_and_the_redis_watch(self, alice: Any, superuser_client: Any) -> None:
        from core.outbox import drain
        from feed.reconcile import reconcile_inboxes_run
        from tests.support.accounts import make_user

        make_user("reader")
        reconcile_inboxes_run()
        drain()

        response = superuser_client.get("/admin/core/outboxentry/health/")

        health = response.context["health"]
        assert health.sections["inbox_reconcile"].state == "finished"
        assert ("readers_checked", 1) in health.sections["inbox_reconcile"].figures
        # One watch per server: the one Redis, or every master of a cluster.
        assert [(watch.seen, watch.rollbacks) for watch in health.watches] == [(True, 0)] * len(watched_servers(get_redis()))
        assert b"Inbox reconcile" in response.content and b"Redis restarts" in response.content

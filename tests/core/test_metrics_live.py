"""/metrics on a live stack: a real Celery worker (its own queue), RabbitMQ, MariaDB and Redis.

The scrape shows a note's fan-out (its lag, recorded by the worker into the
shared multiprocess directory), then, with the worker stopped, the outbox
backlog and its oldest age rising, and both falling back to 0 once a worker
is back. Without the token the endpoint refuses.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from core.sender import flush_sends
from feed import services as feed_services
from social import services as social_services
from tests.support.accounts import make_user
from tests.support.faults import wait_for_worker, wait_until
from tests.support.feed import fanned_out

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

TOKEN = "live-metrics-token"
TIMEOUT = 60
# The worker's drain takes entries this old (str: an environment value), well within TIMEOUT / 4.
GRACE = "5"


def scrape() -> dict[str, list[tuple[dict[str, str], float]]]:
    """``{sample name: [(labels, value)]}`` of one authorised scrape."""
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200, response.content[:500]
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


def total(figures: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    return sum(value for found, value in figures.get(name, []) if all(found.get(k) == v for k, v in labels.items()))


def drained_scrape() -> dict[str, list[tuple[dict[str, str], float]]] | None:
    """A scrape that shows no pending entry, else None."""
    figures = scrape()
    return figures if total(figures, "followfeed_outbox_pending") == 0 else None


def oldest(figures: dict[str, list[tuple[dict[str, str], float]]]) -> float:
    return max((value for _, value in figures.get("followfeed_outbox_oldest_age_seconds", [])), default=0.0)


@pytest.fixture
def metrics_stack(settings: Any, queue: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """Scrapes see the broker's queue of this test and the worker's metrics files; returns the files' directory."""
    settings.METRICS_TOKEN = TOKEN
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.CELERY_TASK_DEFAULT_QUEUE = queue
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    return str(tmp_path)


class TestMetricsOnALiveStack:
    def test_backlog_and_oldest_age_rise_while_the_worker_is_stopped_and_fall_when_it_is_back(
        self, metrics_stack: str, worker: Any, queue: str
    ) -> None:
        running = worker(PROMETHEUS_MULTIPROC_DIR=metrics_stack, OUTBOX_TASK_GRACE_SECONDS=GRACE)
        refused = Client().get("/metrics")
        bob, alice = make_user("bob"), make_user("alice")
        social_services.follow_create(actor=alice, followee_id=bob.pk)
        first = feed_services.note_create(author=bob, body="first")
        flush_sends()
        wait_for_worker(lambda: fanned_out(first), queue=queue, timeout=TIMEOUT, what="the first fan-out")
        delivered = wait_until(drained_scrape, timeout=TIMEOUT, what="the backlog drained")

        running.kill()
        notes = [feed_services.note_create(author=bob, body=f"while stopped {index}") for index in range(3)]
        flush_sends()
        stopped = scrape()
        time.sleep(2)
        later = scrape()
        worker(PROMETHEUS_MULTIPROC_DIR=metrics_stack, OUTBOX_TASK_GRACE_SECONDS=GRACE)
        wait_for_worker(lambda: fanned_out(*notes), queue=queue, timeout=TIMEOUT, what="the fan-outs after the restart")
        back = wait_until(drained_scrape, timeout=TIMEOUT, what="the backlog drained again")

        assert refused.status_code == 401
        assert refused.json() == {"error": "A scrape needs the metrics token (Authorization: Bearer ...)."}
        # The worker's observation of the first delivery, read from the shared directory.
        assert total(delivered, "followfeed_fanout_lag_seconds_count", mode="push") == 1
        assert total(delivered, "followfeed_outbox_pending") == 0
        assert oldest(delivered) == 0
        # Stopped: the three notes' entries pend, their messages wait in the queue, the oldest ages.
        assert total(stopped, "followfeed_outbox_pending", kind="feed.note") == 3
        assert total(stopped, "followfeed_celery_queue_messages", queue=queue) >= 1
        assert 0 < oldest(stopped) < oldest(later) - 1.5
        assert total(later, "followfeed_outbox_pending", kind="feed.note") == 3
        # Back: drained, and the worker observed three more deliveries.
        assert total(back, "followfeed_outbox_pending") == 0
        assert oldest(back) == 0
        assert total(back, "followfeed_fanout_lag_seconds_count", mode="push") == 4

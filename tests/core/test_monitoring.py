"""/metrics (core.monitoring, core.metrics): who may scrape, and the figures it shows."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import OperationalError
from django.test import Client
from django.utils import timezone
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from core import health, limits
from core.models import OutboxEntry
from core.redis import redis_failed, redis_reset_breaker
from feed import services as feed_services
from social import services as social_services
from social.models import OUTBOX_PAIR, ReconcileRun
from tests.support.accounts import make_user

pytestmark = pytest.mark.django_db

TOKEN = "s3cret-metrics-token"


def scrape(client: Client | None = None, /, **headers: Any) -> Any:
    return (client or Client()).get("/metrics", **headers)


def samples(response: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``{(name, sorted labels): value}`` of an exposition."""
    found = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(response: Any, name: str, **labels: str) -> float | None:
    return samples(response).get((name, tuple(sorted(labels.items()))))


@pytest.fixture
def token(settings: Any) -> str:
    settings.METRICS_TOKEN = TOKEN
    settings.METRICS_ALLOWED_NETWORKS = []
    return f"Bearer {TOKEN}"


class TestWhoMayScrape:
    def test_off_without_a_token_or_networks(self, settings: Any) -> None:
        settings.METRICS_TOKEN = ""
        settings.METRICS_ALLOWED_NETWORKS = []

        response = scrape()

        assert response.status_code == 404
        assert response.json() == {"error": "Metrics are not enabled (METRICS_TOKEN or METRICS_ALLOWED_NETWORKS)."}

    @pytest.mark.parametrize("given", [None, "Bearer wrong", TOKEN, f"Basic {TOKEN}"])
    def test_refused_without_the_token(self, token: str, given: str | None) -> None:
        response = scrape(**({"HTTP_AUTHORIZATION": given} if given else {}))

        assert response.status_code == 401
        assert response.json() == {"error": "A scrape needs the metrics token (Authorization: Bearer ...)."}
        assert response["WWW-Authenticate"] == 'Bearer realm="metrics"'

    def test_the_token_scrapes(self, token: str) -> None:
        response = scrape(HTTP_AUTHORIZATION=token)

        assert response.status_code == 200
        assert response["Content-Type"].startswith("text/plain; version=")
        assert value(response, "followfeed_celery_broker_up") == 1.0

    def test_a_write_method_is_refused(self, token: str) -> None:
        assert Client().post("/metrics", HTTP_AUTHORIZATION=token).status_code == 405

    def test_an_allowed_network_behind_the_proxy(self, settings: Any) -> None:
        settings.METRICS_TOKEN = ""
        settings.METRICS_ALLOWED_NETWORKS = ["192.0.2.0/24"]
        settings.TRUSTED_PROXY_COUNT = 1

        inside = scrape(Client(REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="192.0.2.10"))
        spoofed = scrape(Client(REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="192.0.2.10, 203.0.113.5"))

        assert inside.status_code == 200
        assert spoofed.status_code == 401


class TestOutboxFigures:
    def test_pending_oldest_age_and_stuck_per_kind(self, token: str) -> None:
        old = timezone.now() - timedelta(minutes=10)
        OutboxEntry.objects.create(kind=OUTBOX_PAIR, subject_id=1, object_id=2, created_at=old)
        OutboxEntry.objects.create(kind=OUTBOX_PAIR, subject_id=3, object_id=4, last_error="ConnectionError")
        OutboxEntry.objects.create(kind="feed.note", subject_id=5, applied_at=timezone.now())

        response = scrape(HTTP_AUTHORIZATION=token)

        assert value(response, "followfeed_outbox_pending", kind=OUTBOX_PAIR) == 2
        assert value(response, "followfeed_outbox_stuck", kind=OUTBOX_PAIR) == 1
        assert 600 <= value(response, "followfeed_outbox_oldest_age_seconds", kind=OUTBOX_PAIR) < 700  # type: ignore[operator]
        # A registered kind with nothing pending is there, at 0.
        assert value(response, "followfeed_outbox_pending", kind="feed.note") == 0
        assert value(response, "followfeed_outbox_oldest_age_seconds", kind="feed.note") == 0


class TestReconcileFigures:
    def test_the_last_finished_run_when_how_long_and_drift(self, token: str) -> None:
        started = timezone.now() - timedelta(hours=2)
        ReconcileRun.objects.create(
            started_at=started, finished_at=started + timedelta(seconds=90), users_drifted=2, controls_drifted=1
        )

        response = scrape(HTTP_AUTHORIZATION=token)

        assert value(response, "followfeed_reconcile_last_finished_timestamp_seconds", kind="graph") == pytest.approx(
            (started + timedelta(seconds=90)).timestamp()
        )
        assert value(response, "followfeed_reconcile_last_duration_seconds", kind="graph") == 90
        assert value(response, "followfeed_reconcile_last_drift", kind="graph") == 3
        assert value(response, "followfeed_reconcile_last_failed", kind="graph") == 0
        # Kinds that never ran: no time (the "did not run" alert fires on absence), not failed.
        assert value(response, "followfeed_reconcile_last_finished_timestamp_seconds", kind="inboxes") is None
        assert value(response, "followfeed_reconcile_last_failed", kind="inboxes") == 0

    def test_a_failed_newest_run_keeps_the_last_finished_time(self, token: str) -> None:
        done = timezone.now() - timedelta(days=1)
        ReconcileRun.objects.create(started_at=done - timedelta(seconds=10), finished_at=done)
        ReconcileRun.objects.create(started_at=timezone.now() - timedelta(minutes=5), error="OperationalError")

        response = scrape(HTTP_AUTHORIZATION=token)

        assert value(response, "followfeed_reconcile_last_failed", kind="graph") == 1
        assert value(response, "followfeed_reconcile_last_finished_timestamp_seconds", kind="graph") == pytest.approx(
            done.timestamp()
        )
        assert value(response, "followfeed_reconcile_last_drift", kind="graph") is None


def recorded(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


class TestRecordedFigures:
    def test_a_refusal_is_counted_per_limit(self, settings: Any, token: str) -> None:
        settings.NOTE_RATE = "1/h"
        before = recorded("followfeed_rate_limit_refusals_total", limit="notes")
        limits.hit("notes", "metrics-test", "NOTE_RATE", message="")

        with pytest.raises(limits.RateLimited):
            limits.hit("notes", "metrics-test", "NOTE_RATE", message="")

        assert recorded("followfeed_rate_limit_refusals_total", limit="notes") == before + 1
        assert value(scrape(HTTP_AUTHORIZATION=token), "followfeed_rate_limit_refusals_total", limit="notes") == before + 1

    def test_the_breaker_state_per_node(self, token: str) -> None:
        redis_failed(ConnectionError("down"), "10.0.0.9:7000")
        opened = value(scrape(HTTP_AUTHORIZATION=token), "followfeed_redis_breaker_open", node="10.0.0.9:7000")
        redis_reset_breaker()

        assert opened == 1
        assert recorded("followfeed_redis_breaker_open", node="10.0.0.9:7000") == 0

    def test_a_fan_out_observes_its_lag(self, run_commits: Any) -> None:
        bob, alice = make_user("bob"), make_user("alice")
        run_commits(lambda: social_services.follow_create(actor=alice, followee_id=bob.pk))
        # The histogram is the process's own: earlier tests' fan-outs (some held back on purpose) are in it.
        before = recorded("followfeed_fanout_lag_seconds_count", mode="push")
        within_five_before = recorded("followfeed_fanout_lag_seconds_bucket", mode="push", le="5.0")

        run_commits(lambda: feed_services.note_create(author=bob, body="hello"))

        assert recorded("followfeed_fanout_lag_seconds_count", mode="push") == before + 1
        assert recorded("followfeed_fanout_lag_seconds_bucket", mode="push", le="5.0") == within_five_before + 1

    def test_django_prometheus_counts_requests(self, token: str) -> None:
        Client().get("/login/")

        response = scrape(HTTP_AUTHORIZATION=token)

        assert (value(response, "django_http_requests_total_by_method_total", method="GET") or 0) >= 1


class TestADatabaseOutage:
    def test_the_scrape_still_answers_and_names_what_it_could_not_read(self, token: str, monkeypatch: pytest.MonkeyPatch) -> None:
        def down() -> None:
            raise OperationalError(2013, "Lost connection to server during query")

        monkeypatch.setattr(health, "outbox_health", down)

        response = scrape(HTTP_AUTHORIZATION=token)

        assert response.status_code == 200
        assert value(response, "followfeed_scrape_failed", section="outbox") == 1
        assert value(response, "followfeed_scrape_failed", section="reconciles") == 0
        assert value(response, "followfeed_outbox_pending", kind=OUTBOX_PAIR) is None
        assert value(response, "followfeed_celery_broker_up") == 1

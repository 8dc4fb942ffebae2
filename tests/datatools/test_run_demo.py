"""run_demo's warm-up banner: every HTML page says a warm-up is running (or failed), nothing else changes;
and its outbox drain: what a request leaves pending is applied without a restart, as beat would."""

from __future__ import annotations

from typing import Any

import pytest

from datatools import redis_keys
from datatools.management.commands.run_demo import WarmupBanner, banner_html, start_drain, with_banner
from datatools.selectors import WarmupProgress
from datatools.services import STAGE_FAILED, STAGE_GRAPH

PAGE = b'<!doctype html><html><body><header>x</header><main id="content" class="container " tabindex="-1"><h1>People</h1></main></body></html>'


def app_answering(status: str, content_type: str, body: bytes):
    def app(environ, start_response):
        start_response(status, [("Content-Type", content_type), ("Content-Length", str(len(body)))])
        return [body]

    return app


def call(middleware: WarmupBanner) -> tuple[str, dict[str, str], bytes]:
    seen: dict[str, Any] = {}

    def start_response(status, headers, exc_info=None):
        seen["status"], seen["headers"] = status, dict(headers)
        return lambda data: None

    body = b"".join(middleware({"PATH_INFO": "/"}, start_response))
    return str(seen["status"]), dict(seen["headers"]), body


class TestBannerHtml:
    def test_says_the_stage_and_how_far(self):
        html = banner_html(WarmupProgress(stage=STAGE_GRAPH, done=41, total=100)).decode()

        assert html.startswith('<p class="catching-up" role="status" data-warmup="building the follow graph in Redis">')
        assert "Warming up: building the follow graph in Redis, 41% done. Pages read the database meanwhile" in html

    def test_a_failure_says_why_escaped(self):
        html = banner_html(WarmupProgress(stage=STAGE_FAILED, error="RuntimeError: <script>")).decode()

        assert "warm-up failed (RuntimeError: &lt;script&gt;)" in html
        assert "<script>" not in html

    def test_goes_at_the_top_of_main_or_after_body(self):
        banner = b"<p>B</p>"

        assert with_banner(PAGE, banner) == PAGE.replace(b'tabindex="-1">', b'tabindex="-1"><p>B</p>')
        assert with_banner(b"<html><body class='x'>hi</body></html>", banner) == b"<html><body class='x'><p>B</p>hi</body></html>"
        assert with_banner(b"plain", banner) == b"plain"


class TestWarmupBanner:
    def test_an_html_page_carries_it_with_its_length(self, monkeypatch):
        middleware = WarmupBanner(app_answering("200 OK", "text/html; charset=utf-8", PAGE))
        monkeypatch.setattr(middleware, "progress", lambda: WarmupProgress(stage=STAGE_GRAPH, done=1, total=2))

        status, headers, body = call(middleware)

        assert status == "200 OK"
        assert b"follow graph in Redis, 50% done" in body and body.index(b"catching-up") > body.index(b'<main id="content"')
        assert headers["Content-Length"] == str(len(body))

    @pytest.mark.parametrize(
        ("status", "content_type"), [("200 OK", "application/json"), ("302 Found", "text/html"), ("200 OK", "text/css")]
    )
    def test_other_answers_pass_unchanged(self, monkeypatch, status, content_type):
        middleware = WarmupBanner(app_answering(status, content_type, PAGE))
        monkeypatch.setattr(middleware, "progress", lambda: WarmupProgress(stage=STAGE_GRAPH, done=1, total=2))

        got_status, headers, body = call(middleware)

        assert (got_status, body, headers["Content-Length"]) == (status, PAGE, str(len(PAGE)))

    def test_reads_the_progress_a_warm_up_keeps_in_redis(self, redis_client):
        middleware = WarmupBanner(app_answering("200 OK", "text/html", PAGE))
        assert middleware.progress() is None
        redis_client.hset(redis_keys.warmup_key(), mapping={"stage": STAGE_GRAPH, "done": 3, "total": 4})

        assert middleware.progress() is None  # looked at again only after BANNER_TTL_SECONDS
        middleware._seen = (0.0, None)

        assert middleware.progress() == WarmupProgress(stage=STAGE_GRAPH, done=3, total=4)
        assert b"follow graph in Redis, 75% done" in call(middleware)[2]


# --- the outbox drain in the server's process -------------------------------------


def wait_for(condition, seconds: float = 20.0) -> bool:
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


class FinishedWarmUp:
    """A warm-up process that has exited (``subprocess.Popen.poll``)."""

    def poll(self) -> int:
        return 0


class RunningWarmUp:
    def poll(self) -> None:
        return None


@pytest.mark.django_db(transaction=True)
class TestOutboxDrain:
    def block_with_pending_entries(self, user_factory):
        from core.models import OutboxEntry
        from social import controls
        from social.outbox import CONTROL

        alice, bob = user_factory(username="alice"), user_factory(username="bob")
        controls.block_create(actor=alice, target_id=bob.pk)  # eager tasks, as make run has them
        pending = OutboxEntry.objects.filter(kind=CONTROL.name, applied_at__isnull=True)
        return alice, bob, pending

    def test_a_blocks_entries_are_applied_without_a_restart(self, user_factory, redis_client, settings):
        from social import redis_keys as social_keys

        settings.SOCIAL_OUTBOX_DRAIN_SECONDS = 0.1
        alice, bob, pending = self.block_with_pending_entries(user_factory)
        assert pending.exists()  # no beat: before the drain they waited for the next start

        drainer = start_drain(FinishedWarmUp())  # type: ignore[arg-type]
        try:
            applied = wait_for(lambda: not pending.exists())
        finally:
            drainer.stop()

        assert applied and drainer.rounds >= 1
        assert redis_client.smembers(social_keys.blocks_key(alice.pk)) == {str(bob.pk).encode()}

    def test_it_waits_for_the_warm_up(self, user_factory, settings):
        import time

        settings.SOCIAL_OUTBOX_DRAIN_SECONDS = 0.05
        _, _, pending = self.block_with_pending_entries(user_factory)

        drainer = start_drain(RunningWarmUp())  # type: ignore[arg-type]
        try:
            time.sleep(0.5)
        finally:
            drainer.stop()

        assert pending.exists() and drainer.rounds == 0

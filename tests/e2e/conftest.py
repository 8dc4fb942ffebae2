"""Browser tests: Debian's Chromium driven by Playwright against a live server.

The stack is the real one: a ``LiveServerThread`` on 127.0.0.1 (this
process, so ``settings`` overrides reach it), the test database on MariaDB,
Redis on 6379 and a real ``celery worker`` process on a queue of its own
(RabbitMQ). Tasks are *not* run eagerly here: the live server sends them to
the worker, so "publish, then the follower sees it" goes through fan-out as
in production.

Scopes: Chromium, the live server, the worker, the Redis key prefix and the
queue are shared by the package (starting a worker costs seconds); every test
gets fresh browser contexts and an empty database (``transaction=True``, so
the server thread and the worker see committed rows; ids are never reused
because MariaDB's flush deletes rows without resetting AUTO_INCREMENT, so
Redis keys left by an earlier test cannot be mistaken for a later one's).

Artifacts (git-ignored) go to ``artifacts/e2e/<test name>/``: each journey's
screenshots, and on failure every open page's HTML, a screenshot, its
console log and the tail of the worker's log.

Playwright's sync API runs an asyncio loop in this thread while it is
started; Django refuses ORM calls from a thread with a running loop, so
``DJANGO_ALLOW_ASYNC_UNSAFE`` is set while the package's browser is up
(only there: the rest of the suite keeps the check).
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.staticfiles.handlers import StaticFilesHandler
from django.test.testcases import LiveServerThread

from core import redis_keys as core_keys
from core.outbox import now_ms
from core.redis import forget_sentinel, get_redis, redis_reset_breaker
from tests.support.accounts import signed_in
from tests.support.broker import broker_turn
from tests.support.browser import DESKTOP
from tests.support.celery import celery_conf
from tests.support.faults import CeleryWorker, purge_queue
from tests.support.redis import unlink_prefix

BASE_DIR = Path(__file__).resolve().parents[2]
ARTIFACTS = BASE_DIR / "artifacts" / "e2e"
CHROMIUM = os.environ.get("FOLLOWFEED_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """Every test in this package is a browser test (``-m "not browser"`` skips them)."""
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(pytest.mark.browser)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Generator[None, Any, None]:
    """Keep each phase's report on the item, so fixtures know at teardown whether the test failed."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


def _failed(node: Any) -> bool:
    return any(getattr(getattr(node, f"report_{when}", None), "failed", False) for when in ("setup", "call"))


def artifact_dir(node: Any) -> Path:
    """``artifacts/e2e/<test name>/`` (emptied the first time a test asks for it)."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", node.nodeid.split("::", 1)[-1])[:120]
    path = ARTIFACTS / name
    if not getattr(node, "_artifacts_ready", False):
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True, exist_ok=True)
        node._artifacts_ready = True
    return path


# --- package-wide processes ---------------------------------------------------


@pytest.fixture(scope="package")
def e2e_names() -> dict[str, str]:
    """The package's Redis key prefix and Celery queue name (unique per run)."""
    run = uuid.uuid4().hex[:10]
    return {"prefix": f"test:e2e:{run}:", "queue": f"e2e-{run}"}


@pytest.fixture(scope="package")
def allow_orm_beside_playwright() -> Iterator[None]:
    """Let Django's ORM run while Playwright's loop is running in this thread (see module doc)."""
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    yield
    if previous is None:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture(scope="package")
def browser(allow_orm_beside_playwright: None) -> Iterator[Any]:
    """Headless Debian Chromium (never a downloaded build)."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: scripts/bootstrap.sh installs Debian's chromium package")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="package")
def celery_worker(django_db_setup: Any, django_db_blocker: Any, e2e_names: dict[str, str]) -> Iterator[CeleryWorker]:
    """A real worker process on the package's queue, test database and key prefix."""
    with django_db_blocker.unblock():
        worker = CeleryWorker(
            queue=e2e_names["queue"],
            redis_url=str(settings.REDIS_URL),  # the session's Redis (never the system's db 0)
            extra_env={"REDIS_KEY_PREFIX": e2e_names["prefix"], "DJANGO_ALLOW_ASYNC_UNSAFE": ""},
        )
        with broker_turn(alone=False):  # a package's fixture outlives each test's own turn
            worker.start()
    yield worker
    worker.stop()
    with broker_turn(alone=False):
        purge_queue(e2e_names["queue"])
    unlink_prefix(get_redis(), e2e_names["prefix"])


@pytest.fixture(scope="package")
def live_url(django_db_setup: Any) -> Iterator[str]:
    """A live server on 127.0.0.1 (free port), static files served; returns its base URL."""
    thread = LiveServerThread("127.0.0.1", StaticFilesHandler, port=0)
    thread.daemon = True
    thread.start()
    thread.is_ready.wait()
    if thread.error:
        raise thread.error
    yield f"http://127.0.0.1:{thread.port}"
    thread.terminate()


# --- per test -----------------------------------------------------------------


@pytest.fixture(autouse=True)
def redis_isolated(settings: Any, e2e_names: dict[str, str]) -> Iterator[str]:
    """Overrides the suite's per-test prefix: the worker process only knows the package's prefix."""
    settings.REDIS_KEY_PREFIX = e2e_names["prefix"]
    redis_reset_breaker()
    forget_sentinel()
    get_redis().set(core_keys.sentinel_key(), now_ms())
    yield e2e_names["prefix"]
    redis_reset_breaker()
    forget_sentinel()


@pytest.fixture
def stack(
    settings: Any, live_url: str, celery_worker: CeleryWorker, e2e_names: dict[str, str], transactional_db: Any
) -> Iterator[Stack]:
    """The live server sends tasks to the real worker (not eager) on the package's queue."""
    from config.celery_app import app

    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.CELERY_TASK_DEFAULT_QUEUE = e2e_names["queue"]
    # Celery caches the default queue object on first send; drop it so the
    # queue chosen above is used (and dropped again for later tests).
    app.amqp.__dict__.pop("default_queue", None)
    # On the app too: a value an earlier test left set on it would win over the settings.
    with celery_conf(task_always_eager=False, task_default_queue=e2e_names["queue"]):
        yield Stack(url=live_url, worker=celery_worker)
    app.amqp.__dict__.pop("default_queue", None)


class Stack:
    """What a test drives: ``url`` of the live server and the ``worker``."""

    def __init__(self, *, url: str, worker: CeleryWorker) -> None:
        self.url = url
        self.worker = worker


class Session:
    """One browser context (a person): its page, console log and navigation count."""

    def __init__(self, *, context: Any, page: Any, label: str) -> None:
        self.context = context
        self.page = page
        self.label = label
        self.console: list[str] = []
        self.errors: list[str] = []
        self.navigations = 0
        page.on("console", lambda message: self.console.append(f"[{message.type}] {message.text}"))
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.on("framenavigated", self._on_navigated)
        page.on("response", self._on_response)

    def _on_navigated(self, frame: Any) -> None:
        if frame == self.page.main_frame:
            self.navigations += 1

    def _on_response(self, response: Any) -> None:
        # A page answered 4xx is a tested outcome (a form with errors); a
        # script, style or fetch that fails is a broken page.
        if response.status >= 400 and response.request.resource_type != "document":
            self.errors.append(f"{response.status} {response.request.method} {response.url} ({response.request.resource_type})")

    def problems(self) -> list[str]:
        """Uncaught script errors, failed sub-resources and console errors seen so far.

        Chromium's own "Failed to load resource" lines are left out: failed
        sub-resources are caught by the response check, and a document that
        answers 4xx is what a form with errors should do.
        """
        console_errors = [line for line in self.console if line.startswith("[error]") and "Failed to load resource" not in line]
        return self.errors + console_errors


@pytest.fixture
def open_session(request: Any, browser: Any, stack: Stack) -> Iterator[Callable[..., Session]]:
    """``open_session(user=None, *, js=True, viewport=DESKTOP)``: a new person in the browser.

    ``user`` is signed in by session cookie (the sign-in form has its own
    journey). At teardown every session must be free of script and console
    errors; on failure each page's HTML, screenshot and console log are kept.
    """
    sessions: list[Session] = []

    def open_(user: Any = None, *, js: bool = True, viewport: dict[str, int] = DESKTOP, label: str | None = None) -> Session:
        context = browser.new_context(
            viewport=viewport, java_script_enabled=js, base_url=stack.url, locale="en-US", timezone_id="UTC"
        )
        context.set_default_timeout(10_000)
        if user is not None:
            client = signed_in(user)
            cookie = client.cookies[settings.SESSION_COOKIE_NAME]
            context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie.value, "url": stack.url}])
        session = Session(
            context=context, page=context.new_page(), label=label or (user.username if user else f"anonymous{len(sessions)}")
        )
        sessions.append(session)
        return session

    yield open_

    node = request.node
    if _failed(node):
        out = artifact_dir(node)
        for session in sessions:
            try:
                (out / f"failure-{session.label}.html").write_text(session.page.content())
                session.page.screenshot(path=str(out / f"failure-{session.label}.png"), full_page=True)
            except Exception as exc:  # noqa: BLE001 - keep what can be kept
                (out / f"failure-{session.label}.html").write_text(f"could not read the page: {exc}")
            (out / f"console-{session.label}.log").write_text("\n".join(session.console + session.errors) + "\n")
        log = stack.worker.log
        if log.exists():
            (out / "worker.log").write_text(log.read_text(errors="replace")[-20_000:])
    problems = {session.label: session.problems() for session in sessions if session.problems()}
    for session in sessions:
        session.context.close()
    if problems and not _failed(node):
        pytest.fail(f"script or console errors in the browser: {problems}")


@pytest.fixture
def shot(request: Any) -> Callable[[Session, str], Path]:
    """``shot(session, "name")``: a full-page screenshot into this test's artifacts folder."""
    counter = iter(range(1, 1000))

    def take(session: Session, name: str) -> Path:
        path = artifact_dir(request.node) / f"{next(counter):02d}-{session.label}-{name}.png"
        # From the top: a full-page capture of a scrolled page draws the sticky bar mid-page.
        session.page.evaluate("window.scrollTo(0, 0)")
        session.page.screenshot(path=str(path), full_page=True)
        return path

    return take

"""Production as the README describes it: its commands, pasted into a fresh shell, serve the site.

The README's "Processes in production" block is run as written (only
``PORT`` is chosen free) in a shell with an empty environment, against the
machine's MariaDB, Redis and RabbitMQ; then a page and its stylesheet are
loaded through gunicorn, and the worker and beat are seen running. And a
production process without a service's URL refuses to start, naming it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.social.faults import free_port

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.worker


def production_block() -> str:
    """The shell block of the README's "Processes in production" section."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Processes in production") :]
    match = re.search(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    assert match is not None, "the production section has no sh block"
    return match.group(1)


def fetch(url: str, **headers: str) -> tuple[int, str, bytes]:
    # The proxy's header: the site redirects plain HTTP to HTTPS otherwise.
    request = urllib.request.Request(url, headers={"X-Forwarded-Proto": "https", "Host": "localhost", **headers})  # noqa: S310 - a URL of the local test server
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - the request above
            return response.status, response.headers.get("Content-Type", ""), response.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.headers.get("Content-Type", ""), refused.read()


def wait_for(condition, *, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = condition()
        except OSError:
            value = None
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def fresh_environment(**extra: str) -> dict[str, str]:
    """An environment with nothing of this session's: a PATH and HOME, plus ``extra``."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), **extra}


class TestReadmeProductionCommands:
    def test_web_worker_and_beat_come_up_and_a_page_loads_with_its_css(self, tmp_path: Path) -> None:
        port = free_port()
        log = tmp_path / "processes.log"
        with log.open("wb") as output:
            shell = subprocess.Popen(
                # The shell's token and metrics directory, for this test's scrape.
                ["bash", "-c", production_block() + f'\nprintf "%s" "$METRICS_TOKEN" > {tmp_path}/token\nwait\n'],
                cwd=ROOT,
                env=fresh_environment(PORT=str(port)),
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            status, _, html = wait_for(lambda: fetch(f"http://127.0.0.1:{port}/"), timeout=120, what="gunicorn")
            stylesheet = re.search(rb'<link rel="stylesheet" href="([^"]+)"', html)
            assert stylesheet is not None
            css_status, css_type, css = fetch(f"http://127.0.0.1:{port}{stylesheet.group(1).decode()}")
            wait_for(lambda: b"ready." in log.read_bytes(), timeout=60, what="the worker")
            wait_for(lambda: b"beat: Starting" in log.read_bytes(), timeout=60, what="beat")
            wait_for(lambda: b"Scheduler: Sending due task drain-outbox" in log.read_bytes(), timeout=60, what="beat's drain")
            token = (tmp_path / "token").read_text()
            refused = fetch(f"http://127.0.0.1:{port}/metrics")
            metrics = fetch(f"http://127.0.0.1:{port}/metrics", Authorization=f"Bearer {token}")
        finally:
            os.killpg(shell.pid, signal.SIGTERM)
            try:
                shell.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(shell.pid, signal.SIGKILL)
                shell.wait(timeout=10)
        output_text = log.read_text(errors="replace")

        assert status == 200 and b"Find people" in html
        # Hashed by collectstatic's manifest, served by WhiteNoise.
        assert re.fullmatch(rb"/static/css/site\.[0-9a-f]{12}\.css", stylesheet.group(1)), output_text[-2000:]
        assert css_status == 200 and css_type.startswith("text/css") and b".topbar" in css
        assert "celery@" in output_text and "gunicorn" in output_text.lower()
        # /metrics: refused without the token; with it, the gunicorn workers' requests (summed from the
        # shared directory), the outbox and the broker's queue read at scrape time.
        assert refused[0] == 401 and len(token) > 20
        assert metrics[0] == 200, metrics[2][-2000:]
        assert re.search(rb'^django_http_requests_total_by_method_total\{method="GET"\} [1-9]', metrics[2], re.MULTILINE), metrics[2][-3000:]
        assert re.search(rb'^followfeed_outbox_pending\{kind="feed.note"\} ', metrics[2], re.MULTILINE)
        assert re.search(rb'^followfeed_celery_queue_messages\{queue="celery"\} ', metrics[2], re.MULTILINE)

    @pytest.mark.parametrize("missing", ["REDIS_URL", "DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SECRET_KEY"])
    def test_production_refuses_to_start_without_a_service_and_names_it(self, missing: str) -> None:
        variables = {
            "DJANGO_SETTINGS_MODULE": "config.settings.production",
            "DJANGO_SECRET_KEY": "x" * 50,
            "DATABASE_URL": "mysql://root:@127.0.0.1:3306/followfeed",
            "REDIS_URL": "redis://127.0.0.1:6379/0",
            "CELERY_BROKER_URL": "amqp://guest:guest@127.0.0.1:5672//",
        }
        del variables[missing]

        result = subprocess.run(
            [sys.executable, "manage.py", "check"], cwd=ROOT, env=fresh_environment(**variables), capture_output=True, text=True, timeout=60, check=False
        )

        assert result.returncode != 0
        assert f"ImproperlyConfigured: {missing} is not set" in result.stderr


class TestDeployCheck:
    def test_check_deploy_with_the_production_settings_finds_nothing(self) -> None:
        variables = {
            "DJANGO_SETTINGS_MODULE": "config.settings.production",
            "DJANGO_SECRET_KEY": "k3y-" + "x7Q" * 20,
            "DJANGO_ALLOWED_HOSTS": "followfeed.example",
            "DJANGO_CSRF_TRUSTED_ORIGINS": "https://followfeed.example",
            "DATABASE_URL": "mysql://root:@127.0.0.1:3306/followfeed",
            "REDIS_URL": "redis://127.0.0.1:6379/0",
            "CELERY_BROKER_URL": "amqp://guest:guest@127.0.0.1:5672//",
        }

        result = subprocess.run(
            [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
            cwd=ROOT, env=fresh_environment(**variables), capture_output=True, text=True, timeout=60,
            check=False,
        )

        assert result.returncode == 0, result.stdout + result.stderr
        # Silenced: only the three OAuth checks settings.SILENCED_SYSTEM_CHECKS names, with their reasons.
        assert "System check identified no issues (3 silenced)." in result.stdout


class TestDotEnv:
    def test_a_copied_env_example_is_ignored_unless_asked_for(self, tmp_path: Path) -> None:
        dot_env = tmp_path / ".env"
        dot_env.write_text((ROOT / ".env.example").read_text())
        show = "from django.conf import settings; print(settings.REDIS_EMBEDDED, settings.DATABASES['default']['ENGINE'])"
        base = {"DJANGO_SETTINGS_MODULE": "config.settings.local", "DJANGO_DOT_ENV_FILE": str(dot_env), "FOLLOWFEED_VAR_DIR": str(tmp_path)}

        def settings_seen(**extra: str) -> str:
            code = f"import django; django.setup(); {show}"
            result = subprocess.run(
                [sys.executable, "-c", code], cwd=ROOT, env=fresh_environment(**base, **extra), capture_output=True, text=True, timeout=60, check=False
            )
            assert result.returncode == 0, result.stderr[-2000:]
            return result.stdout.strip().splitlines()[-1]

        try:
            ignored = settings_seen()
        finally:
            subprocess.run([sys.executable, "manage.py", "embedded_redis", "stop"], cwd=ROOT, env=fresh_environment(**base), timeout=60, check=False)
        read = settings_seen(DJANGO_READ_DOT_ENV_FILE="true")

        assert ignored == "True django_prometheus.db.backends.sqlite3"  # the embedded default, whatever .env says
        assert read == "False django_prometheus.db.backends.mysql"

"""Production as the README describes it: its commands, pasted into a fresh shell, serve the site.

The README's "Processes in production" block is run as written in a shell
with an empty environment, against the machine's MariaDB, Redis and RabbitMQ,
with only the names it would share swapped for the test's own
(``isolated_block``): a database of its own (created by the block's own
``CREATE DATABASE`` line, dropped afterwards), the test session's Redis
database with a key prefix of its own (its keys unlinked afterwards), a Celery
queue of its own (deleted afterwards), and the beat schedule, the metrics
directory and the collected static files under the test's temporary directory.
``PORT`` is chosen free. Then a page and its stylesheet are loaded through
gunicorn, and the worker and beat are seen running. And a production process
without a service's URL refuses to start, naming it.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import environ
import pytest
from django.conf import settings

from tests.support.faults import free_port
from tests.support.redis import unlink_prefix

ROOT = Path(__file__).resolve().parents[1]


def production_block() -> str:
    """The shell block of the README's "Processes in production" section."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Processes in production") :]
    match = re.search(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    assert match is not None, "the production section has no sh block"
    return match.group(1)


@dataclass(frozen=True)
class OwnNames:
    """What the production block's processes use instead of the machine's shared names."""

    database: str  # a MariaDB database, created by the block and dropped by the test
    redis_url: str  # the test session's Redis (never db 0) ...
    prefix: str  # ... under a key prefix of its own
    queue: str  # the Celery queue (and its exchange) of the worker and beat
    directory: Path  # the beat schedule, the metrics directory, the collected static files


def isolated_block(block: str, names: OwnNames) -> tuple[str, str]:
    """``block`` with the shared names swapped for ``names``; returns (block, its DATABASE_URL).

    Only names change: every line still runs as written. Each swap must find
    what it swaps, so a README that changed shape fails here instead of
    quietly running on the shared database, Redis db 0 or the ``celery`` queue.
    """
    for variable in (
        "REDIS_KEY_PREFIX",
        "CELERY_TASK_DEFAULT_QUEUE",
        "CELERY_WORKER_HOSTNAME",
        "DJANGO_STATIC_ROOT",
        "XDG_RUNTIME_DIR",
    ):
        assert variable not in block, f"the README now sets {variable}; the test sets it to its own value"
    database = re.search(r"^export DATABASE_URL=(\S+)/(\w+)$", block, flags=re.MULTILINE)
    assert database is not None, "the production block exports no DATABASE_URL=.../<name>"
    shared = database.group(2)
    database_url = f"{database.group(1)}/{names.database}"
    swaps = [
        (re.escape(database.group(0)), f"export DATABASE_URL={database_url}"),
        (rf"(CREATE DATABASE IF NOT EXISTS ){shared}\b", rf"\g<1>{names.database}"),
        (r"^export REDIS_URL=\S+$", f"export REDIS_URL={names.redis_url}"),
        (r"(?<=\s)/tmp/", f"{names.directory}/"),
    ]
    for pattern, replacement in swaps:
        block, count = re.subn(pattern, replacement, block, flags=re.MULTILINE)
        assert count >= 1, f"the production block no longer has {pattern!r}"
    left = block.replace(f"{names.directory}/", "")
    assert not re.search(rf"/{shared}$|EXISTS {shared}\b|(?<=\s)/tmp/", left, flags=re.MULTILINE), block
    # Names the block leaves to their defaults: the ``ff:`` prefix, the ``celery`` queue, the
    # worker's node name ``celery@<host>`` (its pidbox queue is exclusive: a second worker of that
    # name on the broker stops), ./staticfiles and gunicorn's control socket in ~/.gunicorn.
    own = (
        f"export REDIS_KEY_PREFIX={names.prefix}\n"
        f"export CELERY_TASK_DEFAULT_QUEUE={names.queue}\n"
        f"export CELERY_WORKER_HOSTNAME={names.queue}@%h\n"
        f"export DJANGO_STATIC_ROOT={names.directory}/staticfiles\n"
        f"export XDG_RUNTIME_DIR={names.directory}\n"
    )
    return own + block, database_url


def drop_database(url: str) -> None:
    import MySQLdb

    config = environ.Env.db_url_config(url)
    name = config["NAME"]
    assert re.fullmatch(r"test_\w+_production_[0-9a-f]+", name), name  # never anything but this test's own
    connection = MySQLdb.connect(
        host=config["HOST"] or "127.0.0.1", user=config["USER"], passwd=config["PASSWORD"], port=int(config["PORT"] or 3306)
    )
    try:
        connection.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
    finally:
        connection.close()


def delete_queue(broker_url: str, queue: str) -> None:
    """Delete ``queue`` and the exchange Celery named after it (with their messages)."""
    from kombu.connection import Connection

    with Connection(broker_url, connect_timeout=10) as connection:
        for delete in ("queue_delete", "exchange_delete"):
            channel = connection.channel()
            # Not declared (the worker never came up) is no error; nor is a channel the broker closed.
            with contextlib.suppress(Exception):
                getattr(channel, delete)(queue)
            with contextlib.suppress(Exception):
                channel.close()


def block_variable(block: str, name: str) -> str:
    match = re.search(rf"^export {name}=(\S+)$", block, flags=re.MULTILINE)
    assert match is not None, f"the production block exports no {name}"
    return match.group(1)


@pytest.fixture
def own_names(tmp_path: Path) -> Iterator[OwnNames]:
    """This test's names; afterwards (also after a failure) its database, queue and keys are gone."""
    run = uuid.uuid4().hex[:10]
    names = OwnNames(
        database=f"{settings.DATABASES['default']['TEST']['NAME']}_production_{run}",
        redis_url=str(settings.REDIS_URL),
        prefix=f"test:production:{run}:",
        queue=f"test-production-{run}",
        directory=tmp_path,
    )
    block, database_url = isolated_block(production_block(), names)
    try:
        yield names
    finally:
        import redis

        drop_database(database_url)
        delete_queue(block_variable(block, "CELERY_BROKER_URL"), names.queue)
        client: Any = redis.Redis.from_url(names.redis_url)
        try:
            unlink_prefix(client, names.prefix)
        finally:
            client.close()


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


def stop_group(shell: subprocess.Popen[bytes]) -> None:
    """SIGTERM the shell's process group (gunicorn, the worker, beat), SIGKILL what is left after 20 s."""
    try:
        os.killpg(shell.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        shell.wait(timeout=20)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(shell.pid, signal.SIGKILL)  # also what outlived the shell
    except ProcessLookupError:
        pass
    shell.wait(timeout=10)


class TestIsolatedBlock:
    def test_only_the_shared_names_change(self, tmp_path: Path) -> None:
        names = OwnNames(
            database="test_x_production_1", redis_url="redis://127.0.0.1:6379/9", prefix="p:", queue="q", directory=tmp_path
        )
        readme = production_block()

        block, database_url = isolated_block(readme, names)

        assert database_url.endswith("/test_x_production_1")
        assert "CREATE DATABASE IF NOT EXISTS test_x_production_1 " in block
        assert "export REDIS_URL=redis://127.0.0.1:6379/9" in block
        assert f"--schedule {tmp_path}/" in block and f"mktemp -d {tmp_path}/" in block
        assert block.startswith(
            "export REDIS_KEY_PREFIX=p:\nexport CELERY_TASK_DEFAULT_QUEUE=q\nexport CELERY_WORKER_HOSTNAME=q@%h\n"
        )
        # Every other line is the README's.
        changed = {"DATABASE_URL", "CREATE DATABASE", "REDIS_URL", "/tmp/"}
        kept = [line for line in readme.splitlines() if not any(word in line for word in changed)]
        assert kept and all(line in block.splitlines() for line in kept)


class TestReadmeProductionCommands:
    @pytest.mark.worker
    def test_web_worker_and_beat_come_up_and_a_page_loads_with_its_css(self, tmp_path: Path, own_names: OwnNames) -> None:
        port = free_port()
        log = tmp_path / "processes.log"
        block, _ = isolated_block(production_block(), own_names)
        with log.open("wb") as output:
            shell = subprocess.Popen(
                # The shell's token and metrics directory, for this test's scrape.
                ["bash", "-c", block + f'\nprintf "%s" "$METRICS_TOKEN" > {tmp_path}/token\nwait\n'],
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
            stop_group(shell)
        output_text = log.read_text(errors="replace")

        assert status == 200 and b"Find people" in html
        # Hashed by collectstatic's manifest, served by WhiteNoise.
        assert re.fullmatch(rb"/static/css/site\.[0-9a-f]{12}\.css", stylesheet.group(1)), output_text[-2000:]
        assert css_status == 200 and css_type.startswith("text/css") and b".topbar" in css
        assert f"{own_names.queue}@" in output_text and "gunicorn" in output_text.lower()
        # /metrics: refused without the token; with it, the gunicorn workers' requests (summed from the
        # shared directory), the outbox and the broker's queue read at scrape time.
        assert refused[0] == 401 and len(token) > 20
        assert metrics[0] == 200, metrics[2][-2000:]
        assert re.search(rb'^django_http_requests_total_by_method_total\{method="GET"\} [1-9]', metrics[2], re.MULTILINE), (
            metrics[2][-3000:]
        )
        assert re.search(rb'^followfeed_outbox_pending\{kind="feed.note"\} ', metrics[2], re.MULTILINE)
        assert re.search(
            rb'^followfeed_celery_queue_messages\{queue="%s"\} ' % own_names.queue.encode(), metrics[2], re.MULTILINE
        )
        # Only the test's own names were used: the static files and beat's schedule are under its directory.
        assert (tmp_path / "staticfiles" / "staticfiles.json").exists() and list(tmp_path.glob("followfeed-beat-schedule*"))
        # gunicorn's control socket (gunicorn >= 25) too.
        assert all(path.startswith(f"{tmp_path}/") for path in re.findall(r"Control socket listening at (\S+)", output_text))

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
            [sys.executable, "manage.py", "check"],
            cwd=ROOT,
            env=fresh_environment(**variables),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
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
            cwd=ROOT,
            env=fresh_environment(**variables),
            capture_output=True,
            text=True,
            timeout=60,
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
        base = {
            "DJANGO_SETTINGS_MODULE": "config.settings.local",
            "DJANGO_DOT_ENV_FILE": str(dot_env),
            "FOLLOWFEED_VAR_DIR": str(tmp_path),
        }

        def settings_seen(**extra: str) -> str:
            code = f"import django; django.setup(); {show}"
            result = subprocess.run(
                [sys.executable, "-c", code],
                cwd=ROOT,
                env=fresh_environment(**base, **extra),
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert result.returncode == 0, result.stderr[-2000:]
            return result.stdout.strip().splitlines()[-1]

        try:
            ignored = settings_seen()
        finally:
            subprocess.run(
                [sys.executable, "manage.py", "embedded_redis", "stop"],
                cwd=ROOT,
                env=fresh_environment(**base),
                timeout=60,
                check=False,
            )
        read = settings_seen(DJANGO_READ_DOT_ENV_FILE="true")
        counted = settings_seen(DJANGO_READ_DOT_ENV_FILE="true", METRICS_QUERIES="true")

        assert ignored == "True django.db.backends.sqlite3"  # the embedded default, whatever .env says
        assert read == "False django.db.backends.mysql"
        assert counted == "False django_prometheus.db.backends.mysql"  # the per-query counters, asked for

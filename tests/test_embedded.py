"""The embedded default: SQLite, the embedded Valkey server (start, share, stop, why it cannot
start), eager Celery, and run_demo across restarts."""

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from core import embedded
from core.embedded import EmbeddedRedis, EmbeddedRedisError

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import django, json
django.setup()
from django.conf import settings
from django.core.management import call_command
from django.test import Client
from io import StringIO
assert settings.REDIS_EMBEDDED and settings.CELERY_TASK_ALWAYS_EAGER
assert settings.DATABASES["default"]["ENGINE"].endswith("sqlite3")
call_command("migrate", verbosity=0)
call_command("import_graph", "wiki-Vote.txt.gz", limit=2000, password="pw", stdout=StringIO(), verbosity=0)
from users.models import User
from core.redis import get_redis
from social import redis_keys
client = Client()
assert client.login(username="u3", password="pw")
me = User.objects.get(username="u3")
from social.models import Follow
followed = set(Follow.objects.filter(follower=me).values_list("followee_id", flat=True))
target = User.objects.exclude(pk__in=followed | {me.pk}).order_by("pk").first()
before = client.get(f"/api/users/{target.pk}").json()["data"]["followers"]
follow = client.put(f"/api/follow/{target.pk}/true").json()
after = client.get(f"/api/users/{target.pk}").json()["data"]["followers"]
page = client.get(f"/u/{target.username}/")
print(json.dumps({
    "before": before, "after": after, "changed": follow["data"]["changed"],
    "page": page.status_code,
    "in_redis": bool(get_redis().sismember(redis_keys.followers_set_key(target.pk), me.pk)),
    "redis_class": get_redis().connection_pool.connection_class.__name__,
    "server": get_redis().info("server").get("server_name", "redis"),
    "lua": get_redis().eval("return 1 + 1", 0),
}))
"""


def test_embedded_default_serves_a_real_slice(tmp_path):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "CELERY_TASK_ALWAYS_EAGER"}
    }
    env.update(DJANGO_SETTINGS_MODULE="config.settings.local", FOLLOWFEED_VAR_DIR=str(tmp_path))
    env["DJANGO_ALLOWED_HOSTS"] = "testserver,localhost"

    try:
        result = subprocess.run(
            [sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
        )
    finally:
        stop = [sys.executable, "manage.py", "embedded_redis", "stop"]
        stopped = subprocess.run(stop, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False)

    assert result.returncode == 0, result.stderr[-3000:]
    import json

    data = json.loads(result.stdout.strip().splitlines()[-1])
    assert data["page"] == 200
    assert data["after"] == data["before"] + 1
    assert data["changed"] is True
    assert data["in_redis"] is True
    assert data["redis_class"] == "EmbeddedConnection"  # the embedded server in FOLLOWFEED_VAR_DIR, started by this connection
    assert data["server"] == "valkey" and data["lua"] == 2  # a real server: scripts run
    assert (tmp_path / "db.sqlite3").exists() and (tmp_path / "valkey" / "appendonlydir").is_dir()
    assert stopped.returncode == 0 and "stopped" in stopped.stdout


# --- the embedded server: starting, sharing, stopping, and why it cannot start ---------


@pytest.fixture
def server(tmp_path, monkeypatch):
    """An embedded server kept in ``tmp_path``, stopped afterwards."""
    monkeypatch.setattr(embedded, "started_here", False)
    monkeypatch.setattr(embedded, "_process", None)
    found = EmbeddedRedis(tmp_path)
    yield found
    found.stop()


class TestEmbeddedServer:
    def test_starts_once_is_shared_and_stops(self, server):
        assert server.ensure_running() is True
        assert server.ensure_running() is False  # already answering: another process would share it
        assert embedded.started_here is True

        assert server.other_clients() == 0
        other = redis.Redis(unix_socket_path=str(server.socket))
        other.ping()
        assert server.other_clients() == 1
        other.close()

        assert server.stop() is True
        assert not server.answers() and not server.socket.exists() and not server.pidfile.exists()
        assert server.stop() is False

    def test_keeps_its_data_across_a_restart(self, server):
        server.ensure_running()
        redis.Redis(unix_socket_path=str(server.socket)).set("kept", "yes")
        server.stop()

        server.ensure_running()

        assert redis.Redis(unix_socket_path=str(server.socket)).get("kept") == b"yes"

    def test_a_socket_path_too_long_is_refused(self, tmp_path):
        deep = tmp_path / ("d" * 60) / ("e" * 60)

        with pytest.raises(EmbeddedRedisError, match="too long for a Unix socket; set FOLLOWFEED_VAR_DIR shorter"):
            EmbeddedRedis(deep).ensure_running()

    def test_a_directory_that_cannot_be_made_says_so(self, tmp_path):
        (tmp_path / "plain-file").write_text("not a directory")

        with pytest.raises(EmbeddedRedisError, match=r"cannot be created \(Not a directory\); set FOLLOWFEED_VAR_DIR"):
            EmbeddedRedis(tmp_path / "plain-file" / "var").ensure_running()

    def test_a_server_that_exits_at_start_says_why_from_its_log(self, server):
        manifest = server.data_dir / "appendonlydir" / "appendonly.aof.manifest"
        manifest.parent.mkdir(parents=True)
        manifest.write_text("this is not a manifest\n")

        with pytest.raises(EmbeddedRedisError, match=r"exited while starting \(exit status 1\)") as raised:
            server.ensure_running()

        assert "Invalid AOF manifest file format" in str(raised.value)
        assert embedded.started_here is False


# --- only commands that use Redis start the server -------------------------------------


def embedded_env(var_dir: Path) -> dict[str, str]:
    """The environment of a command on the embedded default: REDIS_URL empty, SQLite and the server in ``var_dir``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_CLUSTER_NODES", "CELERY_BROKER_URL", "CELERY_TASK_ALWAYS_EAGER"}
    }
    env.update(DJANGO_SETTINGS_MODULE="config.settings.local", FOLLOWFEED_VAR_DIR=str(var_dir), REDIS_URL="")
    return env


def valkey_processes(var_dir: Path) -> list[int]:
    """The processes whose command line names ``var_dir`` (a Valkey server kept there)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if str(var_dir) in cmdline and "manage.py" not in cmdline:
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("arguments", [["--help"], ["check"]])
def test_a_command_that_does_not_use_redis_starts_no_server(tmp_path, arguments):
    var = tmp_path / "var"

    try:
        done = subprocess.run(
            [sys.executable, "manage.py", *arguments],
            check=False,
            cwd=ROOT,
            env=embedded_env(var),
            capture_output=True,
            text=True,
            timeout=120,
        )
        started = (var / "valkey.sock").exists() or (var / "valkey.pid").exists()
        processes = valkey_processes(var)
    finally:
        EmbeddedRedis(var).stop()  # one it should not have started

    assert done.returncode == 0, done.stderr[-3000:]
    assert not started
    assert processes == []
    assert "Valkey" not in done.stderr


def test_a_command_that_starts_the_server_and_leaves_it_running_says_so(tmp_path):
    var = tmp_path / "var"
    env = embedded_env(var)
    uses_redis = ["shell", "-c", "from core.redis import get_redis; print(get_redis().ping())"]

    try:
        first = subprocess.run(
            [sys.executable, "manage.py", *uses_redis],
            check=False,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        again = subprocess.run(
            [sys.executable, "manage.py", *uses_redis],
            check=False,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        running = EmbeddedRedis(var).answers()
    finally:
        EmbeddedRedis(var).stop()

    assert first.returncode == 0 and again.returncode == 0, first.stderr[-3000:] + again.stderr[-3000:]
    assert first.stdout.strip().endswith("True") and running
    said = [line for line in first.stderr.splitlines() if "embedded Valkey server" in line]
    assert said == [
        f"The embedded Valkey server this command started keeps running on {var / 'valkey.sock'} (python manage.py embedded_redis stop stops it)."
    ]
    assert "embedded Valkey server" not in again.stderr  # it used the running server: nothing to say


# --- run_demo across restarts: the mirror is kept, and rebuilt only for other data ------

ENV_EMBEDDED = {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "CELERY_TASK_ALWAYS_EAGER"}


def run_demo(var_dir: Path, dataset: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ENV_EMBEDDED}
    env.update(DJANGO_SETTINGS_MODULE="config.settings.local", FOLLOWFEED_VAR_DIR=str(var_dir))
    command = [sys.executable, "manage.py", "run_demo", "--no-serve", "--dataset", str(dataset)]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_run_demo_keeps_the_mirror_across_restarts_and_rebuilds_it_for_other_data(tmp_path, monkeypatch):
    from datatools.datasets import dataset_path

    with gzip.open(dataset_path("wiki-Vote.txt.gz"), "rt") as source, gzip.open(tmp_path / "slice.txt.gz", "wt") as out:
        out.writelines(line for index, line in zip(range(2000), source))
    dataset = tmp_path / "slice.txt.gz"
    var, other = tmp_path / "var", tmp_path / "other"
    monkeypatch.setattr(embedded, "started_here", False)
    monkeypatch.setattr(embedded, "_process", None)

    left = EmbeddedRedis(var)
    left.ensure_running()  # as a run killed before it could stop its server leaves it
    first = run_demo(var, dataset)
    left_stopped = not left.answers()
    left.ensure_running()
    user = redis.Redis(unix_socket_path=str(left.socket))
    user.ping()  # another process using the server
    restart = run_demo(var, dataset)
    kept_for_the_user = left.answers()
    user.close()
    elsewhere = run_demo(other, dataset)
    (var / "db.sqlite3").write_bytes((other / "db.sqlite3").read_bytes())  # the same graph, another import
    swapped = run_demo(var, dataset)

    for done in (first, restart, elsewhere, swapped):
        assert done.returncode == 0, done.stderr[-3000:]
    assert "First run: importing the graph" in first.stdout
    replayed = re.search(
        r"Warmed up in [\d.]+ s: (\d+) notes replayed, Redis mirror rebuilt, 0 pending outbox entries applied", first.stdout
    )
    assert replayed and int(replayed.group(1)) > 0
    assert "First run" not in restart.stdout and "Warmed up" not in restart.stdout
    assert "The Redis mirror is current; nothing to warm up." in restart.stdout  # loaded from the append-only file
    assert left_stopped  # no one else used it
    assert kept_for_the_user and "The embedded Valkey server stays up: 1 other connections use it" in restart.stdout
    assert "Warming up: the Redis mirror was built from other data." in swapped.stdout
    assert ": 0 notes replayed, Redis mirror rebuilt" in swapped.stdout
    assert not (var / "valkey.sock").exists()  # stopped on exit by the run that started it


def test_a_sigterm_stops_the_site_and_its_embedded_server_as_ctrl_c_does(tmp_path):
    import socket
    import time
    import urllib.request

    from datatools.datasets import dataset_path

    with gzip.open(dataset_path("wiki-Vote.txt.gz"), "rt") as source, gzip.open(tmp_path / "slice.txt.gz", "wt") as out:
        out.writelines(line for index, line in zip(range(500), source))
    var = tmp_path / "var"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in ENV_EMBEDDED}
    env.update(DJANGO_SETTINGS_MODULE="config.settings.local", FOLLOWFEED_VAR_DIR=str(var))
    command = [sys.executable, "manage.py", "run_demo", "--port", str(port), "--dataset", str(tmp_path / "slice.txt.gz")]
    site = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        served = False
        while time.monotonic() < deadline and not served:
            try:
                served = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).status == 200
            except OSError:
                time.sleep(0.3)
        running = (var / "valkey.sock").exists()

        site.terminate()  # SIGTERM, as kill or a service manager sends it
        time.sleep(0.2)
        site.terminate()  # again, as `timeout` passes a signal to its process group on: the clean-up still runs to its end
        output, _ = site.communicate(timeout=60)
    finally:
        if site.poll() is None:
            site.kill()
        EmbeddedRedis(var).stop()

    assert served and running
    assert site.returncode == 128 + 15
    assert "The embedded Valkey server is stopped." in output
    assert not (var / "valkey.sock").exists()


CONCURRENT_WRITES = r"""
import django, json, threading
django.setup()
from django.core.management import call_command
from django.db import connections
call_command("migrate", verbosity=0)
from users.models import User
from social import controls, services
users = [User.objects.create_user(username=f"w{n}", password="pw") for n in range(8)]
errors = []

def writer(index):
    actor = users[index]
    try:
        for round_ in range(15):
            target = users[(index + 1 + round_ % 6) % 8]
            try:
                services.follow_create(actor=actor, followee_id=target.pk)
                controls.mute_create(actor=actor, target_id=target.pk)
                controls.mute_delete(actor=actor, target_id=target.pk)
                services.follow_delete(actor=actor, followee_id=target.pk)
            except Exception as exc:
                errors.append(repr(exc)[:200])
    finally:
        connections.close_all()

threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(json.dumps({"errors": errors}))
"""


def test_the_embedded_database_takes_concurrent_writers_without_locked_errors(tmp_path):
    # runserver serves each request in a thread of its own: four at once write the one SQLite file.
    env = {k: v for k, v in os.environ.items() if k not in ENV_EMBEDDED}
    env.update(DJANGO_SETTINGS_MODULE="config.settings.local", FOLLOWFEED_VAR_DIR=str(tmp_path / "var"))

    try:
        done = subprocess.run(
            [sys.executable, "-c", CONCURRENT_WRITES], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
        )
    finally:
        EmbeddedRedis(tmp_path / "var").stop()  # the script's server (started by its first Redis call)

    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"errors": []}

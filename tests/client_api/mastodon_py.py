"""Mastodon.py's own test suite against a live followfeed: the sdist, its fixed data, the server.

- ``unpacked_sdist``: the ``mastodon-py`` sdist (``MASTODON_PY_SDIST``, a local ``.tar.gz``, or
  downloaded with pip) unpacked in a temporary folder; its ``tests/`` are run unmodified.
- ``create_setup_sql_data``: what the suite's ``tests/setup.sql`` (and ``run_mastodon_for_tests.sh``)
  sets up on a Mastodon, in followfeed's terms, in the TEST database: the accounts ``admin`` (the
  owner of ``__MASTODON_PY_TEST_ACCESS_TOKEN_2``), ``admin2``, ``mastodonpy_test`` (private, as
  ``locked = 't'``) and ``mastodonpy_test_2``; the application ``__MASTODON_PY_TEST_CLIENT_ID`` /
  ``__MASTODON_PY_TEST_CLIENT_SECRET``; the three access tokens with their scopes.
- ``Gunicorn``: the production settings on 127.0.0.1:3000 (Mastodon.py's tests call
  ``http://localhost:3000``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tarfile
import time
from datetime import timedelta
from pathlib import Path

from django.utils import timezone
from oauth2_provider.models import AccessToken, Application

from client_api.models import ClientApp
from tests.support.faults import log_dir, stop_process
from users.models import User

BASE_DIR = Path(__file__).resolve().parents[2]
VERSION = "2.3.3"
PORT = 3000
CLIENT_ID = "__MASTODON_PY_TEST_CLIENT_ID"
CLIENT_SECRET = "__MASTODON_PY_TEST_CLIENT_SECRET"
TOKENS = {
    "__MASTODON_PY_TEST_ACCESS_TOKEN": ("mastodonpy_test", "read write follow push"),
    "__MASTODON_PY_TEST_ACCESS_TOKEN_3": ("mastodonpy_test_2", "read write follow push"),
    "__MASTODON_PY_TEST_ACCESS_TOKEN_2": ("admin", "read write follow push admin:read admin:write"),
}


def sdist_archive(folder: Path) -> Path:
    """The ``mastodon-py`` sdist: ``MASTODON_PY_SDIST`` when set, else the copy kept in
    ``FOLLOWFEED_CACHE_DIR`` (default ``~/.cache/followfeed``) by an earlier run, else downloaded
    there with pip (so a later run works offline)."""
    given = os.environ.get("MASTODON_PY_SDIST")
    if given:
        return Path(given)
    cache = Path(os.environ.get("FOLLOWFEED_CACHE_DIR", Path.home() / ".cache" / "followfeed")) / "mastodon-py"
    kept = cache / f"mastodon_py-{VERSION}.tar.gz"
    if kept.exists():
        return kept
    pips = [[sys.executable, "-m", "pip"], ["python3", "-m", "pip"]]
    last = ""
    for pip in pips:
        done = subprocess.run(
            [*pip, "download", "--no-deps", "--no-binary", ":all:", f"mastodon-py=={VERSION}", "-d", str(folder)],
            capture_output=True,
            text=True,
            check=False,
        )
        found = sorted(folder.glob("mastodon_py-*.tar.gz"))
        if done.returncode == 0 and found:
            cache.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(found[0], kept)
            return kept
        last = done.stderr[-2000:]
    raise RuntimeError(f"could not download the mastodon-py {VERSION} sdist (set MASTODON_PY_SDIST to a local copy): {last}")


def unpack_sdist(folder: Path) -> Path:
    """The unpacked sdist's root (holding ``tests/`` and ``mastodon/``)."""
    archive = sdist_archive(folder)
    with tarfile.open(archive) as tar:
        tar.extractall(folder, filter="data")
    root = folder / f"mastodon_py-{VERSION}"
    assert (root / "tests" / "setup.sql").exists(), f"{archive} holds no tests/setup.sql"
    return root


def create_setup_sql_data() -> dict[str, User]:
    """The accounts, application and tokens of Mastodon.py's ``tests/setup.sql`` (committed: the
    live server reads them)."""
    now = timezone.now()
    users = {}
    for username, private in (("admin", False), ("admin2", False), ("mastodonpy_test", True), ("mastodonpy_test_2", False)):
        user = User.objects.create_user(username=username, password="mastodonadmin", approve_followers=private, last_seen_at=now)
        users[username] = user
    app = Application(
        client_id=CLIENT_ID,
        name="Mastodon.py test suite",
        redirect_uris="urn:ietf:wg:oauth:2.0:oob",
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        client_secret=CLIENT_SECRET,
        user=users["mastodonpy_test"],
        algorithm="",
    )
    app.save()
    ClientApp.objects.create(application=app, scopes="read write follow push admin:read admin:write")
    for token, (username, scope) in TOKENS.items():
        AccessToken.objects.create(
            user=users[username], application=app, token=token, scope=scope, expires=now + timedelta(days=3650)
        )
    return users


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


class Gunicorn:
    """gunicorn serving followfeed with ``config.settings.production`` on 127.0.0.1:``port``."""

    def __init__(self, *, env: dict[str, str], port: int = PORT) -> None:
        self.env = env
        self.port = port
        self.process: subprocess.Popen[bytes] | None = None
        self.log = log_dir() / f"followfeed-gunicorn-{port}-{os.getpid()}.log"

    def start(self) -> None:
        if not port_free(self.port):
            raise RuntimeError(f"port {self.port} is in use: Mastodon.py's tests need it")
        self.log.write_bytes(b"")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "config.wsgi",
                "-b",
                f"127.0.0.1:{self.port}",
                "-w",
                "2",
                "--timeout",
                "60",
                "--access-logfile",
                "-",
                "--error-logfile",
                "-",
            ],
            cwd=BASE_DIR,
            env=self.env,
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while port_free(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("gunicorn did not start: " + self.log.read_text()[-3000:])
            time.sleep(0.2)

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)
            self.process = None


def run_suite(root: Path, node_ids: list[str], *, junit: Path, timeout: float = 1500) -> subprocess.CompletedProcess[str]:
    """Run Mastodon.py's tests ``node_ids`` from ``root`` against the live server, without cassettes."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DJANGO_", "PYTEST_"))}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:django",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=",
            "--disable-recording",
            "-q",
            "-rA",
            f"--junitxml={junit}",
            *node_ids,
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def outcomes(junit: Path) -> dict[str, str]:
    """``{"tests/test_x.py::test_y[param]": "passed" | "failed" | "skipped"}`` from a JUnit XML report."""
    from xml.etree import ElementTree

    found: dict[str, str] = {}
    for case in ElementTree.parse(junit).getroot().iter("testcase"):  # noqa: S314 - the JUnit report our own pytest run wrote
        module = case.get("classname", "").replace(".", "/") + ".py"
        name = f"{module}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            found[name] = "failed"
        elif case.find("skipped") is not None:
            found[name] = "skipped"
        else:
            found[name] = "passed"
    return found

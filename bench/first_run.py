"""The newcomer's wait: ``make run`` in a fresh clone to its first page, and a restart to its first page.

Run it alone (``make bench`` runs it last)::

    .venv/bin/python bench/first_run.py [--port 8199] [--timeout 600] [--out FILE.json]

What it does:

1. ``git clone`` of this repository (its committed HEAD) into a new
   temporary directory, so nothing of this checkout (``.venv``, ``var/``)
   helps; the real graphs are found through ``FOLLOWFEED_DATA_DIR`` (this
   checkout's setting), as a clone beside ``shared/`` would find them.
2. ``make run`` there (``PORT=--port``): it bootstraps the virtualenv,
   imports the Slashdot graph into SQLite and serves with the embedded
   Valkey server. The time until ``GET /`` first answers 200 is the first
   run's figure (goal: 60 s); whether the page still says it is warming up
   is recorded.
3. SIGINT to ``make run`` (as Ctrl-C), wait for it to exit, ``make run``
   again: the time to the first 200 is the restart's figure (goal: 5 s).
4. Stops it and removes the clone.

The machine's load average is recorded at the start and the end; the
figures are wall clock, on a machine that also runs MariaDB, Redis and
RabbitMQ.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8199, help="port of the site (default 8199)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for a first page (default 600)")
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    return parser.parse_args(argv)


def data_dir() -> str:
    """This checkout's ``FOLLOWFEED_DATA_DIR`` (environment, else the default beside the repository)."""
    return os.environ.get("FOLLOWFEED_DATA_DIR") or str((ROOT.parent / "shared" / "data").resolve())


def first_page(url: str, *, started: float, timeout: float, process: subprocess.Popen[bytes]) -> tuple[float, bool]:
    """Seconds from ``started`` until ``url`` answers 200, and whether that page says it is warming up.

    :raises RuntimeError: ``make run`` exited, or ``timeout`` passed.
    """
    while time.monotonic() - started < timeout:
        if process.poll() is not None:
            raise RuntimeError(f"make run exited with {process.returncode} before serving")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - the local http:// URL of make run
                body = response.read()
                if response.status == 200:
                    return time.monotonic() - started, b"Warming up" in body
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.2)
    raise RuntimeError(f"no first page within {timeout:.0f} s")


def start(clone: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    """``make run`` in ``clone``, in a process group of its own (so SIGINT reaches it as Ctrl-C would)."""
    env = {**os.environ, "PORT": str(port), "FOLLOWFEED_DATA_DIR": data_dir()}
    env.pop("VIRTUAL_ENV", None)
    handle = log.open("ab")
    # SIGINT as Ctrl-C delivers it: a shell's background job (make bench run with &) passes
    # SIGINT ignored to its children, and an ignored signal stays ignored across exec.
    return subprocess.Popen(
        ["make", "run"],
        cwd=clone,
        env=env,
        stdout=handle,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509 - only restores SIGINT; no lock is taken
    )


def stop(process: subprocess.Popen[bytes], clone: Path, timeout: float = 60.0) -> int:
    """SIGINT to ``make run``'s group; if it has not exited after ``timeout`` seconds, SIGKILL
    and the clone's ``manage.py embedded_redis stop`` (a killed run cannot stop its server)."""
    try:
        os.killpg(process.pid, signal.SIGINT)
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        code = process.wait()
        subprocess.run(
            [str(clone / ".venv" / "bin" / "python"), "manage.py", "embedded_redis", "stop"],
            cwd=clone,
            capture_output=True,
            check=False,
        )
        return code
    except ProcessLookupError:
        return process.wait()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    url = f"http://127.0.0.1:{args.port}/"
    load_start = os.getloadavg()
    workdir = Path(tempfile.mkdtemp(prefix="followfeed-first-run-"))
    clone = workdir / "followfeed"
    log = workdir / "make-run.log"
    results: dict[str, Any] = {"port": args.port, "load_average_start": [round(x, 2) for x in load_start]}
    try:
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        results["commit"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True, check=False
        ).stdout.strip()
        print(f"first run: fresh clone of {results['commit']} in {clone}; make run on port {args.port}", flush=True)
        for name, goal in (("first_run", 60), ("restart", 5)):
            started = time.monotonic()
            process = start(clone, args.port, log)
            seconds, warming = first_page(url, started=started, timeout=args.timeout, process=process)
            results[f"{name}_seconds"] = round(seconds, 1)
            results[f"{name}_page_says_warming_up"] = warming
            print(
                f"  {name}: first page after {seconds:.1f} s (goal {goal} s){' while warming up' if warming else ''}", flush=True
            )
            results[f"{name}_stop_exit"] = stop(process, clone)
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        results["error"] = str(exc)
        print(f"first run failed: {exc}; the log: {log}", file=sys.stderr)
        tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
        results["log_tail"] = tail
    finally:
        results["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
        results["goals"] = {
            "first_run_seconds": {"target": 60, "met": results.get("first_run_seconds", 1e9) <= 60},
            "restart_seconds": {"target": 5, "met": results.get("restart_seconds", 1e9) <= 5},
        }
        results["measured_at"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        if args.out:
            Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
        if "error" not in results:
            shutil.rmtree(workdir, ignore_errors=True)
    return 1 if "error" in results else 0


if __name__ == "__main__":
    sys.exit(main())

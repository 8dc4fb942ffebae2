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
   is recorded. Then the time until its log says the background warm-up is
   done (notes replayed, the Redis mirror built).
3. SIGINT to ``make run`` (as Ctrl-C), wait for it to exit, ``make run``
   again: the time to the first 200 is the restart's figure (goal: 5 s).
4. Stops it and removes the clone.

The machine's load average is recorded at the start, beside each figure and
at the end; the figures are wall clock, on a machine that also runs
MariaDB, Redis and RabbitMQ. ``--cold-cache`` gives uv and pip empty caches
of their own, as on a machine that never installed these packages (every
wheel comes from the package index).
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
    parser.add_argument(
        "--cold-cache", action="store_true", help="empty package caches for uv and pip (a machine that never installed them)"
    )
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


def warmed_up(log: Path, *, offset: int, started: float, timeout: float, process: subprocess.Popen[bytes]) -> float | None:
    """Seconds from ``started`` until ``make run``'s ``log`` (read from byte ``offset``) says the
    background warm-up is done; None when it says no warm-up was needed.

    :raises RuntimeError: ``make run`` exited, the warm-up failed, or ``timeout`` passed.
    """
    while time.monotonic() - started < timeout:
        with log.open("rb") as handle:
            handle.seek(offset)
            text = handle.read()
        if b"Warmed up in" in text:
            return time.monotonic() - started
        if b"no warm-up" in text or b"nothing to warm up" in text:
            return None
        if b"warm-up interrupted" in text or b"Traceback" in text:
            raise RuntimeError("the warm-up failed")
        if process.poll() is not None:
            raise RuntimeError(f"make run exited with {process.returncode} while warming up")
        time.sleep(0.2)
    raise RuntimeError(f"the warm-up was not done within {timeout:.0f} s")


def start(clone: Path, port: int, log: Path, *, caches: Path | None = None) -> subprocess.Popen[bytes]:
    """``make run`` in ``clone``, in a process group of its own (so SIGINT reaches it as Ctrl-C
    would); ``caches``: a directory for uv's and pip's caches instead of the user's."""
    env = {**os.environ, "PORT": str(port), "FOLLOWFEED_DATA_DIR": data_dir()}
    env.pop("VIRTUAL_ENV", None)
    if caches is not None:
        env.update(UV_CACHE_DIR=str(caches / "uv"), PIP_CACHE_DIR=str(caches / "pip"))
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
    results: dict[str, Any] = {
        "port": args.port,
        "cold_cache": args.cold_cache,
        "load_average_start": [round(x, 2) for x in load_start],
    }
    caches = workdir / "caches" if args.cold_cache else None
    try:
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        results["commit"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True, check=False
        ).stdout.strip()
        print(f"first run: fresh clone of {results['commit']} in {clone}; make run on port {args.port}", flush=True)
        for name, goal in (("first_run", 60), ("restart", 5)):
            offset = log.stat().st_size if log.exists() else 0
            started = time.monotonic()
            process = start(clone, args.port, log, caches=caches)
            seconds, warming = first_page(url, started=started, timeout=args.timeout, process=process)
            results[f"{name}_seconds"] = round(seconds, 1)
            results[f"{name}_page_says_warming_up"] = warming
            results[f"{name}_load_average"] = round(os.getloadavg()[0], 2)
            print(
                f"  {name}: first page after {seconds:.1f} s (goal {goal} s){' while warming up' if warming else ''},"
                f" load {results[f'{name}_load_average']}",
                flush=True,
            )
            done = warmed_up(log, offset=offset, started=started, timeout=args.timeout, process=process)
            results[f"{name}_warm_up_seconds"] = None if done is None else round(done, 1)
            results[f"{name}_warm_up_load_average"] = round(os.getloadavg()[0], 2)
            said = "no warm-up needed" if done is None else f"warm-up done after {done:.1f} s"
            print(f"  {name}: {said}, load {results[f'{name}_warm_up_load_average']}", flush=True)
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

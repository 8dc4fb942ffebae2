#!/usr/bin/env python3
"""What a test run left on the machine's shared services: run ``before`` and ``after`` it.

    python3 scripts/check_test_footprint.py before
    make test
    python3 scripts/check_test_footprint.py after     # exit 1: the run left something

``before`` records the MariaDB databases (``SHOW DATABASES``), the RabbitMQ
queues and their ready messages (``rabbitmqctl list_queues name messages``)
and the key names of the system Redis's db 0 (127.0.0.1:6379). ``after``
fails when

- a database exists that did not before and is not a test one (``test_*``);
- a queue that existed before holds more messages than it did, or a queue
  that did not exist before holds messages (the run's queues are deleted, or
  at least drained, by the tests that made them);
- db 0 has a key it did not have;
- a service could not be read (the check would be blind).

New test databases, new empty queues and new exchanges are listed, not failed. Only the
standard library and the services' own command-line clients are used. The
state is kept in ``$FOOTPRINT_STATE`` (default ``artifacts/test-footprint.json``).
Another run on the same services at the same time shows up here too: the
report names everything it counts, so such an overlap can be told apart.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import cast

ROOT = Path(__file__).resolve().parents[1]
STATE = Path(os.environ.get("FOOTPRINT_STATE", ROOT / "artifacts" / "test-footprint.json"))
MARIADB = ["mariadb", "-uroot", "-h127.0.0.1", "-P3306", "--batch", "--skip-column-names"]
REDIS = ["redis-cli", "-h", "127.0.0.1", "-p", "6379", "-n", "0"]
SHOWN = 20  # names listed per finding


def run(command: list[str]) -> str:
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=180)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: exit {done.returncode}: {done.stderr.strip()[-500:]}")
    return done.stdout


def databases() -> list[str]:
    return sorted(line.strip() for line in run([*MARIADB, "-e", "SHOW DATABASES"]).splitlines() if line.strip())


def queues() -> dict[str, int]:
    """``{queue name: ready messages}`` of the default vhost."""
    found: dict[str, int] = {}
    for line in run(["rabbitmqctl", "-q", "list_queues", "name", "messages"]).splitlines():
        parts = line.rsplit("\t", 1)
        if len(parts) != 2 or not parts[1].strip().isdigit():
            continue  # the header, or a note from rabbitmqctl
        found[parts[0]] = int(parts[1])
    return found


def exchanges() -> list[str]:
    """The exchanges of the default vhost (a Celery queue's is named after it)."""
    lines = [line.strip() for line in run(["rabbitmqctl", "-q", "list_exchanges", "name"]).splitlines()]
    return sorted(line for line in lines[1 if lines[:1] == ["name"] else 0 :] if line)  # after the header


def redis_keys() -> list[str]:
    """The key names of db 0 (SCAN, never KEYS)."""
    return sorted(set(run([*REDIS, "--scan"]).splitlines()))


def snapshot() -> dict[str, object]:
    """Each service's figures, or the reason it could not be read (that service is then not checked)."""
    state: dict[str, object] = {}
    for name, read in (("databases", databases), ("queues", queues), ("exchanges", exchanges), ("redis_db0", redis_keys)):
        try:
            state[name] = read()
        except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
            state[name] = None
            state[f"{name}_error"] = f"{type(exc).__name__}: {exc}"
    return state


def listed(names: list[str]) -> str:
    more = f" (and {len(names) - SHOWN} more)" if len(names) > SHOWN else ""
    return ", ".join(names[:SHOWN]) + more


def compare(before: dict[str, object], after: dict[str, object]) -> tuple[list[str], list[str]]:
    """(failures, notes) of ``after`` against ``before``."""
    failures: list[str] = []
    notes: list[str] = []
    for name in ("databases", "queues", "redis_db0"):
        if before.get(name) is None or after.get(name) is None:
            failures.append(f"{name} could not be checked: {before.get(f'{name}_error') or after.get(f'{name}_error')}")

    if before.get("databases") is not None and after.get("databases") is not None:
        new = sorted(set(cast(list[str], after["databases"])) - set(cast(list[str], before["databases"])))
        kept = [name for name in new if not name.startswith("test_")]
        if kept:
            failures.append(f"databases that are not test ones were created and left: {listed(kept)}")
        if len(new) > len(kept):
            notes.append(f"new test databases (allowed): {listed([name for name in new if name.startswith('test_')])}")

    old_queues: dict[str, int] | None = before.get("queues")  # type: ignore[assignment]
    new_queues: dict[str, int] | None = after.get("queues")  # type: ignore[assignment]
    if old_queues is not None and new_queues is not None:
        grown = [
            f"{name} ({old_queues[name]} -> {count})"
            for name, count in sorted(new_queues.items())
            if name in old_queues and count > old_queues[name]
        ]
        if grown:
            failures.append(f"queues that hold more messages than before: {listed(grown)}")
        created = {name: count for name, count in sorted(new_queues.items()) if name not in old_queues}
        full = [f"{name} ({count})" for name, count in created.items() if count > 0]
        if full:
            failures.append(f"new queues left with messages: {listed(full)}")
        empty = [name for name, count in created.items() if count == 0]
        if empty:
            notes.append(f"new empty queues: {listed(empty)}")

    if before.get("exchanges") and after.get("exchanges"):
        made = sorted(set(cast(list[str], after["exchanges"])) - set(cast(list[str], before["exchanges"])))
        if made:
            notes.append(f"new exchanges (hold nothing; a test that deletes its queue deletes its exchange too): {listed(made)}")

    if before.get("redis_db0") is not None and after.get("redis_db0") is not None:
        added = sorted(set(cast(list[str], after["redis_db0"])) - set(cast(list[str], before["redis_db0"])))
        if added:
            failures.append(f"keys added to Redis db 0 (127.0.0.1:6379): {len(added)}: {listed(added)}")
    return failures, notes


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1] not in ("before", "after"):
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print(f"usage: {argv[0]} before|after", file=sys.stderr)
        return 2
    if argv[1] == "before":
        state = snapshot()
        STATE.parent.mkdir(parents=True, exist_ok=True)
        STATE.write_text(json.dumps(state))
        counts = {
            name: (len(cast(list[str], value)) if value is not None else "unreadable")
            for name, value in state.items()
            if not name.endswith("_error")
        }
        print(f"check_test_footprint: recorded {counts} in {STATE}")
        return 0
    if not STATE.exists():
        print(f"check_test_footprint: no {STATE}; run 'before' first", file=sys.stderr)
        return 2
    failures, notes = compare(json.loads(STATE.read_text()), snapshot())
    for note in notes:
        print(f"check_test_footprint: note: {note}")
    for failure in failures:
        print(f"check_test_footprint: FAIL: {failure}", file=sys.stderr)
    if not failures:
        print("check_test_footprint: the run left nothing on the shared services")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

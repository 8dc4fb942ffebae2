"""Turns on the machine's RabbitMQ: the soak test stops and starts it, so no other test may talk to
it meanwhile, in this process, another pytest-xdist process or another test run on the machine.

A test that talks to the broker holds a shared lock for its duration; the soak test holds it
alone. A second lock, the gate, lets a waiting soak test in before tests that ask after it.
"""

from __future__ import annotations

import fcntl
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK = Path(tempfile.gettempdir()) / "followfeed-tests-rabbitmq.lock"
GATE = Path(tempfile.gettempdir()) / "followfeed-tests-rabbitmq.gate"


@contextmanager
def broker_turn(*, alone: bool) -> Iterator[None]:
    """Hold the broker shared (``alone`` False) or alone (True) until the block ends; blocks until then."""
    with GATE.open("a") as gate, LOCK.open("a") as lock:
        if alone:
            fcntl.flock(gate, fcntl.LOCK_EX)  # tests asking from now on wait behind this one
            fcntl.flock(lock, fcntl.LOCK_EX)
        else:
            fcntl.flock(gate, fcntl.LOCK_SH)
            fcntl.flock(lock, fcntl.LOCK_SH)
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            if alone:
                fcntl.flock(gate, fcntl.LOCK_UN)

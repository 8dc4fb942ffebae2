"""Turns on the machine's RabbitMQ (``tests.support.broker``): the soak test's turn alone waits for
the shared turns held before it, and turns asked after it wait for it."""

from __future__ import annotations

import fcntl
import threading
import time
from pathlib import Path

import pytest

from tests.support import broker


def gate_taken_alone(gate: Path) -> bool:
    """Whether someone holds the gate alone (a shared try on it fails)."""
    with gate.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def test_a_turn_alone_waits_for_the_shared_turn_before_it_and_a_later_shared_turn_waits_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(broker, "LOCK", tmp_path / "lock")
    monkeypatch.setattr(broker, "GATE", tmp_path / "gate")
    events: list[str] = []

    def alone() -> None:
        with broker.broker_turn(alone=True):
            events.append("alone in")
            events.append("alone out")

    def later() -> None:
        with broker.broker_turn(alone=False):
            events.append("later in")

    with broker.broker_turn(alone=False):
        soak = threading.Thread(target=alone)
        soak.start()
        for _ in range(1000):
            if gate_taken_alone(tmp_path / "gate"):
                break
            time.sleep(0.01)
        else:
            pytest.fail("the turn alone never took the gate")
        after = threading.Thread(target=later)
        after.start()
        after.join(timeout=0.3)
        events.append("first out")
    soak.join(timeout=30)
    after.join(timeout=30)

    assert events == ["first out", "alone in", "alone out", "later in"]

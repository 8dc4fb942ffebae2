"""A per-process thread that sends the wake-up messages of committed outbox entries, a few at once.

Ids of task kinds wait up to ``OUTBOX_SEND_COALESCE_SECONDS`` and go in one message (at most
``SEND_BATCH`` each); lost ids are harmless (the drain applies their entries). Started on first
use per process (again after a fork); flushed at exit. Design: docs/architecture.md#the-outbox-and-its-kinds.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence

logger = logging.getLogger(__name__)

# Ids per message at most: a worker applies one message's entries one after another.
SEND_BATCH = 100

Publish = Callable[[list[int]], None]


class Sender:
    """Coalesces id lists handed to ``put`` into messages sent by ``publish`` from a thread."""

    def __init__(self, publish: Publish, *, window_seconds: float) -> None:
        self.publish = publish
        self.window = window_seconds
        self.pid = os.getpid()
        self.queue: queue.SimpleQueue[list[int] | threading.Event] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name="outbox-sender", daemon=True)
        self.thread.start()

    def put(self, ids: Sequence[int]) -> None:
        """Queue ``ids`` for the next message (returns at once)."""
        self.queue.put(list(ids))

    def flush(self, timeout: float) -> bool:
        """Send what is queued now; wait at most ``timeout`` seconds.

        :returns: whether it was sent in time.
        """
        done = threading.Event()
        self.queue.put(done)
        return done.wait(timeout)

    def _run(self) -> None:
        while True:
            first = self.queue.get()
            ids: list[int] = []
            flushed: list[threading.Event] = []
            if isinstance(first, threading.Event):
                flushed.append(first)
            else:
                ids += first
                deadline = time.monotonic() + self.window
                while len(ids) < SEND_BATCH and (left := deadline - time.monotonic()) > 0:
                    try:
                        more = self.queue.get(timeout=left)
                    except queue.Empty:
                        break
                    if isinstance(more, threading.Event):
                        flushed.append(more)
                        break
                    ids += more
            for start in range(0, len(ids), SEND_BATCH):
                try:
                    self.publish(ids[start : start + SEND_BATCH])
                except Exception:  # the thread must live on; the drain applies the entries
                    logger.exception("sending outbox entries %s failed (the drain applies them)", ids[start : start + SEND_BATCH])
            for event in flushed:
                event.set()


_senders: dict[int, Sender] = {}
_lock = threading.Lock()


def sender_for(publish: Publish, *, window_seconds: float) -> Sender:
    """This process's sender (started on first use, and again in a forked child)."""
    pid = os.getpid()
    found = _senders.get(pid)
    if found is None:
        with _lock:
            found = _senders.get(pid)
            if found is None:
                _senders.clear()  # a parent's sender (after a fork) has no thread here
                found = _senders[pid] = Sender(publish, window_seconds=window_seconds)
    return found


def flush_sends(timeout: float = 2.0) -> bool:
    """Send what this process's sender holds now (tests, and at exit).

    :returns: whether it was sent within ``timeout`` seconds (True when there is no sender).
    """
    found = _senders.get(os.getpid())
    return True if found is None else found.flush(timeout)


atexit.register(flush_sends)

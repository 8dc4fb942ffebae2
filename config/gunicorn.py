"""gunicorn's settings file (``gunicorn -c config/gunicorn.py``): metrics of workers that exited.

With ``PROMETHEUS_MULTIPROC_DIR`` set, every worker writes its metrics into
files there; when one exits its gauges of live processes must stop counting
(``mark_process_dead``), or a restarted worker's breaker state would linger.
"""

from __future__ import annotations

import os
from typing import Any


def child_exit(server: Any, worker: Any) -> None:
    """gunicorn's hook, in the arbiter, after a worker exited."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]

"""The Celery application: settings come from Django settings (CELERY_ prefix)."""

import os

from celery import Celery
from celery.signals import worker_process_shutdown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = Celery("followfeed")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_process_shutdown.connect  # type: ignore[untyped-decorator]
def _metrics_of_a_dead_child(pid: int | None = None, **kwargs: object) -> None:
    """A prefork child that exits stops counting in the live gauges of ``PROMETHEUS_MULTIPROC_DIR``."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid or os.getpid())  # type: ignore[no-untyped-call]

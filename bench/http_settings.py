"""Settings of the HTTP-under-load benchmark (``bench/http_load.py``): production's, plus the floor.

gunicorn, the Celery worker and the harness's setup process all run with
``DJANGO_SETTINGS_MODULE=bench.http_settings``: ``config.settings.production``
unchanged (it still requires ``DJANGO_SECRET_KEY``, ``DATABASE_URL``,
``REDIS_URL`` and ``CELERY_BROKER_URL``, which the harness sets), with two
changes that exist only for the benchmark:

- ``ROOT_URLCONF`` is ``bench.http_urls``: the site's URLs plus the floor,
  a minimal view answered through the same middleware;
- ``STATIC_ROOT`` comes from ``BENCH_STATIC_ROOT`` (a temporary directory
  the harness runs ``collectstatic`` into), so the benchmark never writes
  into the project's ``staticfiles/``.

Everything else the benchmark changes is an environment variable the
product already reads (the harness sets them): the abuse limits
``FOLLOW_RATE`` and ``NOTE_RATE`` raised to a billion a day (one account
toggling follows and publishing for minutes is the load, not abuse; every
action is still counted), ``DJANGO_ALLOWED_HOSTS``, ``LOG_LEVEL``
``WARNING`` (the logs keep warnings and errors), and for the
database-only server a ``REDIS_URL`` nobody listens on with
``REDIS_CIRCUIT_OPEN_SECONDS`` an hour. HTTPS stays on:
the load generator sends ``X-Forwarded-Proto: https`` as the TLS proxy of
production does, so the SSL redirect, secure cookies, HSTS and the CSRF
origin check run as in production.
"""

import os
from pathlib import Path

from config.settings.production import *  # noqa: F403

ROOT_URLCONF = "bench.http_urls"
STATIC_ROOT = Path(os.environ.get("BENCH_STATIC_ROOT", "/tmp/followfeed-http-static"))

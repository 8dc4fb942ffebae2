"""Settings of the benchmark harness (``bench/run.py``): the project's settings plus django-activity-stream.

django-activity-stream (app ``actstream``) is a benchmark-only dependency
(the ``[bench]`` extra): it is installed here and nowhere else, so the
product never loads it. Everything else is ``config.settings.base`` read
from the environment, with these defaults:

- ``DATABASE_URL``  ``mysql://root:@127.0.0.1:3306/followfeed_bench`` (a
  database of its own; the harness creates and migrates it)
- ``REDIS_URL``  (``bench/run.py`` sets it to the private redis-server it
  starts; ``--redis-url`` to choose) ``redis://127.0.0.1:6379/1`` and ``REDIS_KEY_PREFIX``
  ``bench:`` (every key the harness writes is under that prefix). Logical
  database 1, away from the application's (0) and the tests' keys: a
  SCAN-based cleanup walks every key of its database, and the benchmark's
  ~350k keys in the tests' database once made every test's teardown (and
  Redis for everyone) measurably slower
- ``FANOUT_PULL_THRESHOLD`` 1,000,000, so the 100k-follower account is fanned
  out on write (the publish benchmark); the product's default is 10,000
- ``FEED_FANOUT_PART_FOLLOWERS`` 10,000,000, so that fan-out runs as one job in
  one process, the shape the raw ZADD rate is measured in (the product
  splits it into parts for several workers: ``bench/fanout_workers.py``)
- Celery with the local RabbitMQ (``CELERY_BROKER_URL``, default
  ``amqp://guest:guest@127.0.0.1:5672//``) on a queue of its own,
  ``CELERY_TASK_DEFAULT_QUEUE`` ``bench``, which no worker consumes: a request
  path (follow, publish) is timed with its real cost of queueing its
  background tasks, the harness runs the fan-out task body itself where it
  is timed, and the queue is deleted at the end
- the abuse limits (``FOLLOW_RATE``, ``NOTE_RATE``) a billion a day: every
  follow and note is still counted (its cost is in the figures), but one
  account publishing and following thousands of times is the benchmark,
  not abuse
"""

import os

os.environ.setdefault("DATABASE_URL", "mysql://root:@127.0.0.1:3306/followfeed_bench")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/1")
os.environ.setdefault("REDIS_KEY_PREFIX", "bench:")
os.environ.setdefault("FANOUT_PULL_THRESHOLD", "1000000")
os.environ.setdefault("FEED_FANOUT_PART_FOLLOWERS", "10000000")
os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "false")
os.environ.setdefault("CELERY_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//")
os.environ.setdefault("CELERY_TASK_DEFAULT_QUEUE", "bench")
os.environ.setdefault("FOLLOW_RATE", "1000000000/d")
os.environ.setdefault("NOTE_RATE", "1000000000/d")

from config.settings.base import *  # noqa: F403
from config.settings.base import INSTALLED_APPS

DEBUG = False  # no query log: it would grow without bound and slow every query
INSTALLED_APPS = [*INSTALLED_APPS, "actstream"]
# Its defaults: generic relations (actor, object) fetched in bulk with each stream page.
ACTSTREAM_SETTINGS = {"FETCH_RELATIONS": True, "USE_JSONFIELD": False}
# The breaker opens only when the harness opens it (database-only path).
REDIS_CIRCUIT_OPEN_SECONDS = 3600.0

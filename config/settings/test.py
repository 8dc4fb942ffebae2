"""Test settings: real MariaDB and real Redis unless the environment says otherwise.

Each test gets its own Redis key prefix (fixture ``redis_isolated``), so tests
never see each other's keys.
"""

import os

os.environ.setdefault("DATABASE_URL", "mysql://root:@127.0.0.1:3306/followfeed")
# Logical database 9: keys of demos and benchmarks in db 0 never slow the
# per-test SCAN clean-up.
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/9")

from .base import *  # noqa: F403
from .base import env

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Unit tests run Celery eagerly; tests about delivery start a real worker
# with their own broker settings.
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=True)
CELERY_BROKER_URL = env("CELERY_BROKER_URL", default="amqp://guest:guest@127.0.0.1:5672//")
REDIS_CIRCUIT_OPEN_SECONDS = 0.0
# One test account follows and publishes far more than a person may; the
# tests of the limits set these back (tests/core/test_limits.py).
FOLLOW_RATE = env("FOLLOW_RATE", default="1000000/m")
NOTE_RATE = env("NOTE_RATE", default="1000000/m")
SIGNUP_RATE = env("SIGNUP_RATE", default="1000000/m")

"""Smoke test of the embedded default: SQLite, the embedded Valkey server, eager Celery."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import django, json
django.setup()
from django.conf import settings
from django.core.management import call_command
from django.test import Client
from io import StringIO
assert settings.REDIS_EMBEDDED and settings.CELERY_TASK_ALWAYS_EAGER
assert settings.DATABASES["default"]["ENGINE"].endswith("sqlite3")
call_command("migrate", verbosity=0)
call_command("import_graph", "wiki-Vote.txt.gz", limit=2000, password="pw", stdout=StringIO(), verbosity=0)
from users.models import User
from core.redis import get_redis
from social import redis_keys
client = Client()
assert client.login(username="u3", password="pw")
me = User.objects.get(username="u3")
from social.models import Follow
followed = set(Follow.objects.filter(follower=me).values_list("followee_id", flat=True))
target = User.objects.exclude(pk__in=followed | {me.pk}).order_by("pk").first()
before = client.get(f"/api/users/{target.pk}").json()["data"]["followers"]
follow = client.put(f"/api/follow/{target.pk}/true").json()
after = client.get(f"/api/users/{target.pk}").json()["data"]["followers"]
page = client.get(f"/u/{target.username}/")
print(json.dumps({
    "before": before, "after": after, "changed": follow["data"]["changed"],
    "page": page.status_code,
    "in_redis": bool(get_redis().sismember(redis_keys.followers_set_key(target.pk), me.pk)),
    "redis_class": get_redis().connection_pool.connection_class.__name__,
    "server": get_redis().info("server").get("server_name", "redis"),
    "lua": get_redis().eval("return 1 + 1", 0),
}))
"""


def test_embedded_default_serves_a_real_slice(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "CELERY_TASK_ALWAYS_EAGER"}}
    env.update(DJANGO_SETTINGS_MODULE="config.settings.local", FOLLOWFEED_VAR_DIR=str(tmp_path))
    env["DJANGO_ALLOWED_HOSTS"] = "testserver,localhost"

    try:
        result = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    finally:
        stop = [sys.executable, "manage.py", "embedded_redis", "stop"]
        stopped = subprocess.run(stop, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)

    assert result.returncode == 0, result.stderr[-3000:]
    import json

    data = json.loads(result.stdout.strip().splitlines()[-1])
    assert data["page"] == 200
    assert data["after"] == data["before"] + 1
    assert data["changed"] is True
    assert data["in_redis"] is True
    assert data["redis_class"] == "UnixDomainSocketConnection"  # the embedded server in FOLLOWFEED_VAR_DIR
    assert data["server"] == "valkey" and data["lua"] == 2  # a real server: scripts run
    assert (tmp_path / "db.sqlite3").exists() and (tmp_path / "valkey" / "appendonlydir").is_dir()
    assert stopped.returncode == 0 and "stopped" in stopped.stdout

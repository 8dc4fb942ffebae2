"""The benchmark harness runs end to end on a small slice of the real graph and writes its three outputs.

It runs ``bench/run.py --quick`` as the README's ``make bench`` would (a
child process with the benchmark's settings), on databases of its own named
after this test run's database, a private redis-server and a Celery queue
of its own; both databases are dropped afterwards. The figures of a quick
run are not comparable with a full run: this test checks that every
operation is measured every way and every output is written, not speeds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from tests.support.broker import broker_turn

# bench/run.py's child process uses MariaDB and RabbitMQ (no fixture of this module says so).
pytestmark = pytest.mark.services

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = {
    "follow_unfollow": {"redis", "database", "actstream"},
    "is_following": {"redis", "database", "actstream"},
    "counts": {"redis", "database", "actstream"},
    "followers_page_1_ids": {"redis", "database"},
    "followers_page_1": {"redis", "database", "actstream"},
    "followers_page_depth_ids": {"redis", "database", "offset"},
    "followers_page_depth": {"redis", "database", "offset", "actstream"},
    "followers_page_1_sharded_ids": {"redis", "database"},
    "followers_page_1_sharded": {"redis", "database", "actstream"},
    "followers_page_depth_sharded_ids": {"redis", "database", "offset"},
    "followers_page_depth_sharded": {"redis", "database", "offset", "actstream"},
    "common_follows_ids": {"redis", "database"},
    "common_follows": {"redis", "database", "actstream"},
    "familiar_followers": {"redis", "database", "actstream"},
    "home_feed_page_1": {"redis", "database", "actstream"},
    "home_feed_page_20": {"redis", "database", "actstream"},
    "publish": {"redis", "database", "actstream"},
}


def database_url(name: str) -> str:
    db = settings.DATABASES["default"]
    return f"mysql://{db['USER']}:{db['PASSWORD']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 3306}/{name}"


def drop_database(name: str) -> None:
    import MySQLdb

    db = settings.DATABASES["default"]
    conn = MySQLdb.connect(host=db["HOST"] or "127.0.0.1", user=db["USER"], passwd=db["PASSWORD"], port=int(db["PORT"] or 3306))
    try:
        conn.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
    finally:
        conn.close()


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[subprocess.CompletedProcess[str], Path]]:
    """One ``bench/run.py --quick`` run for every test of this module."""
    name = f"{settings.DATABASES['default']['TEST']['NAME']}_benchsmoke"
    out = tmp_path_factory.mktemp("bench-results")
    env = {
        **os.environ,
        "BENCH_DATABASE_URL": database_url(name),
        "BENCH_CELERY_QUEUE": "bench-smoke",
        "BENCH_REDIS_KEY_PREFIX": "benchsmoke:",
    }
    try:
        # The run publishes to the machine's RabbitMQ; this fixture outlives each test's own turn.
        with broker_turn(alone=False):
            done = subprocess.run(
                [sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--fresh", "--budget", "0.05", "--out", str(out)],
                env=env,
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
        yield done, out
    finally:
        drop_database(name)
        drop_database(f"{name}_scale")


def results(out: Path) -> dict[str, Any]:
    return json.loads((out / "results.json").read_text())


class TestQuickRun:
    def test_exits_cleanly(self, quick_run):
        done, _ = quick_run

        assert done.returncode == 0, done.stderr[-3000:]

    def test_measures_every_operation_every_way(self, quick_run):
        _, out = quick_run

        measured = {op["key"]: op["ways"] for op in results(out)["operations"]}

        assert {key: set(ways) for key, ways in measured.items()} == OPERATIONS
        for key, ways in measured.items():
            for way, figures in ways.items():
                assert figures["calls"] >= 20, (key, way)
                assert 0 < figures["p50_us"] <= figures["p99_us"], (key, way)
                assert set(figures["faster_than"]) == set(ways) - {way}

    def test_measures_the_raw_limits_and_the_fan_out(self, quick_run):
        _, out = quick_run

        data = results(out)

        assert {"redis_ping", "redis_zadd_pipelined", "redis_zrevrange_page", "mariadb_pk_select", "redis_ping_end"} <= set(
            data["raw"]
        )
        assert data["raw"]["redis_zadd_pipelined"]["ops_per_s"] > 0
        assert data["fan_out"]["followers"] == 3000
        assert data["fan_out"]["inbox_writes"] == 3000  # every follower made an active reader gets the note
        assert data["fan_out"]["inbox_writes_per_s"] > 0

    def test_the_scaling_series_rebuilds_without_drift(self, quick_run):
        _, out = quick_run

        series = {row["fraction"]: row for row in results(out)["scaling"]["series"]}

        assert set(series) == {1.0, 0.5}
        assert series[0.5]["edges"] < series[1.0]["edges"]
        for row in series.values():
            assert row["import"]["method"] == "load"
            assert row["reconcile"]["drift"] == 0
            assert row["memory"]["bytes"] > 0 and row["memory"]["keys"] > 0
        assert "memory_defaults" in series[1.0]

    def test_writes_the_table_and_the_chart(self, quick_run):
        _, out = quick_run

        table = (out / "results.md").read_text()
        chart = (out / "results.png").read_bytes()

        for op in results(out)["operations"]:
            assert f"| {op['title']} |" in table
        assert "| goal | measured | target | met |" in table
        assert chart[:8] == b"\x89PNG\r\n\x1a\n" and len(chart) > 10_000

"""The operators' commands: help text, dry runs that write nothing, and exit codes scripts can use.

Exit codes (``core.exit_codes``): 0 done, 1 error, 2 usage,
3 dry run found drift, 4 a service unreachable (retry later), 130 interrupted.
"""

from __future__ import annotations

import os
import subprocess
import sys
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings
from django.core.management import call_command, load_command_class
from django.core.management.base import CommandError
from django.db import connection

from core.exit_codes import EXIT_DRIFT_FOUND, EXIT_ERROR, EXIT_UNAVAILABLE, EXIT_USAGE
from feed import redis_keys as feed_keys
from social import redis_keys
from social.models import Follow
from users.models import User

pytestmark = pytest.mark.django_db

COMMANDS = {
    # name: app
    "import_graph": "datatools",
    "rebuild_social_cache": "social",
    "reconcile_social_cache": "social",
    "make_celebrity": "datatools",
    "run_demo": "datatools",
    "rebuild_feeds": "feed",
    "reconcile_feeds": "feed",
    "simulate_activity": "datatools",
    "embedded_redis": "core",
}
DJANGO_OPTIONS = {"help", "version", "verbosity", "settings", "pythonpath", "traceback", "no_color", "force_color", "skip_checks"}


def parser_of(name: str) -> Any:
    return load_command_class(COMMANDS[name], name).create_parser("manage.py", name)


def run(name: str, *argv: str) -> str:
    out = StringIO()
    call_command(name, *argv, stdout=out, stderr=StringIO(), verbosity=0)
    return out.getvalue()


def dead_redis(*args: Any, **kwargs: Any) -> Any:
    raise redis.exceptions.ConnectionError("Connection refused")


class TestHelp:
    @pytest.mark.parametrize("name", list(COMMANDS))
    def test_every_command_explains_itself_and_its_exit_codes(self, name: str) -> None:
        text = " ".join(parser_of(name).format_help().split())

        assert "Exit codes: 0 done" in text
        assert len(parser_of(name).description or "") > 80

    @pytest.mark.parametrize("name", list(COMMANDS))
    def test_every_option_has_help(self, name: str) -> None:
        undocumented = [
            action.dest for action in parser_of(name)._actions if action.dest not in DJANGO_OPTIONS and not action.help
        ]

        assert undocumented == []

    @pytest.mark.parametrize("name", list(COMMANDS))
    def test_every_command_that_changes_data_has_a_dry_run(self, name: str) -> None:
        assert "--dry-run" in parser_of(name).format_help()


class TestDryRuns:
    def test_rebuild_social_cache_counts_and_writes_nothing(self, alice: Any, bob: Any, follow: Any, redis_client: Any) -> None:
        follow(alice, bob)
        redis_client.unlink(redis_keys.following_set_key(alice.pk))

        text = run("rebuild_social_cache", "--dry-run")
        one = run("rebuild_social_cache", "--dry-run", "--user", str(alice.pk))

        assert "would rebuild" in text and "1 follows" in text
        assert "would rebuild 1 users, 1 follows" in one
        assert not redis_client.exists(redis_keys.following_set_key(alice.pk))

    def test_import_graph_reads_and_writes_nothing(self, tmp_path: Path) -> None:
        edges = tmp_path / "edges.txt"
        edges.write_text("# a follows b\n1 2\n2 3\n3 3\n")

        text = run("import_graph", str(edges), "--dry-run")

        assert "3 edges, 1 self-loops (dry run, nothing written)" in text
        assert User.objects.count() == 0 and Follow.objects.count() == 0

    def test_make_celebrity_writes_nothing(self) -> None:
        text = run("make_celebrity", "--followers", "5", "--username", "star", "--dry-run")

        assert "would add about 5 fans" in text
        assert not User.objects.filter(username__in=["star", "fan1_0"]).exists()

    def test_rebuild_feeds_writes_nothing(self, alice: Any, redis_client: Any) -> None:
        text = run("rebuild_feeds", "--dry-run")

        assert "would rebuild" in text
        assert not redis_client.exists(feed_keys.inbox_key(alice.pk))
        assert not redis_client.exists(feed_keys.outbox_key(alice.pk))

    def test_run_demo_prints_its_plan(self) -> None:
        text = run("run_demo", "--dry-run", "--no-serve")

        assert "would apply 0 migrations" in text
        assert "would import" in text  # this test database holds no follows


class TestExitCodes:
    @pytest.mark.parametrize(
        ("name", "target"),
        [
            ("rebuild_social_cache", "social.rebuild.get_redis"),
            ("reconcile_social_cache", "social.reconcile.get_redis"),
            ("rebuild_feeds", "feed.rebuild.get_redis"),
        ],
    )
    def test_redis_unreachable_is_4(self, name: str, target: str, alice: Any, monkeypatch: Any) -> None:
        monkeypatch.setattr(target, dead_redis)

        with pytest.raises(CommandError) as error:
            run(name)

        assert error.value.returncode == EXIT_UNAVAILABLE == 4

    def test_make_celebrity_with_redis_unreachable_is_4(self, monkeypatch: Any) -> None:
        monkeypatch.setattr("datatools.management.commands.make_celebrity.celebrity_make", dead_redis)

        with pytest.raises(CommandError) as error:
            run("make_celebrity", "--followers", "1")

        assert error.value.returncode == EXIT_UNAVAILABLE

    @pytest.mark.parametrize(
        "argv",
        [
            ["rebuild_social_cache", "--user", "999999999"],
            ["rebuild_social_cache", "--dry-run", "--user", "999999999"],
            ["reconcile_social_cache", "--user", "999999999"],
            ["rebuild_feeds", "--user", "999999999"],
            ["make_celebrity", "--followers", "-1"],
            ["import_graph", "/no/such/file.txt", "--dry-run"],
        ],
    )
    def test_a_missing_account_or_file_or_bad_value_is_1(self, argv: list[str]) -> None:
        with pytest.raises(CommandError) as error:
            run(*argv)

        assert error.value.returncode == EXIT_ERROR == 1

    def test_reconcile_dry_run_with_drift_is_3(self, alice: Any, bob: Any, follow: Any, redis_client: Any) -> None:
        follow(alice, bob)
        redis_client.srem(redis_keys.following_set_key(alice.pk), bob.pk)

        with pytest.raises(SystemExit) as exit_info:
            run("reconcile_social_cache", "--dry-run")

        assert exit_info.value.code == EXIT_DRIFT_FOUND == 3

    def test_reconcile_dry_run_without_drift_is_0(self, alice: Any, bob: Any, follow: Any) -> None:
        follow(alice, bob)

        assert "edges_missing=0" in run("reconcile_social_cache", "--dry-run")


class TestExitCodesOfTheRealProcess:
    """``manage.py`` in a subprocess, as cron or a deploy script runs it."""

    def run_manage(self, *argv: str) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
            "DATABASE_URL": f"mysql://root:@127.0.0.1:3306/{connection.settings_dict['NAME']}",
        }
        return subprocess.run(
            [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), *argv],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def test_usage_error_is_2(self) -> None:
        result = self.run_manage("reconcile_social_cache", "--no-such-option")

        assert result.returncode == EXIT_USAGE == 2
        assert "unrecognized arguments" in result.stderr

    def test_missing_account_is_1(self) -> None:
        if connection.vendor != "mysql":
            pytest.skip("the subprocess reads the MariaDB test database")

        result = self.run_manage("rebuild_social_cache", "--user", "999999999", "--dry-run")

        assert result.returncode == EXIT_ERROR == 1
        assert "no user 999999999" in result.stderr

"""The SQLite bulk load (the embedded default's import): the same rows as the other paths, one
transaction, PRAGMAs and indexes restored, an import or a replay killed midway leaves nothing.

SQLite is not the test database (MariaDB is), so each test runs a script under
``config.settings.local`` on a database in its own directory, in a subprocess.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from datatools.datasets import dataset_path, read_edges
from tests.support.graph import write_edges

ROOT = Path(__file__).resolve().parents[2]
EDGES = "# Directed graph\n# FromNodeId\tToNodeId\n1\t2\n2\t1\n3\t3\n1\t3\n\n4\t1\n1\t2\n5\t4\n"

PRELUDE = r"""
import django, json, os, signal, sys
from pathlib import Path
django.setup()
from django.core.management import call_command
from django.db import connection
call_command("migrate", verbosity=0)
connection.ensure_connection()
raw = connection.connection
PRAGMAS = ("synchronous", "cache_size", "temp_store", "threads")
def pragmas():
    return {name: raw.execute(f"PRAGMA {name}").fetchone()[0] for name in PRAGMAS}
def indexes():
    return raw.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'social_follow' ORDER BY name").fetchall()
def die_after_first(count):
    os.kill(os.getpid(), signal.SIGKILL)
"""

IMPORT_TWICE = (
    PRELUDE
    + r"""
from datatools.importer import graph_import
from social.models import Follow
schema, before = indexes(), pragmas()
first = graph_import(Path(sys.argv[1]), password="pw")
again = graph_import(Path(sys.argv[1]), password="pw")
rows = raw.execute(
    "SELECT f.id, a.username, b.username, CAST(f.created_at AS TEXT) FROM social_follow f "
    "JOIN users_user a ON a.id = f.follower_id JOIN users_user b ON b.id = f.followee_id ORDER BY f.id"
).fetchall()
print(json.dumps({
    "first": [first.method, first.users_created, first.edges_read, first.self_loops, first.duplicates, first.edges_inserted],
    "again": [again.method, again.users_created, again.edges_inserted],
    "rows": rows,
    "orm": [[a, b, at.isoformat()] for a, b, at in Follow.objects.order_by("id").values_list("follower__username", "followee__username", "created_at")],
    "users": raw.execute("SELECT id, username FROM users_user ORDER BY id").fetchall(),
    "schema_kept": indexes() == schema,
    "pragmas_restored": pragmas() == before,
    "sign_in": __import__("django.contrib.auth", fromlist=["authenticate"]).authenticate(username="u4", password="pw") is not None,
}))
"""
)

KILLED_IMPORT = (
    PRELUDE
    + r"""
from datatools.importer import graph_import
graph_import(Path(sys.argv[1]), password="pw", on_progress=die_after_first)
"""
)

COUNTS = (
    PRELUDE
    + r"""
print(json.dumps({
    "follows": raw.execute("SELECT COUNT(*) FROM social_follow").fetchone()[0],
    "users": raw.execute("SELECT COUNT(*) FROM users_user").fetchone()[0],
    "notes": raw.execute("SELECT COUNT(*) FROM feed_note").fetchone()[0],
    "indexes": [name for name, _ in indexes()],
    "integrity": raw.execute("PRAGMA integrity_check").fetchone()[0],
}))
"""
)

IMPORT_ONCE = (
    PRELUDE
    + r"""
from datatools.importer import graph_import
stats = graph_import(Path(sys.argv[1]), password="pw")
print(json.dumps({"method": stats.method, "inserted": stats.edges_inserted}))
"""
)

KILLED_REPLAY = (
    PRELUDE
    + r"""
from datatools import simulate
from datatools.datasets import dataset_path
plan = simulate.plan_replay(dataset_path(simulate.HIGGS_ACTIVITY), notes=5000, accounts=simulate.accounts_by_followers(), end=simulate.default_end())
assert len(plan.rows) > simulate.INSERT_BATCH
simulate.replay(plan, on_progress=die_after_first)
"""
)

NOTE_COUNTS = (
    PRELUDE
    + r"""
from feed import services
from feed.models import AuthorNoteCount
from users.models import User
rows = dict(raw.execute("SELECT author_id, notes FROM feed_authornotecount").fetchall())
counted = dict(raw.execute("SELECT author_id, COUNT(*) FROM feed_note GROUP BY author_id").fetchall())
author = min(rows)
services.note_create(author=User.objects.get(pk=author), body="one more")
print(json.dumps({
    "rows": {str(k): v for k, v in rows.items()},
    "counted": {str(k): v for k, v in counted.items()},
    "author": author,
    "after_publish": AuthorNoteCount.objects.get(author_id=author).notes,
}))
"""
)


def run_local(script: str, var_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` under the local settings, with its SQLite database in ``var_dir``."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CELERY_BROKER_URL"}}
    env.update(DJANGO_SETTINGS_MODULE="config.settings.local", FOLLOWFEED_VAR_DIR=str(var_dir))
    # REDIS_URL stays that of the tests: nothing here needs the embedded server.
    return subprocess.run(
        [sys.executable, "-c", script, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def result_of(done: subprocess.CompletedProcess[str]) -> dict:
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


class TestSqliteImport:
    def test_one_transaction_gives_the_rows_of_the_other_paths_and_restores_the_connection(self, tmp_path):
        path = write_edges(tmp_path / "g.txt.gz", EDGES)

        data = result_of(run_local(IMPORT_TWICE, tmp_path / "var", str(path)))

        assert data["first"] == ["sqlite", 5, 7, 1, 1, 5]
        assert data["again"] == ["sqlite", 0, 0]  # a re-run changes nothing
        # Ids in file order, Django's text for whole seconds, one second per edge from IMPORT_EPOCH.
        assert data["rows"] == [
            [1, "u1", "u2", "2009-02-01 00:00:00"],
            [2, "u2", "u1", "2009-02-01 00:00:01"],
            [3, "u1", "u3", "2009-02-01 00:00:02"],
            [4, "u4", "u1", "2009-02-01 00:00:03"],
            [5, "u5", "u4", "2009-02-01 00:00:04"],
        ]
        assert [at for _, _, at in data["orm"]] == [f"2009-02-01T00:00:0{i}+00:00" for i in range(5)]
        assert data["users"] == [[1, "u1"], [2, "u2"], [3, "u3"], [4, "u4"], [5, "u5"]]  # by node id
        assert data["schema_kept"] is True  # the dropped indexes are back, as migrations made them
        assert data["pragmas_restored"] is True
        assert data["sign_in"] is True

    def test_an_import_killed_midway_leaves_nothing_and_runs_again(self, tmp_path):
        path = dataset_path("wiki-Vote.txt.gz")  # three batches of follows
        expected = len({(a, b) for a, b in read_edges(path) if a != b})

        killed = run_local(KILLED_IMPORT, tmp_path, str(path))
        after_kill = result_of(run_local(COUNTS, tmp_path))
        again = result_of(run_local(IMPORT_ONCE, tmp_path, str(path)))
        final = result_of(run_local(COUNTS, tmp_path))

        assert killed.returncode == -signal.SIGKILL
        assert (after_kill["follows"], after_kill["users"]) == (0, 0)  # accounts and follows rolled back together
        assert len(after_kill["indexes"]) == 5 and after_kill["integrity"] == "ok"  # the dropped indexes too
        assert again == {"method": "sqlite", "inserted": expected}
        assert final["follows"] == expected and final["indexes"] == after_kill["indexes"]


class TestSqliteReplay:
    def test_a_replay_killed_midway_leaves_no_note_and_if_empty_runs_it_again(self, tmp_path):
        assert result_of(run_local(IMPORT_ONCE, tmp_path, str(dataset_path("wiki-Vote.txt.gz"))))["method"] == "sqlite"

        killed = run_local(KILLED_REPLAY, tmp_path)
        after_kill = result_of(run_local(COUNTS, tmp_path))
        simulate = run_local(
            PRELUDE + 'call_command("simulate_activity", "--if-empty", "--no-rebuild", "--notes", "3000", "--no-progress")',
            tmp_path,
        )
        final = result_of(run_local(COUNTS, tmp_path))

        assert killed.returncode == -signal.SIGKILL
        assert after_kill["notes"] == 0
        assert simulate.returncode == 0, simulate.stderr[-3000:]
        found = re.search(r"created (\d+) notes", simulate.stdout)
        assert found is not None
        created = int(found.group(1))
        assert 2000 < created <= 3000
        assert final["notes"] == created

    def test_a_replay_sets_the_note_counts_and_a_new_note_moves_its_authors(self, tmp_path):
        assert result_of(run_local(IMPORT_ONCE, tmp_path, str(dataset_path("wiki-Vote.txt.gz"))))["method"] == "sqlite"
        replay = run_local(
            PRELUDE + 'call_command("simulate_activity", "--if-empty", "--no-rebuild", "--notes", "500", "--no-progress")',
            tmp_path,
        )
        assert replay.returncode == 0, replay.stderr[-3000:]

        counts = result_of(run_local(NOTE_COUNTS, tmp_path))

        assert counts["rows"] == counts["counted"] and len(counts["rows"]) > 10
        assert counts["after_publish"] == counts["rows"][str(counts["author"])] + 1


@pytest.mark.django_db
class TestReplayOnTheTestDatabase:
    def test_a_replay_that_fails_midway_writes_no_note(self, tmp_path):
        from datatools import simulate
        from datatools.importer import graph_import
        from feed.models import Note

        graph_import(dataset_path("wiki-Vote.txt.gz"), limit=3000)
        plan = simulate.plan_replay(
            dataset_path(simulate.HIGGS_ACTIVITY),
            notes=5000,
            accounts=simulate.accounts_by_followers(),
            end=simulate.default_end(),
        )

        def fail(count: int) -> None:
            raise RuntimeError("stop here")

        with pytest.raises(RuntimeError, match="stop here"):
            simulate.replay(plan, on_progress=fail)

        assert len(plan.rows) > simulate.INSERT_BATCH
        assert not Note.objects.exists()

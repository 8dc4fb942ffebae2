"""import_graph on real data slices and edge cases (C18 self-loops, re-runs)."""

import subprocess
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from core.redis import all_sentinel_keys
from datatools.datasets import DatasetError, dataset_path, read_edges
from social import selectors
from social.models import Follow
from social.rebuild import rebuild_all
from social.reconcile import reconcile_all
from tests.support.graph import write_edges
from users.models import User

pytestmark = pytest.mark.django_db


class TestImportGraph:
    def test_skips_self_loops_and_is_safe_to_rerun(self, tmp_path, redis_client):
        path = write_edges(tmp_path / "g.txt.gz", "# header\n1 2\n2 1\n3 3\n1 3\n\n4 1\n")
        out = StringIO()

        call_command("import_graph", str(path), stdout=out, verbosity=0)
        first = set(Follow.objects.values_list("follower__username", "followee__username", "created_at"))
        call_command("import_graph", str(path), stdout=StringIO(), verbosity=0)
        second = set(Follow.objects.values_list("follower__username", "followee__username", "created_at"))

        assert "1 self-loops skipped" in out.getvalue()
        assert {(a, b) for a, b, _ in first} == {("u1", "u2"), ("u2", "u1"), ("u1", "u3"), ("u4", "u1")}
        assert first == second  # deterministic times, no duplicates
        assert User.objects.filter(username__in=["u1", "u2", "u3", "u4"]).count() == 4
        u3 = User.objects.get(username="u3")
        assert not Follow.objects.filter(follower=u3, followee=u3).exists()
        assert selectors.follow_counts(user_id=u3.pk).followers == 1
        assert u3.pk not in {u.pk for u in selectors.mutual_follows(user_id=u3.pk).users}

    def test_malformed_line_is_a_command_error(self, tmp_path):
        path = write_edges(tmp_path / "bad.txt.gz", "1 2\nthree four\n")

        with pytest.raises(CommandError, match="not an edge"):
            call_command("import_graph", str(path), stdout=StringIO(), verbosity=0)

    def test_missing_unknown_dataset_is_a_command_error(self):
        with pytest.raises(CommandError, match="not a known dataset"):
            call_command("import_graph", "no-such-file.txt", stdout=StringIO(), verbosity=0)

    def test_a_known_dataset_absent_offline_names_the_folder_and_the_setting(self, tmp_path, settings, monkeypatch):
        settings.FOLLOWFEED_DATA_DIR = str(tmp_path / "data")
        settings.BASE_DIR = tmp_path  # no earlier download in var/data either

        def offline(*args, **kwargs):
            raise OSError("Name or service not known")

        monkeypatch.setattr("urllib.request.urlopen", offline)

        with pytest.raises(DatasetError) as raised:
            dataset_path("wiki-Vote.txt.gz")
        assert str(raised.value) == (
            f"wiki-Vote.txt.gz is not in {tmp_path / 'data'} (FOLLOWFEED_DATA_DIR) and could not be downloaded from "
            "https://snap.stanford.edu/data/wiki-Vote.txt.gz: Name or service not known; "
            "set FOLLOWFEED_DATA_DIR to the folder that holds it"
        )
        assert not (tmp_path / "var" / "data" / "wiki-Vote.txt.gz").exists()

    def test_a_clone_of_a_local_repository_finds_the_data_beside_that_repository(self, tmp_path, settings):
        origin = tmp_path / "work" / "main"
        shared = tmp_path / "work" / "shared" / "data"
        shared.mkdir(parents=True)
        write_edges(shared / "wiki-Vote.txt.gz", "1 2\n")
        subprocess.run(["git", "init", "-q", str(origin)], check=True)
        subprocess.run(["git", "clone", "-q", str(origin), str(tmp_path / "fresh")], check=True, capture_output=True)
        settings.BASE_DIR = tmp_path / "fresh"
        settings.FOLLOWFEED_DATA_DIR = str(tmp_path / "shared" / "data")  # the default beside the clone: absent

        assert dataset_path("wiki-Vote.txt.gz") == (shared / "wiki-Vote.txt.gz").resolve()

    def test_real_slice_matches_the_file_and_the_mirror(self, redis_client):
        path = dataset_path("wiki-Vote.txt.gz")
        expected = [(a, b) for a, b in list(read_edges(path))[:3000] if a != b]

        call_command("import_graph", "wiki-Vote.txt.gz", limit=3000, stdout=StringIO(), verbosity=0)

        assert Follow.objects.count() == len(set(expected))
        top_node = max({b for _, b in expected}, key=lambda n: sum(1 for _, b in expected if b == n))
        top_user = User.objects.get(username=f"u{top_node}")
        assert selectors.follow_counts(user_id=top_user.pk).followers == sum(1 for _, b in expected if b == top_node)
        report = reconcile_all(repair=False)
        assert (report.edges_missing, report.edges_extra, report.scores_wrong) == (0, 0, 0)
        assert report.users_checked >= User.objects.filter(username__startswith="u").count()


class TestRebuild:
    def test_rebuild_restores_a_wiped_mirror(self, tmp_path, redis_client, redis_isolated):
        path = write_edges(tmp_path / "g.txt.gz", "1 2\n2 3\n3 1\n1 3\n")
        call_command("import_graph", str(path), stdout=StringIO(), verbosity=0)
        from tests.support.redis import unlink_prefix

        unlink_prefix(redis_client, redis_isolated)
        stats = rebuild_all()

        assert stats.edges == 4
        assert all(redis_client.exists(key) for key in all_sentinel_keys(redis_client))
        report = reconcile_all(repair=False)
        assert report.edges_missing == report.edges_extra == 0

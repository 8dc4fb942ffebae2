"""The importer's fast path (one LOAD DATA into an empty follows table) gives the same rows as the batch path."""

import pytest
from django.db import transaction

from datatools.datasets import DatasetError
from datatools.importer import (
    IMPORT_EPOCH,
    METHOD_INSERT,
    METHOD_LOAD,
    graph_import,
    read_edge_columns,
)
from social.models import Follow
from tests.support.graph import write_edges

pytestmark = pytest.mark.django_db(transaction=True)

EDGES = "# Directed graph\n# FromNodeId\tToNodeId\n1\t2\n2\t1\n3\t3\n1\t3\n\n4\t1\n1\t2\n5\t4\n"


def follow_rows() -> set[tuple[str, str, int]]:
    rows = Follow.objects.values_list("follower__username", "followee__username", "created_at")
    return {(a, b, int((at - IMPORT_EPOCH).total_seconds())) for a, b, at in rows}


class TestLoadPath:
    def test_a_first_import_loads_every_follow_in_one_statement(self, tmp_path):
        path = write_edges(tmp_path / "g.txt.gz", EDGES)

        stats = graph_import(path)

        assert stats.method == METHOD_LOAD
        assert (stats.edges_read, stats.self_loops, stats.duplicates, stats.edges_inserted) == (7, 1, 1, 5)
        assert follow_rows() == {("u1", "u2", 0), ("u2", "u1", 1), ("u1", "u3", 2), ("u4", "u1", 3), ("u5", "u4", 4)}

    def test_the_batch_path_gives_the_same_rows(self, tmp_path):
        path = write_edges(tmp_path / "g.txt.gz", EDGES)
        with transaction.atomic():  # inside a transaction the load path is not taken
            stats = graph_import(path)

        assert stats.method == METHOD_INSERT
        assert follow_rows() == {("u1", "u2", 0), ("u2", "u1", 1), ("u1", "u3", 2), ("u4", "u1", 3), ("u5", "u4", 4)}

    def test_a_rerun_inserts_nothing_and_keeps_the_times(self, tmp_path):
        path = write_edges(tmp_path / "g.txt.gz", EDGES)
        graph_import(path)
        before = follow_rows()

        again = graph_import(path)

        assert again.method == METHOD_INSERT  # the table has rows now
        assert again.edges_inserted == 0 and again.users_created == 0
        assert follow_rows() == before


class TestReadEdgeColumns:
    def test_extra_columns_are_ignored(self, tmp_path):
        path = write_edges(tmp_path / "a.txt.gz", "1 2 1341100972 RT\n3 4 1341100973 MT\n")

        assert read_edge_columns(path) == ([1, 3], [2, 4])

    def test_limit_counts_rows_of_the_file(self, tmp_path):
        path = write_edges(tmp_path / "g.txt.gz", EDGES)

        assert read_edge_columns(path, limit=3) == ([1, 2, 3], [2, 1, 3])

    def test_a_malformed_line_names_its_number(self, tmp_path):
        path = write_edges(tmp_path / "bad.txt.gz", "1 2\nthree four\n")

        with pytest.raises(DatasetError, match=":2: not an edge"):
            read_edge_columns(path)

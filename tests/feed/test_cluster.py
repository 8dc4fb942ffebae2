"""On a real 6-node Redis Cluster (run with ``--redis-cluster``; skipped otherwise), issue 14.

The commands an operator runs, pages served from Redis with no database
fallback, and a master killed while followfeed runs: reads of the slots
that survive keep using Redis, and once the replica is promoted and the
outbox drained, the graph and the feeds equal the database.
"""

from __future__ import annotations

import re
import time
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from core.cluster import node_name
from core.outbox import drain
from core.redis import breaker_state, get_redis, redis_reset_breaker
from feed import redis_keys as feed_keys
from feed.reconcile import reconcile_inboxes
from social import redis_keys as social_keys
from social.models import Block, Follow
from social.reconcile import reconcile_all
from social.services import follow_create
from tests.cluster import ClusterNode, RedisClusterNodes
from tests.support.accounts import make_user, signed_in
from tests.support.consistency import feed_differences
from tests.support.graph import assert_mirror_equals_database
from users.models import User

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster(redis_backend: RedisClusterNodes | None) -> RedisClusterNodes:
    if redis_backend is None:
        pytest.skip("runs on the private cluster: pytest --redis-cluster")
    return redis_backend


def keys_per_master(cluster: RedisClusterNodes, prefix: str) -> dict[int, int]:
    """``{port: keys under prefix}`` for every master now."""
    return {node.port: sum(1 for _ in node.client().scan_iter(match=f"{prefix}*", count=1000)) for node in cluster.masters()}


def master_of(cluster: RedisClusterNodes, key: str) -> ClusterNode:
    port = int(node_name(get_redis(), key).rsplit(":", 1)[1])
    return next(node for node in cluster.nodes if node.port == port)


def follow_queries(work: Any) -> tuple[Any, list[str]]:
    """``(work(), SQL statements that read the follow table)`` — none when Redis served the graph.

    The visibility checks are left out: ``social.visibility.access`` (the blocks and the one
    follow row between two accounts), ``feed.selectors.shown_visibilities`` (whether the reader
    follows a profile's author now, for its followers-only notes) and ``hidden_authors`` (the
    follow rows of a feed page's authors, by key): the database's word on what a reader may
    see, not the graph.
    """
    with CaptureQueriesContext(connection) as queries:
        answer = work()
    return answer, [
        sql
        for query in queries
        if Follow._meta.db_table in (sql := query["sql"])
        and Block._meta.db_table not in sql
        and not PAGE_AUTHORS_CHECK.fullmatch(sql)
        and not ONE_PAIR_CHECK.fullmatch(sql)
    ]


ONE_PAIR_CHECK = re.compile(
    rf"SELECT 1 AS `a` FROM `{Follow._meta.db_table}` .* `{Follow._meta.db_table}`.`followee_id` = \d+ AND `{Follow._meta.db_table}`.`follower_id` = \d+\) LIMIT 1"
)
PAGE_AUTHORS_CHECK = re.compile(
    rf"SELECT followee_id FROM {Follow._meta.db_table} WHERE follower_id = \d+ AND followee_id IN \([\d, ]+\)"
)


def small_graph(follow: Any, publish: Any, readers: int = 12, authors: int = 4) -> tuple[list[User], list[User]]:
    """Readers following two or three authors each, three notes per author, all applied."""
    reader_users = [make_user(f"reader{index}") for index in range(readers)]
    author_users = [make_user(f"author{index}") for index in range(authors)]
    for index, reader in enumerate(reader_users):
        for author in author_users[: 2 + index % 2]:
            follow(reader, author)
        follow(reader, reader_users[(index + 1) % readers])
    for round_number in range(3):
        for author in author_users:
            publish(author, f"{author.username} note {round_number}")
    return reader_users, author_users


class TestCommandsOnTheCluster:
    def test_import_then_rebuild_spreads_over_every_master_and_reconcile_finds_no_drift(
        self, cluster: RedisClusterNodes, redis_isolated: str
    ) -> None:
        call_command("import_graph", "wiki-Vote.txt.gz", limit=3000, stdout=StringIO(), verbosity=0)
        imported = keys_per_master(cluster, redis_isolated)
        call_command("rebuild_social_cache", stdout=StringIO(), verbosity=0)

        report = reconcile_all(repair=False, check="full")
        ids = list(User.objects.values_list("pk", flat=True))

        assert len(imported) == 3 and min(imported.values()) > 100  # every master holds part of the graph
        assert (report.edges_missing, report.edges_extra, report.scores_wrong) == (0, 0, 0)
        assert_mirror_equals_database(get_redis(), ids)

    def test_rebuild_feeds_restores_lost_inboxes_and_inbox_reconcile_finds_no_drift(
        self, cluster: RedisClusterNodes, follow: Any, publish: Any
    ) -> None:
        readers, authors = small_graph(follow, publish)
        client = get_redis()
        for reader in readers:
            client.unlink(feed_keys.inbox_key(reader.pk))  # a loss behind the application's back

        lost = reconcile_inboxes(repair=False)
        call_command("rebuild_feeds", "--no-progress", stdout=StringIO(), verbosity=0)
        after = reconcile_inboxes(repair=False)

        assert lost.notes_missing > 0
        assert (after.readers_checked, after.drift) == (len(readers) + len(authors), 0)
        assert feed_differences([user.pk for user in readers]) == {}

    def test_make_celebrity_shards_the_followers_over_the_masters(self, cluster: RedisClusterNodes, settings: Any) -> None:
        settings.FOLLOWERS_SHARD_THRESHOLD = 10
        settings.FOLLOWERS_SHARDS = 8
        out = StringIO()

        call_command("make_celebrity", "--followers", "300", "--username", "clusterstar", stdout=out, verbosity=0)

        star = User.objects.get(username="clusterstar")
        shard_masters = {node_name(get_redis(), social_keys.followers_set_shard_key(star.pk, shard)) for shard in range(8)}
        assert f"user {star.pk} (clusterstar): 300 followers in the database, 300 in Redis (sharded layout)" in out.getvalue()
        assert len(shard_masters) >= 2  # the biggest account's shards are not pinned to one node
        assert reconcile_all(repair=False, check="full").drift == 0


class TestPagesFromRedis:
    def test_lists_counts_and_the_home_feed_never_read_the_follow_table(
        self, cluster: RedisClusterNodes, follow: Any, publish: Any
    ) -> None:
        readers, authors = small_graph(follow, publish)
        reader, other = readers[0], readers[1]
        browser = signed_in(reader)

        pages, follow_sql = follow_queries(
            lambda: [
                browser.get(f"/u/{authors[0].username}/followers/"),
                browser.get(f"/u/{reader.username}/following/"),
                browser.get(f"/u/{other.username}/"),
                browser.get("/home"),
                browser.get(f"/api/follow/common/{other.pk}"),
            ]
        )

        assert [page.status_code for page in pages] == [200] * 5
        assert follow_sql == []
        assert readers[2].username in pages[0].content.decode()  # reader2 follows author0
        assert f"{authors[0].username} note 2" in pages[3].content.decode()
        assert {user["id"] for user in pages[4].json()["data"]} == {authors[0].pk, authors[1].pk}


class TestMasterKilled:
    def test_surviving_slots_keep_redis_and_afterwards_the_graph_and_feeds_equal_the_database(
        self, cluster: RedisClusterNodes, follow: Any, publish: Any, settings: Any, django_capture_on_commit_callbacks: Any
    ) -> None:
        settings.REDIS_CIRCUIT_OPEN_SECONDS = 0.5
        readers, authors = small_graph(follow, publish, readers=30)
        victim = master_of(cluster, social_keys.followers_set_key(authors[0].pk))
        survivors = [user for user in readers if master_of(cluster, social_keys.followers_set_key(user.pk)).port != victim.port]
        doomed = [user for user in readers if master_of(cluster, social_keys.followers_set_key(user.pk)).port == victim.port]
        assert survivors and doomed

        cluster.kill(victim)
        try:
            redis_reset_breaker()
            _, doomed_sql = follow_queries(lambda: Client().get(f"/u/{doomed[0].username}/followers/"))
            page, survivor_sql = follow_queries(lambda: Client().get(f"/u/{survivors[0].username}/followers/"))
            # Writes while a third of the slots has no master: the database takes them all.
            with django_capture_on_commit_callbacks(execute=True):
                for reader in readers[:10]:
                    follow_create(actor=reader, followee_id=authors[3].pk)
            for author in authors:
                publish(author, f"{author.username} during the failover")
            cluster.wait_failover(victim)
            # Beat sends a drain every second; the first after the failover may still meet the old slot map.
            # task_grace_seconds=0: the entries whose tasks failed are due now, not after the grace.
            drains = [drain(task_grace_seconds=0)]
            while drains[-1].redis_down and len(drains) < 10:
                time.sleep(0.5)
                redis_reset_breaker()
                drains.append(drain(task_grace_seconds=0))
        finally:
            cluster.restart(victim)

        ids = [user.pk for user in (*readers, *authors)]
        graph = reconcile_all(repair=False, check="full")
        inboxes = reconcile_inboxes(repair=False)
        assert page.status_code == 200 and survivor_sql == []  # the surviving master's breaker stayed closed
        assert doomed_sql != []  # the dead master's keys were read from the database
        assert breaker_state(node_name(get_redis(), social_keys.followers_set_key(survivors[0].pk))) == "closed"
        assert drains[-1].redis_down is False and len(drains) <= 3
        assert drains[-1].applied > 0  # what the dead master's slots missed
        assert (graph.edges_missing, graph.edges_extra, graph.scores_wrong) == (0, 0, 0)
        assert inboxes.drift == 0
        assert_mirror_equals_database(get_redis(), ids)
        assert feed_differences([user.pk for user in readers]) == {}

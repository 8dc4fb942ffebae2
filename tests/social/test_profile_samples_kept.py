"""A profile's samples kept in Redis (``social.selectors.PROFILE_GRAPH_LUA``, issue 26): kept under
both accounts' graph version tokens, which every writer of their follow keys deletes, so the next
read after any change of the graph answers what the sets now hold. Where a change can keep every
set's size (which the guard kept beside a sample would see), the test's change does, so that it
fails if that writer leaves the token in place."""

from __future__ import annotations

from typing import Any

import pytest

from core.cluster import is_cluster
from social import controls, layout, redis_keys, selectors, visibility
from social.rebuild import rebuild_range
from social.reconcile import profile_samples_drift, reconcile_all
from social.sharding import followers_layout_migrate
from tests.support.graph import follow, star_with_fans, unfollow
from users.services import user_set_active

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def one_server(redis_client: Any) -> None:
    if is_cluster(redis_client):
        pytest.skip("a cluster reads the profile's graph with separate calls: nothing is kept")


def samples(star: Any, viewer: Any, *, hidden: set[int] | None = None) -> list[tuple[int, list[int]]]:
    """The profile's (count, sampled ids) of mutual, common and familiar, as ``star``'s profile reads them."""
    graph = selectors.profile_graph(user_id=star.pk, viewer_id=viewer.pk, hidden=hidden or set())
    shown = [graph.samples.mutual, graph.samples.common, graph.samples.familiar]
    return [(sample.count, [user.pk for user in sample.users]) for sample in shown if sample is not None]


def kept_keys(client: Any) -> list[bytes]:
    return list(client.scan_iter(match=redis_keys.profile_samples_key_head() + "*"))


def ids(*users: Any) -> list[int]:
    return [user.pk for user in users]


class TestKeptSample:
    def test_a_second_read_answers_the_kept_sample_until_a_writer_changes_the_graph(
        self, user_factory: Any, redis_client: Any
    ) -> None:
        star, viewer, fans = star_with_fans(user_factory)
        before = samples(star, viewer)
        assert before == [(4, ids(*fans[3:7])), (2, ids(*fans[3:5])), (5, ids(*fans[:3]))]
        assert len(kept_keys(redis_client)) == 1

        # Behind every writer's back, keeping the sizes: the kept sample answers (it was read).
        key = redis_keys.following_set_key(star.pk)
        redis_client.srem(key, fans[3].pk)
        redis_client.sadd(key, fans[8].pk)
        assert samples(star, viewer) == before
        # Through the mirror's writer (any change of the star's keys): read again.
        unfollow(star, fans[4])
        follow(star, fans[9])
        assert samples(star, viewer)[0] == (4, ids(fans[5], fans[6], fans[8], fans[9]))

    def test_the_sizes_kept_beside_the_sample_catch_a_change_that_no_writer_made(
        self, user_factory: Any, redis_client: Any
    ) -> None:
        star, viewer, fans = star_with_fans(user_factory)
        samples(star, viewer)
        redis_client.srem(redis_keys.following_set_key(star.pk), fans[3].pk)
        assert samples(star, viewer)[0] == (3, ids(*fans[4:7]))


class TestEveryWriterLeavesTheKeptSampleBehind:
    def test_the_viewer_follows_one_and_unfollows_another(self, user_factory: Any) -> None:
        star, viewer, fans = star_with_fans(user_factory)
        samples(star, viewer)
        unfollow(viewer, fans[0])
        follow(viewer, fans[5])
        assert samples(star, viewer) == [(4, ids(*fans[3:7])), (3, ids(*fans[3:6])), (5, ids(*fans[1:4]))]

    def test_a_follower_leaves_and_another_comes(self, user_factory: Any) -> None:
        star, viewer, fans = star_with_fans(user_factory)
        samples(star, viewer)
        unfollow(fans[0], star)
        follow(user_factory(), star)
        assert samples(star, viewer)[2] == (4, ids(*fans[1:4]))

    def test_a_block_by_the_viewer(self, user_factory: Any, run_commits: Any) -> None:
        star, viewer, fans = star_with_fans(user_factory)
        samples(star, viewer)
        run_commits(lambda: controls.block_create(actor=viewer, target_id=fans[3].pk))
        follow(viewer, fans[6])  # the viewer's following back to five
        hidden, _ = visibility.hidden_and_muted_ids(viewer_id=viewer.pk)
        assert hidden == {fans[3].pk}
        assert samples(star, viewer, hidden=hidden) == [(3, ids(*fans[4:7])), (2, ids(fans[4], fans[6])), (5, ids(*fans[:3]))]

    def test_a_deactivation(self, user_factory: Any, run_commits: Any) -> None:
        star, viewer, fans = star_with_fans(user_factory)
        samples(star, viewer)
        run_commits(lambda: user_set_active(user=fans[4], is_active=False))
        assert samples(star, viewer) == [(3, ids(fans[3], fans[5], fans[6])), (1, ids(fans[3])), (4, ids(*fans[:3]))]

    def test_a_rebuild_after_drift_that_kept_the_sizes(self, user_factory: Any, redis_client: Any) -> None:
        star, viewer, fans = star_with_fans(user_factory)
        key = redis_keys.following_set_key(star.pk)
        redis_client.srem(key, fans[3].pk)
        redis_client.sadd(key, fans[8].pk)
        assert samples(star, viewer)[0] == (4, ids(*fans[4:7], fans[8]))  # the drift, read and kept
        rebuild_range(redis_client, star.pk - 1, star.pk)  # the star's keys alone, as the warm-up writes them
        assert samples(star, viewer)[0] == (4, ids(*fans[3:7]))

    def test_a_reconcile_after_drift_that_kept_the_sizes(self, user_factory: Any, redis_client: Any) -> None:
        star, viewer, fans = star_with_fans(user_factory)
        key = redis_keys.following_set_key(star.pk)
        redis_client.srem(key, fans[3].pk)
        redis_client.sadd(key, fans[8].pk)
        assert samples(star, viewer)[0] == (4, ids(*fans[4:7], fans[8]))
        assert reconcile_all(user_id=star.pk).users_drifted == 1
        assert samples(star, viewer)[0] == (4, ids(*fans[3:7]))

    def test_a_layout_migration_to_shards_and_back(self, user_factory: Any, redis_client: Any) -> None:
        star, viewer, fans = star_with_fans(user_factory)
        assert samples(star, viewer)[2] == (5, ids(*fans[:3]))
        followers_layout_migrate(user_id=star.pk, target=layout.LAYOUT_SHARDED)
        # Behind every writer's back while the followers are in shards, keeping their number: the
        # way back copies it into the single key, and the flip alone tells the kept sample.
        newcomer = user_factory()
        for member, added in ((fans[0].pk, False), (newcomer.pk, True)):
            shard = layout.follower_shard(member)
            set_key = redis_keys.followers_set_shard_key(star.pk, shard)
            zset_key = redis_keys.followers_zset_shard_key(star.pk, shard)
            if not added:
                redis_client.srem(set_key, member)
                redis_client.zrem(zset_key, member)
            else:
                redis_client.sadd(set_key, member)
                redis_client.zadd(zset_key, {str(member): 1})
        followers_layout_migrate(user_id=star.pk, target=layout.LAYOUT_SINGLE)
        assert redis_client.get(redis_keys.followers_layout_key(star.pk)) is None
        assert samples(star, viewer)[2] == (4, ids(*fans[1:4]))


class TestReconcile:
    def test_finds_and_drops_a_kept_sample_that_differs_from_the_sets(self, user_factory: Any, redis_client: Any) -> None:
        star, viewer, fans = star_with_fans(user_factory)
        samples(star, viewer)
        samples(star, fans[0])
        assert profile_samples_drift(repair=False) == 0
        # Behind every writer's back, keeping the sizes: the star's kept samples now differ.
        key = redis_keys.following_set_key(star.pk)
        redis_client.srem(key, fans[3].pk)
        redis_client.sadd(key, fans[8].pk)
        assert samples(star, viewer)[0] == (4, ids(*fans[3:7]))  # the kept sample, read
        assert profile_samples_drift(repair=False) == 2
        assert profile_samples_drift(repair=True) == 2
        assert profile_samples_drift(repair=False) == 0
        assert samples(star, viewer)[0] == (4, ids(*fans[4:7], fans[8]))

    def test_leaves_alone_a_kept_sample_no_read_can_reach(self, user_factory: Any, redis_client: Any) -> None:
        star, viewer, fans = star_with_fans(user_factory)
        samples(star, viewer)
        redis_client.srem(redis_keys.following_set_key(star.pk), fans[3].pk)
        redis_client.delete(redis_keys.graph_version_key(star.pk))  # as a writer does
        assert profile_samples_drift(repair=False) == 0
        assert len(kept_keys(redis_client)) == 1  # expires unread

    def test_passes_over_a_key_under_the_head_that_the_script_never_writes(self, user_factory: Any, redis_client: Any) -> None:
        star, viewer, _fans = star_with_fans(user_factory)
        samples(star, viewer)
        head = redis_keys.profile_samples_key_head()
        redis_client.set(f"{head}junk", "x")
        redis_client.set(f"{head}{star.pk}:x:a:b:c", "x")
        assert profile_samples_drift(repair=True) == 0
        assert len(kept_keys(redis_client)) == 3

    def test_passes_over_a_key_with_empty_tokens_or_a_value_the_script_never_writes(
        self, user_factory: Any, redis_client: Any
    ) -> None:
        account = user_factory()  # never read: it has no graph version token
        head = redis_keys.profile_samples_key_head()
        redis_client.set(f"{head}{account.pk}::::c", "x")
        redis_client.set(f"{head}{account.pk}::t:x:c", "x")
        redis_client.set(redis_keys.graph_version_key(account.pk), "t")
        assert profile_samples_drift(repair=True) == 0

    def test_checks_a_sample_that_left_out_the_viewers_blocks(
        self, user_factory: Any, run_commits: Any, redis_client: Any
    ) -> None:
        star, viewer, fans = star_with_fans(user_factory)
        run_commits(lambda: controls.block_create(actor=viewer, target_id=fans[5].pk))
        run_commits(lambda: controls.block_create(actor=star, target_id=fans[9].pk))
        selectors.profile_graph(user_id=star.pk, viewer_id=viewer.pk, read_controls=True)
        selectors.profile_graph(user_id=star.pk, viewer_id=star.pk, read_controls=True)  # one's own
        assert len(kept_keys(redis_client)) == 2
        assert profile_samples_drift(repair=False) == 0
        key = redis_keys.following_set_key(star.pk)
        redis_client.srem(key, fans[3].pk)
        redis_client.sadd(key, fans[8].pk)
        assert profile_samples_drift(repair=True) == 2


def test_a_kept_sample_does_not_grow_with_the_viewers_blocks(user_factory: Any, redis_client: Any) -> None:
    star, viewer, _fans = star_with_fans(user_factory)
    redis_client.sadd(redis_keys.blocks_key(viewer.pk), *[str(n) for n in range(10_000_000, 10_005_000)])
    graph = selectors.profile_graph(user_id=star.pk, viewer_id=viewer.pk, read_controls=True)
    assert graph.samples.mutual.count == 4
    (key,) = kept_keys(redis_client)
    assert redis_client.strlen(key) < 512

"""A followers or following page's reads in one (``social.selectors.follow_list``, issue 26): the
same page, counts and hidden accounts as ``followers_page``/``following_page``, ``follow_counts``
and ``hidden_ids``, at every depth, in either layout, for every viewer."""

from __future__ import annotations

from typing import Any

import pytest

from core.cluster import is_cluster
from social import controls, layout, redis_keys, selectors, visibility
from tests.support.graph import follow

pytestmark = pytest.mark.django_db


def separate(kind: str, user_id: int, viewer_id: int | None, limit: int) -> list[Any]:
    """Every page of the list as the separate reads give it, with the counts and the hidden ids."""
    read = selectors.followers_page if kind == "followers" else selectors.following_page
    pages, cursor = [], None
    while True:
        page = read(user_id=user_id, cursor=cursor, limit=limit)
        pages.append([(entry.user.pk, entry.followed_at) for entry in page.entries])
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    hidden = set() if viewer_id is None else visibility.hidden_ids(viewer_id=viewer_id)
    return [pages, selectors.follow_counts(user_id=user_id), hidden]


def together(kind: str, user_id: int, viewer_id: int | None, limit: int) -> list[Any]:
    pages, cursor, found = [], None, None
    while True:
        found = selectors.follow_list(kind=kind, user_id=user_id, cursor=cursor, limit=limit, viewer_id=viewer_id)
        pages.append([(entry.user.pk, entry.followed_at) for entry in found.page.entries])
        if found.page.next_cursor is None:
            break
        cursor = found.page.next_cursor
    return [pages, found.counts, found.hidden]


@pytest.fixture
def star_and_fans(user_factory: Any, run_commits: Any) -> Any:
    """A star followed by twelve fans, following five of them; a viewer who blocks one fan and is
    blocked by another."""
    star, viewer = user_factory(), user_factory()
    fans = [user_factory() for _ in range(12)]
    for fan in fans:
        follow(fan, star)
    for fan in fans[:5]:
        follow(star, fan)
    run_commits(lambda: controls.block_create(actor=viewer, target_id=fans[2].pk))
    run_commits(lambda: controls.block_create(actor=fans[7], target_id=viewer.pk))
    return star, viewer, fans


class TestFollowList:
    @pytest.mark.parametrize("kind", ["followers", "following"])
    def test_equals_the_separate_reads_page_after_page(self, star_and_fans: Any, kind: str) -> None:
        star, viewer, _ = star_and_fans
        for viewer_id in (None, viewer.pk, star.pk):
            for limit in (1, 5, 50):
                assert together(kind, star.pk, viewer_id, limit) == separate(kind, star.pk, viewer_id, limit)

    def test_the_answer_it_gives(self, star_and_fans: Any) -> None:
        star, viewer, fans = star_and_fans

        found = selectors.follow_list(kind="followers", user_id=star.pk, cursor=None, limit=50, viewer_id=viewer.pk)

        assert found.counts == selectors.Counts(followers=12, following=5)
        assert {entry.user.pk for entry in found.page.entries} == {fan.pk for fan in fans}
        assert found.hidden == {fans[2].pk, fans[7].pk}
        signed_out = selectors.follow_list(kind="following", user_id=star.pk, cursor=None, limit=50, viewer_id=None)
        assert {entry.user.pk for entry in signed_out.page.entries} == {fan.pk for fan in fans[:5]}
        assert signed_out.hidden == set()

    @pytest.mark.parametrize("kind", ["followers", "following"])
    def test_a_sharded_account(
        self, star_and_fans: Any, low_threshold: Any, redis_client: Any, user_factory: Any, kind: str
    ) -> None:
        star, viewer, _ = star_and_fans
        follow(user_factory(), star)  # crosses the threshold again, under these settings
        assert redis_client.get(redis_keys.followers_layout_key(star.pk)) == layout.LAYOUT_SHARDED

        for limit in (3, 50):
            assert together(kind, star.pk, viewer.pk, limit) == separate(kind, star.pk, viewer.pk, limit)
        counts = selectors.follow_list(kind=kind, user_id=star.pk, cursor=None, limit=5, viewer_id=None).counts
        assert counts is not None and counts.followers == 13

    def test_one_script_on_one_server(self, star_and_fans: Any, redis_client: Any, monkeypatch: Any) -> None:
        if is_cluster(redis_client):
            pytest.skip("on a cluster the viewer's and the shards' keys are on other slots: the separate reads serve")
        star, viewer, _ = star_and_fans

        def refuse(**_: Any) -> Any:
            raise AssertionError("the separate reads ran")

        for name in ("followers_page", "following_page", "follow_counts", "hidden_ids"):
            monkeypatch.setattr(selectors, name, refuse)
        found = selectors.follow_list(kind="followers", user_id=star.pk, cursor=None, limit=5, viewer_id=viewer.pk)
        assert len(found.page.entries) == 5 and found.page.next_cursor is not None

    def test_the_database_answers_the_same_while_redis_is_down(self, star_and_fans: Any, settings: Any) -> None:
        star, viewer, _ = star_and_fans
        from_redis = together("followers", star.pk, viewer.pk, 4)

        settings.CACHES = {**settings.CACHES, "default": {**settings.CACHES["default"], "LOCATION": "redis://127.0.0.1:1/0"}}
        settings.REDIS_CIRCUIT_OPEN_SECONDS = 30.0

        assert together("followers", star.pk, viewer.pk, 4) == from_redis

    def test_a_list_without_counts_does_not_count_in_the_database(
        self, star_and_fans: Any, settings: Any, django_assert_num_queries: Any
    ) -> None:
        star, viewer, _ = star_and_fans
        settings.CACHES = {**settings.CACHES, "default": {**settings.CACHES["default"], "LOCATION": "redis://127.0.0.1:1/0"}}
        settings.REDIS_CIRCUIT_OPEN_SECONDS = 30.0
        selectors.follow_list(kind="followers", user_id=star.pk, cursor=None, limit=5, viewer_id=viewer.pk)  # opens the breaker

        # The page (two reads: the run of equal seconds at its end), its accounts and the viewer's
        # blocks; with counts, two counts more.
        with django_assert_num_queries(4):
            found = selectors.follow_list(
                kind="followers", user_id=star.pk, cursor=None, limit=5, viewer_id=viewer.pk, counts=False
            )
        with django_assert_num_queries(6):
            counted = selectors.follow_list(kind="followers", user_id=star.pk, cursor=None, limit=5, viewer_id=viewer.pk)
        assert found.counts is None
        assert counted.counts == selectors.Counts(followers=12, following=5)
        assert found.page == counted.page


class TestEveryLayoutMarker:
    @pytest.mark.parametrize("marker", ["migrating", "unsharding", "sharded"])
    def test_the_scripts_read_the_keys_each_marker_names(self, star_and_fans: Any, redis_client: Any, marker: str) -> None:
        """A marker mid-migration (or one the keys do not match) is read as the separate reads
        read it: the single key while migrating, the shards while unsharding or sharded."""
        star, viewer, _ = star_and_fans
        redis_client.set(redis_keys.followers_layout_key(star.pk), marker)
        try:
            for kind in ("followers", "following"):
                assert together(kind, star.pk, viewer.pk, 5) == separate(kind, star.pk, viewer.pk, 5)
            graph = selectors.profile_graph(user_id=star.pk, viewer_id=viewer.pk)
            assert graph.counts == selectors.follow_counts(user_id=star.pk)
            assert graph.samples.familiar is not None
            expected = selectors.profile_samples(user_id=star.pk, viewer_id=viewer.pk)
            assert [u.pk for u in graph.samples.mutual.users] == [u.pk for u in expected.mutual.users]
            assert graph.counts.followers == (12 if marker == "migrating" else 0)
        finally:
            redis_client.delete(redis_keys.followers_layout_key(star.pk))

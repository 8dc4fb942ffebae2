"""A profile's counts, samples and relationship in one read (``social.selectors.profile_graph``,
issue 26): the same answers as ``follow_counts``, ``profile_samples`` and ``relationship``, whatever
the layout, the viewer, the hidden accounts and the sample sizes."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest

from core.cluster import is_cluster, lua
from social import controls, layout, redis_keys, selectors, visibility
from social.models import Follow
from tests.support.graph import follow, star_with_fans, unfollow
from users.redis_keys import account_key_parts

pytestmark = pytest.mark.django_db


def separate(user_id: int, viewer_id: int | None, hidden: set[int], limit: int, familiar_limit: int) -> Any:
    """What the profile read before: the counts, the samples and the relationship, each with its own reads."""
    samples = selectors.profile_samples(
        user_id=user_id, viewer_id=viewer_id, hidden=hidden, limit=limit, familiar_limit=familiar_limit
    )
    pair = None
    if viewer_id is not None and viewer_id != user_id:
        pair = selectors.relationship(viewer_id=viewer_id, user_id=user_id)
    return selectors.follow_counts(user_id=user_id), shape(samples), pair


def together(user_id: int, viewer_id: int | None, hidden: set[int], limit: int, familiar_limit: int) -> Any:
    graph = selectors.profile_graph(
        user_id=user_id, viewer_id=viewer_id, hidden=hidden, limit=limit, familiar_limit=familiar_limit
    )
    return graph.counts, shape(graph.samples), graph.relationship


def shape(samples: selectors.ProfileSamples) -> Any:
    return [
        None if sample is None else (sample.count, [user.pk for user in sample.users])
        for sample in (samples.mutual, samples.common, samples.familiar)
    ]


@pytest.fixture
def crowd(user_factory: Any) -> list[Any]:
    """Sixteen accounts, about a third of the ordered pairs following (a fixed seed)."""
    people = [user_factory() for _ in range(16)]
    pick = random.Random(26)
    for follower in people:
        for followee in people:
            if follower is not followee and pick.random() < 0.35:
                follow(follower, followee)
    return people


class TestProfileGraph:
    def test_equals_the_separate_reads_for_every_viewer_and_sample_size(self, crowd: list[Any], redis_client: Any) -> None:
        hidden = {crowd[3].pk, crowd[9].pk}
        compared = 0
        for user in crowd[:6]:
            for viewer in [None, user, *crowd[6:12]]:
                viewer_id = viewer.pk if viewer is not None else None
                for limit, familiar_limit in [(8, 3), (2, 1), (0, 0)]:
                    for left_out in (set(), hidden):
                        expected = separate(user.pk, viewer_id, left_out, limit, familiar_limit)
                        assert together(user.pk, viewer_id, left_out, limit, familiar_limit) == expected
                        compared += 1
        assert compared == 6 * 8 * 3 * 2

    def test_samples_are_the_lowest_ids_and_counts_leave_out_the_hidden(self, user_factory: Any) -> None:
        star, viewer = user_factory(), user_factory()
        friends = [user_factory() for _ in range(5)]
        for friend in friends:
            follow(friend, star)
            follow(star, friend)
            follow(viewer, friend)
        follow(viewer, star)
        follow(star, viewer)
        hidden = {friends[0].pk}

        graph = selectors.profile_graph(user_id=star.pk, viewer_id=viewer.pk, hidden=hidden, limit=3, familiar_limit=2)
        counts, samples = graph.counts, graph.samples

        ids = sorted(friend.pk for friend in friends[1:])
        assert counts == selectors.Counts(followers=6, following=6)
        # The viewer is a mutual follow of the star; "you both follow" and "followed by people
        # you follow" leave the viewer out.
        assert samples.mutual.count == 5
        assert [u.pk for u in samples.mutual.users] == sorted([*ids, viewer.pk])[:3]
        assert samples.common is not None and samples.common.count == 4
        assert [u.pk for u in samples.common.users] == ids[:3]
        assert samples.familiar is not None and samples.familiar.count == 4
        assert [u.pk for u in samples.familiar.users] == ids[:2]
        assert graph.relationship == selectors.Relationship(is_following=True, follows_you=True)

    def test_a_follow_and_an_unfollow_show_on_the_next_read(self, user_factory: Any) -> None:
        user, viewer, newcomer = user_factory(), user_factory(), user_factory()
        follow(user, newcomer)
        follow(viewer, newcomer)

        follow(newcomer, user)
        graph = selectors.profile_graph(user_id=user.pk, viewer_id=viewer.pk)
        counts, samples = graph.counts, graph.samples
        assert counts.followers == 1
        assert [u.pk for u in samples.mutual.users] == [newcomer.pk]
        assert samples.familiar is not None and [u.pk for u in samples.familiar.users] == [newcomer.pk]

        unfollow(newcomer, user)
        graph = selectors.profile_graph(user_id=user.pk, viewer_id=viewer.pk)
        counts, samples = graph.counts, graph.samples
        assert counts.followers == 0
        assert samples.mutual.count == 0 and samples.mutual.users == []
        assert samples.familiar is not None and samples.familiar.count == 0

    def test_one_script_on_one_server(self, crowd: list[Any], redis_client: Any, monkeypatch: Any) -> None:
        if is_cluster(redis_client):
            pytest.skip("on a cluster the viewer's keys are on other slots: the separate reads serve")

        def refuse(**_: Any) -> Any:
            raise AssertionError("the separate reads ran")

        monkeypatch.setattr(selectors, "follow_counts", refuse)
        monkeypatch.setattr(selectors, "profile_samples", refuse)
        monkeypatch.setattr(selectors, "relationship", refuse)
        graph = selectors.profile_graph(user_id=crowd[0].pk, viewer_id=crowd[1].pk)
        counts, samples = graph.counts, graph.samples
        assert counts.followers == Follow.objects.filter(followee=crowd[0]).count()
        assert samples.common is not None
        assert samples.common.count == len(selectors.common_following_ids(user_id=crowd[1].pk, other_id=crowd[0].pk))


class TestShardedAccount:
    def test_a_sharded_account_is_read_as_before(self, low_threshold: Any, user_factory: Any, redis_client: Any) -> None:
        star, viewer, fans = star_with_fans(user_factory)
        assert redis_client.get(redis_keys.followers_layout_key(star.pk)) == layout.LAYOUT_SHARDED

        graph = selectors.profile_graph(user_id=star.pk, viewer_id=viewer.pk, limit=20, familiar_limit=20)
        counts, samples = graph.counts, graph.samples

        assert counts == selectors.Counts(followers=12, following=4)
        assert {u.pk for u in samples.mutual.users} == {fan.pk for fan in fans[3:7]}
        assert samples.familiar is not None
        assert {u.pk for u in samples.familiar.users} == {fan.pk for fan in fans[:5]}
        assert graph.relationship == selectors.Relationship(is_following=False, follows_you=False)


class TestProfileGraphScript:
    """The script's samples over members of every length, in a set kept as a hash table (members in
    no order) and as an intset (ascending): the lowest ids by number, not by text."""

    @pytest.mark.parametrize("size", [40, 700])  # below and above the default set-max-intset-entries (512)
    def test_samples_and_counts_equal_python_over_ids_of_every_length(self, redis_client: Any, size: int) -> None:
        if is_cluster(redis_client):
            pytest.skip("the script reads the viewer's key and the accounts' keys: one server only")
        pick = random.Random(size)
        account, viewer = 5_000_000_001, 5_000_000_002
        pool = pick.sample([*range(1, 200), *range(900, 1_200), *range(99_000, 101_000), *range(10**9, 10**9 + 500)], 3 * size)
        followers, following, viewer_following = (set(pick.sample(pool, size)) for _ in range(3))
        followers |= {viewer}
        following |= {viewer}
        for key, members in [
            (redis_keys.followers_set_key(account), followers),
            (redis_keys.following_set_key(account), following),
            (redis_keys.following_set_key(viewer), viewer_following),
        ]:
            redis_client.sadd(key, *members)
        hidden = set(pick.sample(sorted(followers & following), 3)) - {viewer}
        limit, familiar_limit = 8, 3

        reply = lua(selectors.PROFILE_GRAPH_LUA)(
            keys=[
                redis_keys.followers_layout_key(account),
                redis_keys.followers_set_key(account),
                redis_keys.following_set_key(account),
                redis_keys.graph_version_key(account),
                redis_keys.blocks_key(viewer),
                redis_keys.mutes_key(viewer),
                redis_keys.following_set_key(viewer),
                redis_keys.graph_version_key(viewer),
            ],
            args=[
                *layout.SHARD_READING_LAYOUTS,
                limit,
                familiar_limit,
                viewer,
                *account_key_parts(),
                redis_keys.profile_samples_key_head(),
                "token",
                60,
                "",  # the controls are not read
                account,
                *sorted(hidden),
            ],
            client=redis_client,
        )

        def expected(members: set[int], size_limit: int, *, leave_out_viewer: bool) -> list[Any]:
            shown = members - hidden - {account} - ({viewer} if leave_out_viewer else set())
            return [len(shown), sorted(shown)[:size_limit]]

        assert reply[1:3] == [len(followers), len(following)]
        assert reply[3:9] == [
            *expected(followers & following, limit, leave_out_viewer=False),
            *expected(viewer_following & following, limit, leave_out_viewer=True),
            *expected(followers & viewer_following, familiar_limit, leave_out_viewer=True),
        ]
        assert min(len(str(member)) for member in followers & following) < 4 < max(len(str(m)) for m in followers & following)


class TestControlsReadWithTheGraph:
    """``read_controls``: the viewer's blocked accounts are left out and its mute of the account
    answered by the same read, as ``hidden_and_muted_ids`` would give them, on every path."""

    def test_equals_the_samples_with_the_hidden_ids_and_the_mute_for_every_viewer(
        self, crowd: list[Any], run_commits: Any, redis_client: Any
    ) -> None:
        run_commits(lambda: controls.block_create(actor=crowd[6], target_id=crowd[2].pk))
        run_commits(lambda: controls.block_create(actor=crowd[4], target_id=crowd[7].pk))
        run_commits(lambda: controls.mute_create(actor=crowd[6], target_id=crowd[0].pk))
        run_commits(lambda: controls.mute_create(actor=crowd[8], target_id=crowd[1].pk, duration=timedelta(days=1)))
        muting = 0
        for user in crowd[:6]:
            for viewer in [user, *crowd[6:10]]:
                hidden, muted = visibility.hidden_and_muted_ids(viewer_id=viewer.pk)
                graph = selectors.profile_graph(user_id=user.pk, viewer_id=viewer.pk, read_controls=True)
                assert (graph.counts, shape(graph.samples), graph.relationship) == together(user.pk, viewer.pk, hidden, 8, 3)
                assert graph.muting == (user.pk in muted)
                muting += graph.muting
        assert muting == 2

    def test_an_unblock_and_a_mute_show_on_the_next_read(self, user_factory: Any, run_commits: Any) -> None:
        star, viewer, fans = star_with_fans(user_factory)
        run_commits(lambda: controls.block_create(actor=viewer, target_id=fans[3].pk))
        graph = selectors.profile_graph(user_id=star.pk, viewer_id=viewer.pk, read_controls=True)
        assert [user.pk for user in graph.samples.mutual.users] == [fan.pk for fan in fans[4:7]]
        assert graph.muting is False
        run_commits(lambda: controls.block_delete(actor=viewer, target_id=fans[3].pk))
        run_commits(lambda: controls.mute_create(actor=viewer, target_id=star.pk))
        graph = selectors.profile_graph(user_id=star.pk, viewer_id=viewer.pk, read_controls=True)
        assert [user.pk for user in graph.samples.mutual.users] == [fan.pk for fan in fans[3:7]]
        assert graph.muting is True


class TestAMemberThatIsNotAnId:
    """A member of the follow sets that is not an id (written around the mirror's writers; the
    reconcile removes it) is neither counted nor shown in a profile's samples, and the page answers."""

    @pytest.mark.parametrize("odd", ["odd", "{pk}.0", "0{pk}", " {pk}", "-{pk}", "1e1", "0x1", "nan", "inf"])
    def test_the_samples_leave_it_out_and_the_page_answers(
        self, odd: str, user_factory: Any, redis_client: Any, client: Any
    ) -> None:
        star, viewer, fans = star_with_fans(user_factory)
        for key in (
            redis_keys.followers_set_key(star.pk),
            redis_keys.following_set_key(star.pk),
            redis_keys.following_set_key(viewer.pk),
        ):
            # Another spelling of the first fan's id, or no id at all.
            redis_client.sadd(key, odd.format(pk=fans[0].pk))
        expected = [
            (4, [fan.pk for fan in fans[3:7]]),
            (2, [fan.pk for fan in fans[3:5]]),
            (5, [fan.pk for fan in fans[:5]]),
        ]
        # Samples as large as the intersections: the script reads every member. (With a full sample
        # it passes over a member longer than the highest id kept, which it then counts, as SCARD
        # counts it, until the reconcile removes it; it never shows one.)
        assert together(star.pk, viewer.pk, set(), 8, 8)[1] == expected
        assert separate(star.pk, viewer.pk, set(), 8, 8)[1] == expected
        client.force_login(viewer)
        page = client.get(f"/u/{star.username}/")
        assert page.status_code == 200
        assert "Mutual follows (4)" in page.content.decode()

    def test_another_spelling_of_a_hidden_id_does_not_show_it(self, user_factory: Any, redis_client: Any) -> None:
        star, _, fans = star_with_fans(user_factory)
        for key in (redis_keys.followers_set_key(star.pk), redis_keys.following_set_key(star.pk)):
            redis_client.sadd(key, f"0{fans[3].pk}")

        graph = selectors.profile_graph(user_id=star.pk, viewer_id=None, hidden={fans[3].pk})

        assert (graph.samples.mutual.count, [user.pk for user in graph.samples.mutual.users]) == (3, ids_of(fans[4:7]))


def ids_of(users: list[Any]) -> list[int]:
    return [user.pk for user in users]

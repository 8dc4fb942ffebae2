"""Cursor paging of followers/following lists: ties, both paths, mutation while paging (C07)."""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from core.cluster import is_cluster, primaries
from core.paging import MAX_MILLISECONDS, MAX_SECONDS, Cursor, InvalidCursorError, feed_cursor, follow_cursor
from core.redis import redis_failed
from social import selectors
from social.models import Follow
from social.rebuild import rebuild_range
from tests.support.cursors import forged

pytestmark = pytest.mark.django_db

BASE = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


def make_followers(user_factory, target, times):
    followers = [user_factory() for _ in times]
    Follow.objects.bulk_create([Follow(follower=f, followee=target, created_at=at) for f, at in zip(followers, times)])
    return followers


def rebuild(users, redis_client):
    ids = sorted(u.pk for u in users)
    rebuild_range(redis_client, ids[0] - 1, ids[-1])


def walk(user_id, *, limit, reader=selectors.followers_page, database=False):
    """All pages, newest first: (list of ids per page)."""
    pages, cursor = [], None
    while True:
        if database:
            redis_failed(RuntimeError("simulated outage"))
        page = reader(user_id=user_id, cursor=cursor, limit=limit)
        pages.append([e.user.pk for e in page.entries])
        cursor = page.next_cursor
        if cursor is None:
            return pages
        assert len(pages) < 100, "endless cursor"


@pytest.fixture
def fast_breaker(settings):
    settings.REDIS_CIRCUIT_OPEN_SECONDS = 60.0


class TestFollowersPaging:
    @pytest.mark.parametrize("database", [False, True], ids=["redis", "database"])
    def test_equal_times_page_exactly_once(self, bob, user_factory, redis_client, database, fast_breaker):
        times = [BASE] * 25 + [BASE - timedelta(seconds=s) for s in (5, 4, 3, 2, 1)]
        followers = make_followers(user_factory, bob, times)
        rebuild([bob, *followers], redis_client)

        pages = walk(bob.pk, limit=10, database=database)

        flat = [pk for page in pages for pk in page]
        assert [len(p) for p in pages] == [10, 10, 10]
        assert sorted(flat) == sorted(f.pk for f in followers)
        tied = sorted((f.pk for f in followers[:25]), key=str, reverse=True)
        older = [f.pk for f in reversed(followers[25:])]
        assert flat == tied + older  # stable order: time desc, then id as string desc

    def test_redis_and_database_paths_agree_page_for_page(self, bob, user_factory, redis_client, fast_breaker):
        times = [BASE - timedelta(seconds=i // 7) for i in range(40)]
        followers = make_followers(user_factory, bob, times)
        rebuild([bob, *followers], redis_client)

        from_redis = walk(bob.pk, limit=6)
        from_database = walk(bob.pk, limit=6, database=True)

        assert from_redis == from_database

    def test_going_back_a_page_returns_the_same_page(self, bob, user_factory, redis_client):
        followers = make_followers(user_factory, bob, [BASE] * 25)
        rebuild([bob, *followers], redis_client)
        first = selectors.followers_page(user_id=bob.pk, cursor=None, limit=10)
        second = selectors.followers_page(user_id=bob.pk, cursor=first.next_cursor, limit=10)

        again = selectors.followers_page(user_id=bob.pk, cursor=first.next_cursor, limit=10)

        assert [e.user.pk for e in again.entries] == [e.user.pk for e in second.entries]
        assert again.next_cursor == second.next_cursor

    def test_exact_multiple_of_page_size_has_no_empty_last_page(self, bob, user_factory, redis_client):
        followers = make_followers(user_factory, bob, [BASE] * 20)
        rebuild([bob, *followers], redis_client)

        pages = walk(bob.pk, limit=10)

        assert [len(p) for p in pages] == [10, 10]

    def test_removals_while_paging_skip_nobody_else(self, bob, user_factory, redis_client, django_capture_on_commit_callbacks):
        from social import services

        followers = make_followers(user_factory, bob, [BASE] * 12 + [BASE - timedelta(seconds=1)] * 12)
        rebuild([bob, *followers], redis_client)
        first = selectors.followers_page(user_id=bob.pk, cursor=None, limit=8)
        shown = [e.user for e in first.entries]
        # The cursor's own item and another seen item unfollow meanwhile.
        with django_capture_on_commit_callbacks(execute=True):
            services.follow_delete(actor=shown[-1], followee_id=bob.pk)
            services.follow_delete(actor=shown[0], followee_id=bob.pk)

        rest: list[int] = []
        cursor = first.next_cursor
        while cursor:
            page = selectors.followers_page(user_id=bob.pk, cursor=cursor, limit=8)
            rest.extend(e.user.pk for e in page.entries)
            cursor = page.next_cursor

        seen = [u.pk for u in shown] + rest
        assert len(seen) == len(set(seen)) == 24

    def test_following_list_pages_newest_first(self, alice, user_factory, redis_client):
        followees = [user_factory() for _ in range(7)]
        Follow.objects.bulk_create(
            [Follow(follower=alice, followee=f, created_at=BASE + timedelta(seconds=i)) for i, f in enumerate(followees)]
        )
        rebuild([alice, *followees], redis_client)

        pages = walk(alice.pk, limit=3, reader=selectors.following_page)

        assert [pk for page in pages for pk in page] == [f.pk for f in reversed(followees)]


class TestCursor:
    @pytest.mark.parametrize(
        "raw",
        [
            "garbage",
            "djE6YWJjOjE",
            "!!!",
            "x" * 65,
            Cursor(1, 2).token[:-2] + "@@",
            forged("v1:-5:2"),  # negative score
            forged(f"v1:{MAX_SECONDS + 1}:2"),  # a second no datetime holds
            forged("v1:99999999999999999999999:2"),  # huge score
            forged("v1:10:0"),  # account ids start at 1
            forged(f"v1:10:{2**63}"),  # member beyond BIGINT
            forged("v2:10:2"),  # unknown version
            forged("v1:010:2"),  # leading zero
            forged("v1:\u0662:2"),  # non-ASCII digit
            forged("v1:10:2:3"),
            "ü" * 8,
        ],
    )
    def test_malformed_follow_cursor_is_rejected(self, raw):
        with pytest.raises(InvalidCursorError):
            follow_cursor(raw)

    @pytest.mark.parametrize("score", [MAX_MILLISECONDS + 1, 2**53, 2**63])
    def test_feed_cursor_beyond_year_9999_is_rejected(self, score):
        with pytest.raises(InvalidCursorError):
            feed_cursor(forged(f"v1:{score}:0"))

    def test_round_trip(self):
        assert follow_cursor(Cursor(1714564800, 42).token) == Cursor(1714564800, 42)
        assert feed_cursor(Cursor(MAX_MILLISECONDS, 0).token) == Cursor(MAX_MILLISECONDS, 0)

    def test_first_page_has_no_cursor(self):
        assert follow_cursor(None) is None
        assert follow_cursor("") is None


@pytest.mark.django_db
@hypothesis_settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    offsets=st.lists(st.integers(min_value=0, max_value=4), min_size=1, max_size=30),
    limit=st.integers(min_value=1, max_value=7),
)
def test_any_tie_pattern_pages_exactly_once(offsets, limit, user_factory, redis_client):
    target = user_factory()
    followers = make_followers(user_factory, target, [BASE - timedelta(seconds=o) for o in offsets])
    rebuild([target, *followers], redis_client)

    pages = walk(target.pk, limit=limit)

    flat = [pk for page in pages for pk in page]
    assert sorted(flat) == sorted(f.pk for f in followers)
    assert all(pages[:-1]) and all(len(p) == limit for p in pages[:-1])


def walk_back(user_id, last_page, *, limit, reader=selectors.followers_page_above, database=False):
    """From ``last_page`` up to the top through each page's ``prev_cursor``: ids per page, top first."""
    pages: list[list[int]] = []
    page = last_page
    while page.prev_cursor is not None:
        if database:
            redis_failed(RuntimeError("simulated outage"))
        page = reader(user_id=user_id, above=page.prev_cursor, limit=limit)
        if not page.entries:
            return pages[::-1]
        pages.append([e.user.pk for e in page.entries])
        assert len(pages) < 100, "endless cursor"
    return pages[::-1]


class TestThePageAbove:
    """Mastodon's ``min_id``: the page just above a position, the way back up a list."""

    @pytest.mark.parametrize("database", [False, True], ids=["redis", "database"])
    def test_walking_back_up_meets_the_pages_walked_down(self, bob, user_factory, redis_client, database, fast_breaker):
        # Ties: a run of equal seconds longer than a page, across page boundaries.
        times = [BASE] * 7 + [BASE - timedelta(seconds=s) for s in (5, 4, 4, 3, 2, 1)]
        followers = make_followers(user_factory, bob, times)
        rebuild([bob, *followers], redis_client)
        down = walk(bob.pk, limit=3, database=database)
        cursor = None
        for _ in down[:-1]:
            cursor = selectors.followers_page(user_id=bob.pk, cursor=cursor, limit=3).next_cursor
        last = selectors.followers_page(user_id=bob.pk, cursor=cursor, limit=3)

        up = walk_back(bob.pk, last, limit=3, database=database)

        assert [e.user.pk for e in last.entries] == down[-1]
        assert up == down[:-1]

    def test_redis_and_database_paths_agree(self, bob, user_factory, redis_client, fast_breaker):
        times = [BASE] * 4 + [BASE + timedelta(seconds=s) for s in (1, 1, 2, 3)]
        followers = make_followers(user_factory, bob, times)
        rebuild([bob, *followers], redis_client)
        oldest = min(followers, key=lambda f: (int(BASE.timestamp()), str(f.pk)))
        position = Cursor(score=int(BASE.timestamp()), member=oldest.pk)

        from_redis = selectors.followers_page_above(user_id=bob.pk, above=position, limit=5)
        redis_failed(RuntimeError("simulated outage"))
        from_database = selectors.followers_page_above(user_id=bob.pk, above=position, limit=5)

        ids = [e.user.pk for e in from_redis.entries]
        assert ids == [e.user.pk for e in from_database.entries]
        assert len(ids) == 5 and oldest.pk not in ids
        # The five closest above the position, newest first: what the list shows just above it.
        everyone = [pk for page in walk(bob.pk, limit=100) for pk in page]
        assert ids == everyone[everyone.index(oldest.pk) - 5 : everyone.index(oldest.pk)]
        assert from_redis.next_cursor is not None and from_redis.prev_cursor is not None

    def test_a_sharded_account_pages_back_up_over_its_shards(self, bob, user_factory, redis_client, settings):
        from social import sharding

        settings.FOLLOWERS_SHARD_THRESHOLD = 20
        followers = make_followers(user_factory, bob, [BASE + timedelta(seconds=s // 3) for s in range(30)])
        rebuild([bob, *followers], redis_client)
        sharding.followers_layout_migrate(user_id=bob.pk)
        down = walk(bob.pk, limit=4)
        cursor = None
        for _ in down[:-1]:
            cursor = selectors.followers_page(user_id=bob.pk, cursor=cursor, limit=4).next_cursor
        last = selectors.followers_page(user_id=bob.pk, cursor=cursor, limit=4)

        assert walk_back(bob.pk, last, limit=4) == down[:-1]

    def test_the_following_list_too(self, alice, user_factory, redis_client):
        targets = [user_factory() for _ in range(5)]
        Follow.objects.bulk_create(
            [Follow(follower=alice, followee=t, created_at=BASE + timedelta(seconds=i)) for i, t in enumerate(targets)]
        )
        rebuild([alice, *targets], redis_client)
        second = selectors.following_page(
            user_id=alice.pk, cursor=selectors.following_page(user_id=alice.pk, cursor=None, limit=2).next_cursor, limit=2
        )

        assert second.prev_cursor is not None
        above = selectors.following_page_above(user_id=alice.pk, above=second.prev_cursor, limit=2)

        assert [e.user.pk for e in above.entries] == [targets[4].pk, targets[3].pk]
        assert [e.user.pk for e in second.entries] == [targets[2].pk, targets[1].pk]


class TestFollowersPageRoundTrips:
    """A followers page at any depth is one Redis round trip (the layout marker rides along)."""

    @staticmethod
    def round_trips(monkeypatch, call):
        from redis.client import Pipeline, Redis

        sent = []
        real_command, real_pipeline = Redis.execute_command, Pipeline.execute

        def command(self, *args, **options):
            sent.append(args[0])
            return real_command(self, *args, **options)

        def pipeline(self, *args, **options):
            sent.append(f"pipeline of {len(self.command_stack)}")
            return real_pipeline(self, *args, **options)

        monkeypatch.setattr(Redis, "execute_command", command)
        monkeypatch.setattr(Pipeline, "execute", pipeline)
        result = call()
        monkeypatch.undo()
        return result, sent

    def deep_cursor(self, user_id):
        items = selectors.followers_items(user_id=user_id, cursor=None, limit=12)
        member, score = items[-1]
        return Cursor(score=score, member=member)

    def test_single_key_account_page_one_and_at_depth(self, bob, user_factory, redis_client, monkeypatch):
        followers = make_followers(user_factory, bob, [BASE + timedelta(seconds=s) for s in range(30)])
        rebuild([bob, *followers], redis_client)
        cursor = self.deep_cursor(bob.pk)

        first, first_sent = self.round_trips(
            monkeypatch, lambda: selectors.followers_items(user_id=bob.pk, cursor=None, limit=10)
        )
        deep, deep_sent = self.round_trips(
            monkeypatch, lambda: selectors.followers_items(user_id=bob.pk, cursor=cursor, limit=10)
        )

        newest_first = sorted(followers, key=lambda f: f.pk, reverse=True)  # created in time order
        assert [member for member, _ in first] == [f.pk for f in newest_first[:10]]
        assert [member for member, _ in deep] == [f.pk for f in newest_first[12:22]]
        if is_cluster(redis_client):
            assert first_sent == deep_sent == ["pipeline of 2"]  # the marker, the page's script
        else:
            assert first_sent == deep_sent == ["EVALSHA"]  # the marker rides in the script

    def test_sharded_account_costs_one_round_trip_once_its_layout_was_seen(
        self, bob, user_factory, redis_client, monkeypatch, settings
    ):
        from social import layout, sharding

        settings.FOLLOWERS_SHARD_THRESHOLD = 20
        followers = make_followers(user_factory, bob, [BASE + timedelta(seconds=s) for s in range(30)])
        rebuild([bob, *followers], redis_client)
        sharding.followers_layout_migrate(user_id=bob.pk)
        cursor = self.deep_cursor(bob.pk)  # on a cluster, learns the layout (two trips)
        if not is_cluster(redis_client):
            monkeypatch.setattr("social.selectors._layout_seen", {})  # one server: no guess needed

        deep, sent = self.round_trips(monkeypatch, lambda: selectors.followers_items(user_id=bob.pk, cursor=cursor, limit=10))

        newest_first = sorted(followers, key=lambda f: f.pk, reverse=True)
        assert [member for member, _ in deep] == [f.pk for f in newest_first[12:22]]
        if is_cluster(redis_client):
            # One pipeline per master holding shards of the account: the marker, a script per shard.
            assert all(trip.startswith("pipeline of ") for trip in sent)
            assert sum(int(trip.split()[-1]) for trip in sent) == 1 + layout.shard_count()
            assert len(sent) == len(primaries(redis_client))
        else:
            assert sent == ["EVALSHA"]  # marker, shards' heads, merge: one script

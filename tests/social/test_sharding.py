"""Big accounts: sharded follower keys, live layout migrations, non-blocking rebuilds (issue 4, C17).

Thresholds are lowered per test (``settings`` fixture) so that a few dozen
real accounts cross them; everything runs against the real MariaDB and
Redis of the test settings.
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
from datetime import timedelta
from io import StringIO
from typing import Any, ClassVar

import pytest
import redis
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connections
from django.utils import timezone

from core import redis_keys as core_keys
from core.cluster import is_cluster, primaries
from core.models import OutboxEntry
from core.outbox import now_ms
from core.paging import MAX_MEMBER, Cursor, redis_page, sort_key
from core.redis import breaker_node, forget_sentinel, get_redis, redis_available, redis_reset_breaker
from datatools.celebrity import celebrity_make
from social import layout, mirror, redis_keys, selectors, services, sharding
from social.mirror import LayoutObservation
from social.models import Follow
from social.outbox import layout_migrations_enqueue
from social.rebuild import ADD_CHUNK, rebuild_user
from tests.support.faults import RedisServer, point_at
from tests.support.graph import assert_mirror_equals_database, db_edges, follow, star_with_fans, unfollow
from users.models import User

pytestmark = pytest.mark.django_db

SINGLE, SHARDED = layout.LAYOUT_SINGLE, layout.LAYOUT_SHARDED


def layout_of(client: Any, user_id: int) -> bytes:
    return client.get(redis_keys.followers_layout_key(user_id)) or SINGLE


def database_followers(user_id: int) -> list[int]:
    """Active followers of ``user_id`` in the order the lists use: newest first, ties by member string."""
    active = db_edges()
    rows = Follow.objects.filter(followee_id=user_id).values_list("follower_id", "followee_id", "created_at")
    items = [(a, int(at.timestamp())) for a, b, at in rows if (a, b) in active]
    return [member for member, _ in sorted(items, key=sort_key, reverse=True)]


def paged_followers(user_id: int, limit: int) -> list[int]:
    """Walk the followers list of ``user_id`` with the cursor, ``limit`` per page."""
    seen: list[int] = []
    cursor = None
    for _ in range(10_000):
        page = selectors.followers_page(user_id=user_id, cursor=cursor, limit=limit)
        seen.extend(entry.user.pk for entry in page.entries)
        cursor = page.next_cursor
        if cursor is None:
            return seen
    raise AssertionError("endless cursor")


def assert_reads_match_database(client: Any, user_id: int, *, limit: int = 7) -> None:
    """What readers see of ``user_id``'s followers equals the database: list, count, membership."""
    expected = database_followers(user_id)
    assert paged_followers(user_id, limit=limit) == expected
    assert selectors.follow_counts(user_id=user_id).followers == len(expected)
    assert_mirror_equals_database(client, [user_id])


def stale_keys(client: Any, user_id: int) -> list[str]:
    """Keys of the layout that is not live, which must not exist once the account is settled."""
    live = layout_of(client, user_id)
    if live == SHARDED:
        keys = [redis_keys.followers_set_key(user_id), redis_keys.followers_zset_key(user_id)]
    else:
        keys = [key for pair in layout.all_shard_keys(user_id) for key in pair]
    return [key for key in keys if client.exists(key)]


class TestDesiredLayout:
    @pytest.mark.parametrize(
        ("followers", "marker", "expected"),
        [
            (9, SINGLE, SINGLE),
            (10, SINGLE, SHARDED),
            (9, SHARDED, SHARDED),  # inside the band: keeps its layout
            (8, SHARDED, SHARDED),
            (7, SHARDED, SINGLE),  # below 10 * 0.8
            (9, layout.LAYOUT_MIGRATING, SHARDED),  # a migration under way is finished
            (9, layout.LAYOUT_UNSHARDING, SINGLE),
            (0, SINGLE, SINGLE),
        ],
    )
    def test_shards_at_the_threshold_and_unshards_below_the_ratio(self, low_threshold, followers, marker, expected):
        assert layout.unshard_threshold() == 8

        assert layout.desired_layout(followers=followers, layout=marker) == expected


class TestGrowAndShrink:
    def test_lists_and_counts_match_the_database_at_every_step(self, low_threshold, user_factory, redis_client):
        star = user_factory(username="star")
        fans = [user_factory() for _ in range(12)]
        layouts = []

        for fan in fans:
            follow(fan, star)
            assert_reads_match_database(redis_client, star.pk)
            assert stale_keys(redis_client, star.pk) == []
            layouts.append(layout_of(redis_client, star.pk))
        for fan in fans:
            unfollow(fan, star)
            assert_reads_match_database(redis_client, star.pk)
            assert stale_keys(redis_client, star.pk) == []
            layouts.append(layout_of(redis_client, star.pk))

        # Followers after each step: 1..12, then 11..0.
        assert layouts == [SINGLE] * 9 + [SHARDED] * 3 + [SHARDED] * 4 + [SINGLE] * 8
        assert not redis_client.exists(redis_keys.followers_migration_lock_key(star.pk))
        assert not redis_client.exists(redis_keys.followers_migration_queued_key(star.pk))

    def test_sharded_keys_place_each_follower_in_its_shard(self, low_threshold, user_factory, redis_client):
        star = user_factory()
        fans = [user_factory() for _ in range(11)]

        for fan in fans:
            follow(fan, star)

        assert layout_of(redis_client, star.pk) == SHARDED
        for shard, (set_key, zset_key) in enumerate(layout.all_shard_keys(star.pk)):
            expected = {fan.pk for fan in fans if fan.pk % 4 == shard}
            assert {int(m) for m in redis_client.smembers(set_key)} == expected
            assert {int(m) for m in redis_client.zrange(zset_key, 0, -1)} == expected

    def test_membership_reads_of_a_sharded_account_agree_with_the_database(self, low_threshold, user_factory, redis_client):
        star, viewer, fans = star_with_fans(user_factory)

        familiar = selectors.familiar_followers(viewer_id=viewer.pk, user_id=star.pk, limit=20)
        mutual = selectors.mutual_follows(user_id=star.pk, limit=20)

        assert layout_of(redis_client, star.pk) == SHARDED
        assert {u.pk for u in familiar.users} == {f.pk for f in fans[:5]}
        assert {u.pk for u in mutual.users} == {f.pk for f in fans[3:7]}

    def test_counts_are_never_negative(self, low_threshold, user_factory, redis_client):
        star, fan = user_factory(), user_factory()
        follow(fan, star)

        unfollow(fan, star)
        unfollow(fan, star)

        assert selectors.follow_counts(user_id=star.pk) == selectors.Counts(followers=0, following=0)
        assert selectors.follow_counts(user_id=fan.pk) == selectors.Counts(followers=0, following=0)


def make_followers(star: Any, fans: list[Any], seconds: list[int]) -> None:
    """Follow rows ``fan -> star`` at ``now - seconds[i]`` (bulk, then the mirror is rebuilt)."""
    now = timezone.now().replace(microsecond=0)
    Follow.objects.bulk_create(
        [Follow(follower=fan, followee=star, created_at=now - timedelta(seconds=s)) for fan, s in zip(fans, seconds)]
    )


class TestShardedPaging:
    def test_every_follower_once_newest_first_with_ties(self, low_threshold, user_factory, redis_client):
        star = user_factory()
        fans = [user_factory() for _ in range(60)]
        # 25 followers share one follow second, the others are older, some tied in pairs.
        make_followers(star, fans, [5] * 25 + [100 + i // 2 for i in range(35)])

        rebuild_user(star.pk)
        pages = [paged_followers(star.pk, limit) for limit in (1, 7, 10, 25, 60, 100)]

        assert layout_of(redis_client, star.pk) == SHARDED
        expected = database_followers(star.pk)
        assert len(expected) == 60
        for seen in pages:
            assert seen == expected
            assert len(set(seen)) == 60

    def test_a_cursor_gives_the_same_page_again(self, low_threshold, user_factory, redis_client):
        star = user_factory()
        fans = [user_factory() for _ in range(30)]
        make_followers(star, fans, [7] * 25 + [50, 51, 52, 53, 54])
        rebuild_user(star.pk)
        first = selectors.followers_page(user_id=star.pk, cursor=None, limit=10)

        second = selectors.followers_page(user_id=star.pk, cursor=first.next_cursor, limit=10)
        again = selectors.followers_page(user_id=star.pk, cursor=first.next_cursor, limit=10)

        assert [e.user.pk for e in second.entries] == [e.user.pk for e in again.entries]
        assert [e.user.pk for e in second.entries] == database_followers(star.pk)[10:20]

    def test_the_database_path_pages_a_sharded_list_identically(self, low_threshold, user_factory, redis_client, monkeypatch):
        star = user_factory()
        fans = [user_factory() for _ in range(40)]
        make_followers(star, fans, [3] * 20 + [9] * 20)
        rebuild_user(star.pk)
        from_redis = paged_followers(star.pk, limit=6)

        monkeypatch.setattr("core.redis.redis_available", lambda node="": False)
        from_database = paged_followers(star.pk, limit=6)

        assert from_redis == from_database == database_followers(star.pk)


def reference_page(items: list[tuple[int, int]], cursor: Cursor | None, limit: int) -> list[tuple[int, int]]:
    """The page of ``items`` (newest first) after ``cursor``, computed here, not by ``core.paging``."""
    if cursor is not None:
        position = (cursor.score, str(cursor.member).encode())
        items = [(member, score) for member, score in items if (score, str(member).encode()) < position]
    return items[:limit]


class TestShardedPageEqualsTheDatabase:
    """The one-script page of a sharded account equals the database's page at every depth."""

    # Followers per shard (shard 2 gets none: its key does not exist), so pages cross shard
    # boundaries unevenly and one shard's chunk runs out and is refilled.
    QUOTAS: ClassVar[dict[int, int]] = {0: 4, 1: 18, 3: 8}

    @pytest.fixture
    def star(self, low_threshold: Any, user_factory: Any, redis_client: Any) -> Any:
        star = user_factory()
        fans: list[Any] = []
        taken = dict.fromkeys(self.QUOTAS, 0)
        while len(fans) < sum(self.QUOTAS.values()):
            fan = user_factory()
            shard = layout.follower_shard(fan.pk)
            if taken.get(shard, 0) < self.QUOTAS.get(shard, 0):
                taken[shard] += 1
                fans.append(fan)
        # Ten share one second (ties across shards and within one), then pairs, then the oldest alone.
        make_followers(star, fans, [4] * 10 + [20 + i // 2 for i in range(19)] + [500])
        rebuild_user(star.pk)
        assert layout_of(redis_client, star.pk) == SHARDED
        assert not redis_client.exists(redis_keys.followers_zset_shard_key(star.pk, 2))
        return star

    @staticmethod
    def expected_items(user_id: int) -> list[tuple[int, int]]:
        rows = Follow.objects.filter(followee_id=user_id).values_list("follower_id", "created_at")
        return sorted(((member, int(at.timestamp())) for member, at in rows), key=sort_key, reverse=True)

    @staticmethod
    def cursors(items: list[tuple[int, int]]) -> list[Cursor | None]:
        """None, the position after every item, and positions of no follower at each score."""
        found: list[Cursor | None] = [None, *(Cursor(score=score, member=member) for member, score in items)]
        for score in sorted({score for _, score in items}):
            found += [Cursor(score=score, member=1), Cursor(score=score, member=MAX_MEMBER), Cursor(score=score + 1, member=5)]
        return found

    def test_every_depth_and_page_size_equals_the_database(self, star: Any, redis_client: Any, monkeypatch: Any) -> None:
        items = self.expected_items(star.pk)
        assert len(items) == 30
        cases = [(cursor, limit) for cursor in self.cursors(items) for limit in (1, 4, 7, 30, 51)]
        from_redis = [selectors.followers_items(user_id=star.pk, cursor=cursor, limit=limit) for cursor, limit in cases]

        monkeypatch.setattr("core.redis.redis_available", lambda node="": False)
        from_database = [selectors.followers_items(user_id=star.pk, cursor=cursor, limit=limit) for cursor, limit in cases]

        expected = [reference_page(items, cursor, limit) for cursor, limit in cases]
        assert from_redis == expected
        assert from_database == expected
        assert sum(len(page) for page in expected) > 1000  # real pages, not empty ones

    def test_a_page_of_no_rows_reads_none(self, star: Any, redis_client: Any) -> None:
        one_shard = [redis_keys.followers_zset_shard_key(star.pk, 1)]

        assert redis_page(redis_client, one_shard, cursor=None, limit=0) == []
        assert redis_page(redis_client, one_shard, cursor=None, limit=2) != []
        assert selectors.followers_items(user_id=star.pk, cursor=None, limit=0) == []

    def test_the_pages_walked_with_their_cursors_equal_the_database(self, star: Any) -> None:
        expected = [member for member, _ in self.expected_items(star.pk)]
        for limit in (1, 3, 7, 29, 30, 50):
            assert paged_followers(star.pk, limit) == expected

    def test_an_unloaded_script_is_loaded_again(self, star: Any, redis_client: Any, request: Any) -> None:
        if not is_cluster(redis_client):
            # SCRIPT FLUSH unloads every client's scripts: on the shared server, another test
            # process's pipeline could lose its script between SCRIPT LOAD and EVALSHA. A
            # cluster's pipelines send a script's source again on NOSCRIPT (core.cluster).
            request.getfixturevalue("own_redis")
            redis_client = get_redis()
            rebuild_user(star.pk)
        first = selectors.followers_items(user_id=star.pk, cursor=None, limit=5)
        for _, node in primaries(redis_client):
            node.script_flush()

        again = selectors.followers_items(user_id=star.pk, cursor=None, limit=5)

        assert first == again == self.expected_items(star.pk)[:5]
        # Read by a script loaded again, not from the database.
        assert sum(node.info("memory")["number_of_cached_scripts"] for _, node in primaries(redis_client)) > 0

    @pytest.mark.parametrize(
        ("marker", "reads_shards"),
        [(None, False), (layout.LAYOUT_MIGRATING, False), (layout.LAYOUT_SHARDED, True), (layout.LAYOUT_UNSHARDING, True)],
    )
    def test_the_marker_chooses_the_keys_read(
        self, star: Any, redis_client: Any, monkeypatch: Any, marker: bytes | None, reads_shards: bool
    ) -> None:
        # The single key holds only the two oldest followers, so each layout's answer is told apart.
        items = self.expected_items(star.pk)
        oldest = items[-2:]
        redis_client.zadd(redis_keys.followers_zset_key(star.pk), {str(member): score for member, score in oldest})
        marker_key = redis_keys.followers_layout_key(star.pk)
        if marker is None:
            redis_client.delete(marker_key)
        else:
            redis_client.set(marker_key, marker)
        monkeypatch.setattr("social.selectors._layout_seen", {})

        first = selectors.followers_items(user_id=star.pk, cursor=None, limit=51)
        again = selectors.followers_items(user_id=star.pk, cursor=None, limit=51)  # with the layout seen

        assert first == again == (items if reads_shards else oldest)
        assert selectors.layout_seen(star.pk) == (marker or SINGLE)

    def test_redis_unreachable_answers_from_the_database(self, star: Any, settings: Any, monkeypatch: Any) -> None:
        items = self.expected_items(star.pk)
        cursor = Cursor(score=items[5][1], member=items[5][0])
        settings.REDIS_CIRCUIT_OPEN_SECONDS = 60.0
        dead = redis.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.2)
        monkeypatch.setattr("core.redis.get_redis", lambda: dead)

        page = selectors.followers_items(user_id=star.pk, cursor=cursor, limit=7)
        after_breaker = selectors.followers_items(user_id=star.pk, cursor=cursor, limit=7)

        assert not redis_available(breaker_node(redis_keys.followers_zset_key(star.pk)))
        assert page == after_breaker == items[6:13]


class TestMigrationInterleavedReads:
    """Reads between every step of a migration never see the list empty, doubled or stale."""

    @pytest.fixture
    def star(self, settings, redis_client):
        """An account in the single-key layout, with more followers than the server keeps in a
        listpack or intset, so that ZSCAN/SSCAN really walk it in slices."""
        compact = max(int(v) for v in redis_client.config_get("*-max-*-entries").values())
        self.FANS = max(600, compact + 500)
        self.SLICE = self.FANS // 6
        settings.FOLLOWERS_SHARDS = 4
        settings.FOLLOWERS_SHARD_THRESHOLD = 10 * self.FANS
        result = celebrity_make(username="star", followers=self.FANS, ties=3)
        assert layout_of(redis_client, result.user_id) == SINGLE
        return User.objects.get(pk=result.user_id)

    def check(self, client: Any, star: Any) -> None:
        assert_reads_match_database(client, star.pk, limit=self.FANS // 7)

    def test_to_shards_with_follows_and_unfollows_between_steps(
        self, settings, star, user_factory, redis_client, django_capture_on_commit_callbacks
    ):
        settings.FOLLOWERS_SHARD_THRESHOLD = self.FANS // 2
        newcomers = [user_factory() for _ in range(3)]
        leavers = list(Follow.objects.filter(followee=star).order_by("id")[:3].values_list("follower", flat=True))
        phases: list[str] = []

        def between_steps(phase: str) -> None:
            phases.append(phase)
            self.check(redis_client, star)
            if phase in ("marked", "verified") or len(phases) in (3, 20):
                who = newcomers.pop() if newcomers else None
                if who is not None:
                    follow(who, star)
                if leavers:
                    with django_capture_on_commit_callbacks(execute=True):
                        services.follow_delete_pair(follower_id=leavers.pop(), followee_id=star.pk)
                self.check(redis_client, star)

        result = sharding.followers_layout_migrate(user_id=star.pk, slice_size=self.SLICE, on_step=between_steps)

        assert result.to_layout == SHARDED and result.skipped == ""
        assert phases[0] == "marked" and phases[-2:] == ["flipped", "cleaned"]
        assert phases.count("copy") > 3  # the copy really ran in slices
        assert layout_of(redis_client, star.pk) == SHARDED
        assert stale_keys(redis_client, star.pk) == []
        self.check(redis_client, star)
        assert selectors.follow_counts(user_id=star.pk).followers == self.FANS

    def test_blocks_during_the_migration_end_the_follows_in_every_layout(
        self, settings, star, redis_client, django_capture_on_commit_callbacks
    ):
        # Issue 16: the star blocks followers while its followers move to shards.
        from social import controls

        settings.FOLLOWERS_SHARD_THRESHOLD = self.FANS // 2
        blocked = list(User.objects.filter(following_edges__followee=star).order_by("id")[:4])
        phases: list[str] = []

        def between_steps(phase: str) -> None:
            phases.append(phase)
            if blocked and (phase in ("marked", "verified") or len(phases) in (3, 20)):
                with django_capture_on_commit_callbacks(execute=True):
                    controls.block_create(actor=star, target_id=blocked.pop().pk)
                self.check(redis_client, star)

        result = sharding.followers_layout_migrate(user_id=star.pk, slice_size=self.SLICE, on_step=between_steps)

        assert result.to_layout == SHARDED and blocked == []
        assert stale_keys(redis_client, star.pk) == []
        self.check(redis_client, star)
        assert selectors.follow_counts(user_id=star.pk).followers == self.FANS - 4
        assert redis_client.scard(redis_keys.blocks_key(star.pk)) == 4

    def test_back_to_one_key_with_reads_between_steps(self, settings, star, redis_client):
        sharding.followers_layout_migrate(user_id=star.pk, target=SHARDED, slice_size=self.SLICE)
        seen_layouts = []

        def between_steps(phase: str) -> None:
            seen_layouts.append(layout_of(redis_client, star.pk))
            self.check(redis_client, star)

        result = sharding.followers_layout_migrate(user_id=star.pk, slice_size=self.SLICE, on_step=between_steps)

        assert (result.from_layout, result.to_layout) == (SHARDED, SINGLE)
        assert layout.LAYOUT_UNSHARDING in seen_layouts
        assert layout_of(redis_client, star.pk) == SINGLE
        assert stale_keys(redis_client, star.pk) == []
        self.check(redis_client, star)

    def test_verification_repairs_a_copy_that_raced_with_an_unfollow(self, settings, star, redis_client):
        settings.FOLLOWERS_SHARD_THRESHOLD = self.FANS // 2
        leavers: list[int] = []

        def between_steps(phase: str) -> None:
            if phase == "copy" and not leavers:
                # The copy has written this follower into its shard. Now its
                # unfollow commits, and the applier (which read the marker
                # before the migration set it) removes it from the single
                # key only: the layouts disagree, and only verification
                # can notice.
                copied = [redis_client.srandmember(set_key) for set_key, _ in layout.all_shard_keys(star.pk)]
                leaver = int(next(member for member in copied if member is not None))
                leavers.append(leaver)
                Follow.objects.filter(follower_id=leaver, followee=star).delete()
                pipe = redis_client.pipeline(transaction=False)
                mirror.queue_pair_write(pipe, follower_id=leaver, followee_id=star.pk, score=None, layout_now=SINGLE)
                pipe.execute()

        result = sharding.followers_layout_migrate(user_id=star.pk, slice_size=self.SLICE, on_step=between_steps)

        assert layout_of(redis_client, star.pk) == SHARDED
        assert result.repaired >= 1
        assert leavers[0] not in paged_followers(star.pk, limit=self.SLICE)
        assert selectors.follow_counts(user_id=star.pk).followers == self.FANS - 1
        self.check(redis_client, star)

    def test_a_writer_that_read_the_marker_before_the_flip_writes_again(
        self, settings, star, user_factory, redis_client, monkeypatch
    ):
        settings.FOLLOWERS_SHARD_THRESHOLD = self.FANS // 2
        sharding.followers_layout_migrate(user_id=star.pk)
        newcomer = user_factory()
        # The mirror's first guess is the layout it last saw: none, so single.
        monkeypatch.setattr("social.selectors._layout_seen", {})
        real = mirror.queue_pair_write
        calls = []

        def recording(pipe: Any, **options: Any) -> None:
            calls.append((options["layout_now"], options["scrub"]))
            real(pipe, **options)

        monkeypatch.setattr(mirror, "queue_pair_write", recording)

        follow(newcomer, star)

        assert calls[:2] == [(SINGLE, False), (SHARDED, True)]  # written again, with the layout the pipeline read
        shard = layout.follower_shard(newcomer.pk)
        assert redis_client.sismember(redis_keys.followers_set_shard_key(star.pk, shard), newcomer.pk)
        assert stale_keys(redis_client, star.pk) == []  # the stray single-key write was scrubbed
        self.check(redis_client, star)

    def test_a_second_migration_is_refused_while_one_holds_the_lock(self, settings, star, redis_client):
        settings.FOLLOWERS_SHARD_THRESHOLD = self.FANS // 2
        results = []

        def between_steps(phase: str) -> None:
            if phase == "marked":
                results.append(sharding.followers_layout_migrate(user_id=star.pk))

        first = sharding.followers_layout_migrate(user_id=star.pk, on_step=between_steps)

        assert results[0].skipped == "locked"
        assert first.skipped == "" and layout_of(redis_client, star.pk) == SHARDED

    def test_an_interrupted_migration_is_finished_by_a_rerun(self, settings, star, redis_client):
        settings.FOLLOWERS_SHARD_THRESHOLD = self.FANS // 2

        def crash(phase: str) -> None:
            if phase == "copy":
                raise RuntimeError("worker killed")

        with pytest.raises(RuntimeError):
            sharding.followers_layout_migrate(user_id=star.pk, slice_size=self.SLICE, on_step=crash)
        halfway = layout_of(redis_client, star.pk)
        self.check(redis_client, star)  # readers still read the single key

        result = sharding.followers_layout_migrate(user_id=star.pk, slice_size=self.SLICE)

        assert halfway == layout.LAYOUT_MIGRATING
        assert result.from_layout == layout.LAYOUT_MIGRATING and result.to_layout == SHARDED
        assert stale_keys(redis_client, star.pk) == []
        self.check(redis_client, star)


class TestTrigger:
    def test_records_one_layout_entry_per_account_that_crossed(
        self, low_threshold, user_factory, redis_client, django_capture_on_commit_callbacks
    ):
        big, small, shrunk = user_factory(), user_factory(), user_factory()

        with django_capture_on_commit_callbacks(execute=False) as sends:
            first = layout_migrations_enqueue(
                {
                    big.pk: LayoutObservation(10, SINGLE),
                    small.pk: LayoutObservation(9, SINGLE),
                    shrunk.pk: LayoutObservation(8, SHARDED),
                }
            )
            again = layout_migrations_enqueue({big.pk: LayoutObservation(11, SINGLE)})

        assert first == [big.pk]
        assert again == []  # the queued key stops a stream of follows from recording more
        pending = list(
            OutboxEntry.objects.filter(kind="social.layout", applied_at__isnull=True).values_list("subject_id", flat=True)
        )
        assert pending == [big.pk]
        assert len(sends) == 1  # its message, alone, with the long tasks' limits

    def test_crossing_by_follows_migrates_through_the_task(self, low_threshold, user_factory, redis_client):
        star = user_factory()
        fans = [user_factory() for _ in range(10)]
        make_followers(star, fans[:9], list(range(9)))
        rebuild_user(star.pk)
        assert layout_of(redis_client, star.pk) == SINGLE

        follow(fans[9], star)  # eager Celery runs the task

        assert layout_of(redis_client, star.pk) == SHARDED
        assert_reads_match_database(redis_client, star.pk)


class TestMakeCelebrity:
    def test_gives_an_account_exactly_n_followers_and_is_rerunnable(self, low_threshold, redis_client):
        first = celebrity_make(username="celeb", followers=30, ties=4, batch=7)
        second = celebrity_make(username="celeb", followers=45, ties=4, batch=7)

        assert first.followers == 30 and second.followers == 45
        assert second.user_id == first.user_id
        assert layout_of(redis_client, first.user_id) == SHARDED
        assert_reads_match_database(redis_client, first.user_id)
        fans = database_followers(first.user_id)
        assert redis_client.sismember(redis_keys.following_set_key(fans[0]), first.user_id)

    def test_rejects_a_negative_count(self, db):
        with pytest.raises(ValueError):
            celebrity_make(username="celeb", followers=-1)

    def test_command_reports_database_and_redis_counts(self, low_threshold, redis_client):
        out = StringIO()

        call_command("make_celebrity", "--followers", "25", "--username", "cmdstar", verbosity=0, stdout=out)

        star = User.objects.get(username="cmdstar")
        assert f"user {star.pk} (cmdstar): 25 followers in the database, 25 in Redis (sharded layout)" in out.getvalue()
        assert selectors.follow_counts(user_id=star.pk).followers == 25

    @pytest.mark.parametrize("args", [["--followers", "-5"], ["--followers", "20000000"], ["--followers", "3", "--ties", "0"]])
    def test_command_rejects_bad_arguments_and_writes_nothing(self, args):
        with pytest.raises(CommandError):
            call_command("make_celebrity", *args, "--username", "nobody", verbosity=0, stdout=StringIO())

        assert not User.objects.filter(username="nobody").exists()


# --- C17: a rebuild of a 200k-follower account while a client reads every 10 ms ------


@pytest.fixture
def own_redis(settings: Any, redis_isolated: str) -> Any:
    """A redis-server of this test's own, used by the application, so its INFO and SLOWLOG are ours alone."""
    server = RedisServer()
    server.start()
    point_at(settings, server)
    client = server.client()
    client.config_set("slowlog-max-len", 1_000_000)
    client.set(core_keys.sentinel_key(), now_ms())
    redis_reset_breaker()
    forget_sentinel()
    yield client
    server.stop()
    redis_reset_breaker()
    forget_sentinel()


def slowlog_argc(entry: dict[str, Any]) -> int:
    """Argument count of a SLOWLOG entry (Redis keeps 32 and says how many more)."""
    args = entry["command"].split()
    if args and args[-1] == b"arguments)":  # "... (4990 more arguments)"
        return 31 + int(args[-3].lstrip(b"("))
    return len(args)


def read_every_10_ms(star_id: int, done: Any, send: Any) -> None:
    """The C17 client, run in a forked process: followers count and first page every 10 ms.

    Sends ``[(ms, count, first page length)]``: one "ready" sample first
    (before the rebuild starts), then every read until ``done`` is set.
    """
    reads = []
    try:
        while not done.is_set():
            started = time.perf_counter()
            count = selectors.follow_counts(user_id=star_id).followers
            page = selectors.followers_page(user_id=star_id, cursor=None, limit=20)
            reads.append(((time.perf_counter() - started) * 1000, count, len(page.entries)))
            if len(reads) == 1:
                send.send([])  # ready: the parent starts the rebuild now
            time.sleep(0.01)
    finally:
        connections.close_all()
        send.send(reads)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
class TestC17RebuildOfABigAccount:
    FOLLOWERS = 200_000

    def test_reads_keep_answering_no_step_blocks_and_follows_landing_meanwhile_are_kept(
        self, own_redis, user_factory, monkeypatch
    ):
        from social import rebuild

        star_id = celebrity_make(username="c17star", followers=self.FOLLOWERS, ties=8).user_id
        latecomers = [user_factory(username=f"late{i}") for i in range(3)]
        leavers = list(Follow.objects.filter(followee_id=star_id).order_by("id")[:2].values_list("follower", flat=True))
        expected_count = self.FOLLOWERS + len(latecomers) - len(leavers)
        big_keys = 2 * 16  # shard sets and sorted sets replaced by the rebuild
        own_redis.config_resetstat()
        own_redis.config_set("slowlog-log-slower-than", 0)  # log every command from here on
        own_redis.slowlog_reset()
        lazyfreed_before = own_redis.info("memory")["lazyfreed_objects"]

        # Follows and unfollows land after the rebuild read its snapshot and
        # before it swaps the keys in: only the outbox replay can keep them.
        real_write = rebuild._write_users

        def write_after_changes(*args: Any, **kwargs: Any) -> None:
            for user in latecomers:
                services.follow_create(actor=user, followee_id=star_id)
            for follower_id in leavers:
                services.follow_delete_pair(follower_id=follower_id, followee_id=star_id)
            real_write(*args, **kwargs)

        monkeypatch.setattr(rebuild, "_write_users", write_after_changes)
        # The client is another process (forked: same settings, its own
        # Redis and database connections), so the rebuild's Python work
        # does not hold it up through the GIL; only Redis could.
        connections.close_all()
        context = multiprocessing.get_context("fork")
        done = context.Event()
        receive, send = context.Pipe(duplex=False)
        client = context.Process(target=read_every_10_ms, args=(star_id, done, send))
        client.start()
        assert receive.poll(30) and receive.recv() == []  # the client has read once
        try:
            rebuilt = rebuild_user(star_id)
        finally:
            time.sleep(0.05)
            done.set()
            reads: list[tuple[float, int, int]] = receive.recv()  # (ms, count, first page length)
            client.join(timeout=30)

        marker = own_redis.get(redis_keys.followers_layout_key(star_id))
        shard_sizes = [own_redis.zcard(zset_key) for _, zset_key in layout.all_shard_keys(star_id)]
        followers = {int(m) for k, _ in layout.all_shard_keys(star_id) for m in own_redis.smembers(k)}
        commands = own_redis.slowlog_get(1_000_000)
        stats = own_redis.info("commandstats")
        lazyfreed = own_redis.info("memory")["lazyfreed_objects"] - lazyfreed_before
        latencies = sorted(ms for ms, _, _ in reads)
        commands = [e for e in commands if not e["command"].startswith((b"SLOWLOG", b"CONFIG", b"INFO"))]
        slowest = max(commands, key=lambda e: e["duration"])
        print(
            f"\nC17: rebuilt {rebuilt} edges; {len(reads)} reads, p50 {statistics.median(latencies):.2f} ms, "
            f"p99 {latencies[int(len(latencies) * 0.99)]:.2f} ms, max {latencies[-1]:.2f} ms; {len(commands)} Redis commands, the slowest {slowest['duration']} us "
            f"({slowest['command'][:60]!r}, {slowlog_argc(slowest)} arguments); "
            f"{lazyfreed} values freed in the background"
        )

        assert rebuilt == self.FOLLOWERS  # its snapshot, read before the late changes
        assert marker == SHARDED
        assert sum(shard_sizes) == expected_count
        assert max(shard_sizes) <= expected_count / 16 * 1.2
        assert {u.pk for u in latecomers} <= followers
        assert not set(leavers) & followers
        assert selectors.follow_counts(user_id=star_id).followers == expected_count
        # Reads kept answering from Redis with a whole list: never empty, never doubled.
        assert len(reads) >= 3
        assert all(self.FOLLOWERS - len(leavers) <= count <= expected_count + len(leavers) for _, count, _ in reads)
        assert all(length == 20 for _, _, length in reads)
        # No single step on a huge key: no DEL at all, no command with more
        # than one ADD_CHUNK of members, and the old shard values were freed
        # by the background thread (a RENAME over them would free in line).
        assert "cmdstat_del" not in stats
        assert max(slowlog_argc(entry) for entry in commands) <= 2 * ADD_CHUNK + 2
        assert lazyfreed >= big_keys


class TestCountsOfSeveral:
    def test_a_sharded_account_counts_beside_a_single_key_one(self, low_threshold, user_factory, redis_client):
        star = user_factory(username="star")
        fans = [user_factory() for _ in range(12)]
        for fan in fans:
            follow(fan, star)

        counts = selectors.follow_counts_many(user_ids=[star.pk, fans[0].pk])

        assert layout_of(redis_client, star.pk) == SHARDED
        assert counts == {
            star.pk: selectors.Counts(followers=12, following=0),
            fans[0].pk: selectors.Counts(followers=0, following=1),
        }

"""Reconcile finds exactly the drift made behind the application's back, and repairs it (C03)."""

from __future__ import annotations

import json
import random
from io import StringIO

import pytest
from django.core.management import call_command

from social import reconcile, redis_keys, selectors, services
from social.models import Follow, ReconcileRun
from social.rebuild import rebuild_all
from social.reconcile import reconcile_all, reconcile_run
from tests.support.graph import assert_mirror_equals_database, db_edges

pytestmark = pytest.mark.django_db

SIDES = ("following", "followers")


def side_keys(pair: tuple[int, int], side: str) -> tuple[str, str, int]:
    """(set_key, zset_key, member) of one side of an edge (single-key layout)."""
    follower_id, followee_id = pair
    if side == "following":
        return redis_keys.following_set_key(follower_id), redis_keys.following_zset_key(follower_id), followee_id
    return redis_keys.followers_set_key(followee_id), redis_keys.followers_zset_key(followee_id), follower_id


@pytest.fixture
def graph(user_factory, django_capture_on_commit_callbacks):
    """30 accounts and about 150 random follows, mirrored."""
    rng = random.Random(5)
    users = [user_factory() for _ in range(30)]
    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(160):
            a, b = rng.sample(users, 2)
            services.follow_create(actor=a, followee_id=b.pk)
    return users


class TestBehindTheBackDrift:
    def test_reports_exactly_the_deleted_added_and_altered_members_then_repairs_them(self, graph, redis_client):
        rng = random.Random(11)
        ids = [u.pk for u in graph]
        edges = sorted(db_edges())
        chosen = rng.sample(edges, 30)
        deleted, altered = chosen[:18], chosen[18:]
        non_edges = [(a, b) for a in ids for b in ids if a != b and (a, b) not in set(edges)]
        added = rng.sample(non_edges, 9)
        pipe = redis_client.pipeline(transaction=False)
        for index, pair in enumerate(deleted):  # one structure of one side each
            set_key, zset_key, member = side_keys(pair, SIDES[index % 2])
            pipe.srem(set_key, member) if index % 3 else pipe.zrem(zset_key, member)
        for index, pair in enumerate(added):
            set_key, zset_key, member = side_keys(pair, SIDES[index % 2])
            pipe.sadd(set_key, member) if index % 3 else pipe.zadd(zset_key, {str(member): 1_000_000})
        for index, pair in enumerate(altered):
            _, zset_key, member = side_keys(pair, SIDES[index % 2])
            pipe.zincrby(zset_key, rng.choice([-86400, -1, 1, 3600]), str(member))
        pipe.execute()

        dry = reconcile_all(repair=False)
        fixed = reconcile_all(repair=True)
        after = reconcile_all(repair=False)

        assert (dry.edges_missing, dry.edges_extra, dry.scores_wrong) == (18, 9, 12)
        assert dry.pairs_repaired == 0
        assert dry.users_checked == len(graph)
        assert (fixed.edges_missing, fixed.edges_extra, fixed.scores_wrong) == (18, 9, 12)
        assert fixed.pairs_repaired == 18 + 9 + 12
        assert (after.edges_missing, after.edges_extra, after.scores_wrong, after.pairs_repaired) == (0, 0, 0, 0)
        assert_mirror_equals_database(redis_client, ids)

    @pytest.mark.parametrize("check", ["digest", "full"])
    def test_every_exact_check_finds_a_lone_altered_score(self, graph, redis_client, check):
        pair = min(db_edges())
        _, zset_key, member = side_keys(pair, "followers")
        redis_client.zincrby(zset_key, 1, str(member))

        report = reconcile_all(repair=True, check=check)

        assert (report.edges_missing, report.edges_extra, report.scores_wrong) == (0, 0, 1)
        assert reconcile_all(repair=False, check=check).drift == 0

    def test_the_counts_check_sees_cardinality_drift_but_not_an_altered_score(self, graph, redis_client):
        first, second = sorted(db_edges())[:2]
        redis_client.zincrby(side_keys(first, "followers")[1], 1, str(first[0]))
        set_key, _, member = side_keys(second, "following")
        redis_client.srem(set_key, member)

        report = reconcile_all(repair=False, check="counts")

        assert (report.edges_missing, report.scores_wrong) == (1, 0)

    def test_a_member_that_is_not_a_plain_id_is_extra_and_removed(
        self, alice, bob, redis_client, django_capture_on_commit_callbacks
    ):
        with django_capture_on_commit_callbacks(execute=True):
            services.follow_create(actor=alice, followee_id=bob.pk)
        set_key, zset_key, _ = side_keys((alice.pk, bob.pk), "following")
        redis_client.sadd(set_key, f"0{bob.pk}", f"{redis_keys.prefix()}{bob.pk}")
        redis_client.zadd(zset_key, {f"0{bob.pk}": 5})

        report = reconcile_all(repair=True)

        assert (report.edges_missing, report.edges_extra, report.scores_wrong) == (0, 2, 0)
        assert redis_client.smembers(set_key) == {str(bob.pk).encode()}
        assert [m for m, _ in redis_client.zrange(zset_key, 0, -1, withscores=True)] == [str(bob.pk).encode()]

    def test_big_keys_are_read_in_slices_with_the_same_answer(self, graph, redis_client, monkeypatch):
        pair = sorted(db_edges())[3]
        redis_client.zincrby(side_keys(pair, "following")[1], 7, str(pair[1]))
        monkeypatch.setattr(reconcile, "SLICE", 2)

        report = reconcile_all(repair=False)

        assert (report.edges_missing, report.edges_extra, report.scores_wrong) == (0, 0, 1)

    def test_a_deactivated_account_must_vanish_from_redis(
        self, alice, bob, charlie, redis_client, django_capture_on_commit_callbacks
    ):
        with django_capture_on_commit_callbacks(execute=True):
            services.follow_create(actor=alice, followee_id=bob.pk)
            services.follow_create(actor=charlie, followee_id=bob.pk)
        type(bob).objects.filter(pk=bob.pk).update(is_active=False)  # behind the app's back: no outbox entry

        report = reconcile_all(repair=True)

        # Each edge is extra on both of its sides: bob's followers and the followers' following.
        assert (report.edges_missing, report.edges_extra) == (0, 4)
        assert selectors.follow_counts(user_id=alice.pk).following == 0
        assert redis_client.scard(redis_keys.followers_set_key(bob.pk)) == 0


class TestCountDriftedLow:
    """C03: the stored following count drifted low, then two unfollows."""

    def test_count_never_below_zero_and_reconcile_restores_and_reports(
        self, user_factory, redis_client, django_capture_on_commit_callbacks
    ):
        alice = user_factory(username="alice")
        followees = [user_factory() for _ in range(4)]
        with django_capture_on_commit_callbacks(execute=True):
            for user in followees:
                services.follow_create(actor=alice, followee_id=user.pk)
        # Behind the app's back: the following count drops from 4 to 1.
        for user in followees[1:]:
            redis_client.srem(redis_keys.following_set_key(alice.pk), user.pk)
        assert selectors.follow_counts(user_id=alice.pk).following == 1

        shown = []
        for user in followees[:2]:
            with django_capture_on_commit_callbacks(execute=True):
                services.follow_delete(actor=alice, followee_id=user.pk)
            shown.append(selectors.follow_counts(user_id=alice.pk).following)
        report = reconcile_all(repair=True)

        assert shown == [0, 0]  # never below 0 while drifted (the count is SCARD)
        assert Follow.objects.filter(follower=alice).count() == 2
        assert report.edges_missing == 2  # followees[2] and [3] were missing from alice's set
        assert report.pairs_repaired == 2
        assert selectors.follow_counts(user_id=alice.pk).following == 2
        assert {e.user.pk for e in selectors.following_page(user_id=alice.pk, cursor=None, limit=10).entries} == {
            followees[2].pk,
            followees[3].pk,
        }
        assert_mirror_equals_database(redis_client, [alice.pk] + [u.pk for u in followees])

    def test_a_lost_key_reads_zero_until_reconcile_restores_it(
        self, user_factory, redis_client, django_capture_on_commit_callbacks
    ):
        alice = user_factory(username="alice")
        followees = [user_factory() for _ in range(3)]
        with django_capture_on_commit_callbacks(execute=True):
            for user in followees:
                services.follow_create(actor=alice, followee_id=user.pk)
        redis_client.delete(redis_keys.following_set_key(alice.pk))

        drifted = selectors.follow_counts(user_id=alice.pk).following
        reconcile_all(repair=True)

        assert drifted == 0
        assert selectors.follow_counts(user_id=alice.pk).following == 3


class TestReconcileCommand:
    def test_dry_run_exits_3_and_repairs_nothing(self, graph, redis_client):
        pair = min(db_edges())
        set_key, _, member = side_keys(pair, "following")
        redis_client.srem(set_key, member)
        out = StringIO()

        with pytest.raises(SystemExit) as exit_info:
            call_command("reconcile_social_cache", "--dry-run", "--json", stdout=out, verbosity=0)

        figures = json.loads(out.getvalue())
        assert exit_info.value.code == 3  # core.exit_codes.EXIT_DRIFT_FOUND
        assert (figures["edges_missing"], figures["pairs_repaired"], figures["dry_run"]) == (1, 0, True)
        assert not redis_client.sismember(set_key, member)
        run = ReconcileRun.objects.get(pk=figures["run"])
        assert run.finished_at is not None and run.edges_missing == 1 and run.dry_run

    def test_repair_run_exits_0_and_records_the_figures(self, graph, redis_client):
        pair = min(db_edges())
        set_key, _, member = side_keys(pair, "followers")
        redis_client.srem(set_key, member)
        out = StringIO()

        call_command("reconcile_social_cache", stdout=out, verbosity=0)

        text = out.getvalue()
        assert "users_checked=30" in text and "edges_missing=1" in text and "pairs_repaired=1" in text
        assert redis_client.sismember(set_key, member)
        run = ReconcileRun.objects.order_by("-id").first()
        assert run is not None
        assert (run.users_checked, run.edges_missing, run.pairs_repaired, run.dry_run) == (30, 1, 1, False)

    def test_user_option_checks_one_account(self, graph, redis_client):
        pair = min(db_edges())
        redis_client.srem(side_keys(pair, "following")[0], pair[1])
        out = StringIO()

        call_command("reconcile_social_cache", "--user", str(pair[0]), "--json", stdout=out, verbosity=0)

        figures = json.loads(out.getvalue())
        assert (figures["users_checked"], figures["edges_missing"], figures["pairs_repaired"]) == (1, 1, 1)

    def test_sample_checks_about_that_fraction(self, user_factory):
        for _ in range(200):
            user_factory()

        report = reconcile_all(repair=False, sample=0.25, seed=3)

        assert 25 <= report.users_checked <= 75

    @pytest.mark.parametrize(
        "argv", [["--sample", "0"], ["--sample", "1.5"], ["--sample", "x"], ["--user", "999999999"], ["--batch", "0"]]
    )
    def test_bad_arguments_are_errors_that_change_nothing(self, graph, argv):
        with pytest.raises(Exception) as error:
            call_command("reconcile_social_cache", *argv, stdout=StringIO(), stderr=StringIO(), verbosity=0)

        assert type(error.value).__name__ in {"CommandError", "SystemExit"}
        assert ReconcileRun.objects.count() == 0

    def test_resume_continues_an_interrupted_run_from_its_checkpoint(self, graph, redis_client, monkeypatch):
        ids = sorted(u.pk for u in graph)
        low_pair = next(p for p in sorted(db_edges()) if p[0] < ids[10])
        high_pair = next(p for p in sorted(db_edges(), reverse=True) if p[0] > ids[20])
        for pair in (low_pair, high_pair):
            redis_client.srem(side_keys(pair, "following")[0], pair[1])
        real = reconcile.reconcile_users
        calls = {"n": 0}

        def crash_on_third_batch(*args, **kwargs):
            calls["n"] += 1
            if calls["n"] == 3:
                raise ConnectionError("worker lost Redis")
            return real(*args, **kwargs)

        monkeypatch.setattr(reconcile, "reconcile_users", crash_on_third_batch)
        start = ids[0] - 1
        with pytest.raises(ConnectionError):
            reconcile_run(batch_users=10, start_after=start)
        interrupted = ReconcileRun.objects.get()
        monkeypatch.setattr(reconcile, "reconcile_users", real)

        run, _ = reconcile_run(batch_users=10, resume=True)

        assert interrupted.finished_at is None and interrupted.last_user_id == start + 20
        assert run.pk == interrupted.pk and run.finished_at is not None
        assert run.edges_missing == 2 and run.pairs_repaired == 2
        assert run.users_checked == len(graph)
        assert reconcile_all(repair=False).drift == 0


@pytest.fixture
def drifted_controls(alice, bob, charlie, django_capture_on_commit_callbacks, redis_client):
    """A blocks B and C mutes B, then three drifts behind the application's back: B lost from
    A's block set, a member that is not an id in C's block set, a deleted account's id in C's
    mute set."""
    from social import controls

    with django_capture_on_commit_callbacks(execute=True):
        controls.block_create(actor=alice, target_id=bob.pk)
        controls.mute_create(actor=charlie, target_id=bob.pk)
    redis_client.srem(redis_keys.blocks_key(alice.pk), str(bob.pk))
    redis_client.sadd(redis_keys.blocks_key(charlie.pk), "ff:12")
    redis_client.zadd(redis_keys.mutes_key(charlie.pk), {"999999": redis_keys.MUTE_FOREVER_MS})
    return alice, bob, charlie


class TestControlsReconcile:
    def test_the_command_reports_block_and_mute_drift_dry_then_repairs_it(self, drifted_controls, redis_client):
        alice, bob, charlie = drifted_controls
        dry_out, fix_out, after_out = StringIO(), StringIO(), StringIO()

        with pytest.raises(SystemExit) as exit_info:
            call_command("reconcile_social_cache", "--dry-run", "--json", stdout=dry_out, verbosity=0)
        dry = json.loads(dry_out.getvalue())
        untouched = redis_client.smembers(redis_keys.blocks_key(charlie.pk))
        call_command("reconcile_social_cache", "--json", stdout=fix_out, verbosity=0)
        fixed = json.loads(fix_out.getvalue())
        call_command("reconcile_social_cache", "--dry-run", "--json", stdout=after_out, verbosity=0)  # exit 0: nothing left
        after = json.loads(after_out.getvalue())

        assert exit_info.value.code == 3  # core.exit_codes.EXIT_DRIFT_FOUND
        assert (dry["controls_drifted"], dry["controls_repaired"], dry["edges_missing"]) == (3, 0, 0)
        assert untouched == {b"ff:12"}
        assert (fixed["controls_drifted"], fixed["controls_repaired"]) == (3, 3)
        assert (after["controls_drifted"], after["controls_repaired"]) == (0, 0)
        assert redis_client.smembers(redis_keys.blocks_key(alice.pk)) == {str(bob.pk).encode()}
        assert redis_client.smembers(redis_keys.blocks_key(charlie.pk)) == set()
        assert redis_client.zrange(redis_keys.mutes_key(charlie.pk), 0, -1) == [str(bob.pk).encode()]
        run = ReconcileRun.objects.get(pk=fixed["run"])
        assert (run.controls_drifted, run.controls_repaired) == (3, 3)

    def test_the_nightly_run_repairs_them_and_the_health_page_shows_the_figures(
        self, drifted_controls, user_factory, redis_client
    ):
        from social.tasks import social_cache_reconcile
        from tests.support.accounts import signed_in

        alice, bob, _ = drifted_controls

        nightly = social_cache_reconcile()

        admin = user_factory(username="root", is_staff=True, is_superuser=True)
        section = signed_in(admin).get("/admin/core/outboxentry/health/").context["health"].sections["reconcile"]
        page = signed_in(admin).get("/admin/core/outboxentry/health/").content.decode()
        assert (nightly["controls_drifted"], nightly["controls_repaired"]) == (3, 3)
        assert (dict(section.figures)["controls_drifted"], dict(section.figures)["controls_repaired"]) == (3, 3)
        assert "<th>controls_drifted</th><td>3</td>" in page
        assert reconcile_all(repair=False).controls_drifted == 0
        assert redis_client.sismember(redis_keys.blocks_key(alice.pk), str(bob.pk))


class TestSparseIds:
    def test_a_gap_in_the_account_ids_is_walked_in_one_batch_by_the_reconcile_and_the_rebuild(
        self, user_factory, follow, redis_client
    ):
        near = [user_factory() for _ in range(3)]
        far = user_factory(pk=near[-1].pk + 10_000)
        follow(near[0], far)
        follow(far, near[1])
        start = near[0].pk - 1
        reconciled: list[int] = []
        rebuilt: list[int] = []

        report = reconcile_all(repair=False, start_after=start, batch_users=2, on_progress=reconciled.append)
        rebuild_all(start_after=start, batch_users=2, on_progress=lambda users, edges: rebuilt.append(users))

        assert (report.users_checked, report.drift) == (4, 0)
        assert reconciled == [near[1].pk - start, far.pk - near[1].pk]
        assert rebuilt == [2, 2]
        assert_mirror_equals_database(redis_client, [user.pk for user in [*near, far]])

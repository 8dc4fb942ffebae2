"""Who to follow (issues 17 and 23): friends of friends, weighted; every excluded kind left out;
stored in Redis, re-derived after every change that can alter it; shown and reasoned against the
database at read time; reconciled; the page, the API and bad input."""

from __future__ import annotations

import math

import pytest
from django.test import Client
from django.utils import timezone

from core.models import OutboxEntry
from core.outbox import drain
from social import control_mirror, controls, redis_keys, selectors, services, suggestions
from tests.support.accounts import signed_in
from tests.support.celery import refusing_broker
from tests.support.graph import follow
from users.services import user_set_active

pytestmark = pytest.mark.django_db


class TestRank:
    def test_weights_followees_that_follow_few_accounts_more(self):
        # reader 1 follows 10 and 20; 10 follows {100, 101}; 20 follows {100, 102, 103, 104, 105, 106}.
        graph = {10: [100, 101], 20: [100, 102, 103, 104, 105, 106]}

        ranked = suggestions.rank(1, {10, 20}, lambda ids: [(i, graph[i]) for i in ids], exclude={105})

        assert [r.user_id for r in ranked] == [100, 101, 102, 103, 104, 106]
        assert ranked[0].score == pytest.approx(1 / math.log2(4) + 1 / math.log2(8))
        assert (ranked[0].via, ranked[0].names) == (2, (10, 20))
        assert ranked[1].score == pytest.approx(1 / math.log2(4))


@pytest.fixture
def world(alice, bob, charlie, user_factory):
    """alice follows bob and charlie; both follow the candidates."""
    names = ["dave", "erin", "frank", "grace", "heidi", "ivan", "judy"]
    people = {name: user_factory(username=name) for name in names}
    for followee in (bob, charlie):
        follow(alice, followee)
        for name in names:
            follow(followee, people[name])
    follow(bob, charlie)  # charlie: followed by alice already
    follow(people["dave"], alice)  # alice herself is a candidate of nobody
    return people


class TestCompute:
    def test_leaves_out_every_excluded_kind(self, alice, bob, charlie, world, run_commits, redis_client):
        people = world
        follow(alice, people["dave"])  # followed
        people["erin"].approve_followers = True
        people["erin"].save(update_fields=["approve_followers"])
        run_commits(lambda: services.follow_create(actor=alice, followee_id=people["erin"].pk))  # requested
        run_commits(lambda: controls.block_create(actor=alice, target_id=people["frank"].pk))  # blocked by alice
        run_commits(lambda: controls.block_create(actor=people["grace"], target_id=alice.pk))  # blocks alice
        run_commits(lambda: controls.mute_create(actor=alice, target_id=people["heidi"].pk))  # muted
        people["ivan"].is_active = False
        people["ivan"].save()  # deactivated (through the model save: the mirror drops his edges)
        from social.mirror import mirror_apply_user

        mirror_apply_user(people["ivan"].pk)

        from_redis = [r.user_id for r in suggestions.compute(alice.pk, client=redis_client)]
        from_database = [r.user_id for r in suggestions.compute(alice.pk)]

        assert from_redis == from_database == [people["judy"].pk]

    def test_a_reader_who_follows_nobody_gets_the_most_followed(self, charlie, world, user_factory, redis_client):
        newcomer = user_factory(username="newcomer")

        ranked = suggestions.compute(newcomer.pk, client=redis_client, limit=3)

        # Eight accounts have 2 followers; ties go to the lowest id.
        assert [r.user_id for r in ranked] == [charlie.pk, world["dave"].pk, world["erin"].pk]
        assert all(r.via == 0 for r in ranked)


class TestStoredAndRead:
    def test_the_page_shows_the_reason_and_a_follow_makes_the_suggestion_leave(self, alice, bob, charlie, world, run_commits):
        suggestions.suggestions_refresh(user_id=alice.pk)
        client = signed_in(alice)

        before = selectors.suggestions_for(user_id=alice.pk)
        page = client.get("/suggestions/")
        response = run_commits(lambda: client.post(f"/u/{world['dave'].username}/follow/", {"next": "suggestions"}))
        after = selectors.suggestions_for(user_id=alice.pk)

        assert before.computed and len(before.items) == 7
        assert before.items[0].reason == "followed by @bob and @charlie you follow"
        assert b'data-user="dave"' in page.content
        assert response.status_code == 302 and response["Location"] == "/suggestions/"
        assert world["dave"].pk not in [item.user.pk for item in after.items]

    def test_a_follow_rederives_the_stored_set(self, alice, bob, world, user_factory, redis_client):
        newcomer = user_factory(username="newcomer")
        follow(newcomer, bob)
        suggestions.suggestions_refresh(user_id=newcomer.pk)
        erin_before = redis_client.zscore(redis_keys.suggestions_key(newcomer.pk), world["erin"].pk)
        dave = world["dave"]
        follow(dave, world["judy"])
        follow(dave, user_factory(username="zed"))

        follow(newcomer, dave)  # re-derived: dave leaves, the accounts dave follows gain

        stored = {int(m): s for m, s in redis_client.zrange(redis_keys.suggestions_key(newcomer.pk), 0, -1, withscores=True)}
        assert dave.pk not in stored
        assert stored[world["judy"].pk] == pytest.approx(erin_before + suggestions.weight(3))
        assert (
            redis_client.hget(redis_keys.suggestions_why_key(newcomer.pk), world["judy"].pk) == f"2,{bob.pk},{dave.pk}".encode()
        )

    def test_nothing_stored_queues_a_computation_and_shows_the_most_followed(self, alice, world, settings, run_commits):
        settings.CELERY_TASK_ALWAYS_EAGER = True
        data = run_commits(lambda: signed_in(alice).get("/api/suggestions?limit=5")).json()["data"]
        again = signed_in(alice).get("/api/suggestions?limit=5").json()["data"]

        assert data["computed"] is False and len(data["list"]) == 5
        assert again["computed"] is True
        assert again["list"][0]["reason"] == "followed by @bob and @charlie you follow"

    @pytest.mark.parametrize("query", ["limit=0", "limit=51", "limit=x"])
    def test_bad_input_is_400(self, alice, query):
        assert signed_in(alice).get(f"/api/suggestions?{query}").status_code == 400

    def test_signed_out_is_401_and_redirected(self):
        assert Client().get("/api/suggestions").status_code == 401
        assert Client().get("/suggestions/").status_code == 302


class TestRefreshActive:
    def test_refreshes_readers_seen_lately_and_resumes(self, alice, bob, world, redis_client):
        from django.utils import timezone

        type(alice).objects.filter(pk__in=[alice.pk, bob.pk]).update(last_seen_at=timezone.now())
        seen: list[int] = []

        done = suggestions.suggestions_refresh_active(on_progress=lambda n, user_id: seen.append(user_id))
        resumed = suggestions.suggestions_refresh_active(start_after=min(alice.pk, bob.pk))

        assert done == 2 and seen == sorted([alice.pk, bob.pk])
        assert resumed == 1
        assert redis_client.zcard(redis_keys.suggestions_key(alice.pk)) == 7

    def test_the_nightly_task_goes_on_from_an_interrupted_runs_checkpoint(self, alice, bob, world, redis_client, monkeypatch):
        from social.tasks import social_suggestions_refresh_active

        readers = sorted([alice.pk, bob.pk, world["dave"].pk, world["erin"].pk])
        type(alice).objects.filter(pk__in=readers).update(last_seen_at=timezone.now())
        monkeypatch.setattr(suggestions, "CHECKPOINT_EVERY", 2)
        real, calls = suggestions.suggestions_refresh, []

        def dies_at_the_fourth(*, user_id):
            calls.append(user_id)
            if len(calls) == 4:
                raise ConnectionError("the worker was lost")
            return real(user_id=user_id)

        monkeypatch.setattr(suggestions, "suggestions_refresh", dies_at_the_fourth)
        with pytest.raises(ConnectionError):
            suggestions.suggestions_refresh_active(resume=True)
        checkpoint = redis_client.get(redis_keys.suggestions_refresh_checkpoint_key())
        calls.clear()
        monkeypatch.setattr(suggestions, "suggestions_refresh", real)
        resumed = social_suggestions_refresh_active.apply().get()

        assert checkpoint == str(readers[1]).encode()
        assert resumed == 2  # the two readers after the checkpoint
        assert redis_client.get(redis_keys.suggestions_refresh_checkpoint_key()) is None


class TestBlocksInSuggestions:
    def test_the_fallback_leaves_out_an_account_that_blocks_the_reader(self, world, user_factory, run_commits):
        newcomer = user_factory(username="newcomer")
        run_commits(lambda: controls.block_create(actor=world["dave"], target_id=newcomer.pk))

        found = selectors.suggestions_for(user_id=newcomer.pk, limit=20)

        assert found.computed is False
        assert world["dave"].pk not in [item.user.pk for item in found.items]
        assert world["erin"].pk in [item.user.pk for item in found.items]

    def test_a_first_follow_after_the_fallback_computes_anew(self, world, user_factory, settings, redis_client, bob):
        settings.CELERY_TASK_ALWAYS_EAGER = True
        newcomer = user_factory(username="newcomer")
        suggestions.suggestions_refresh(user_id=newcomer.pk)  # follows nobody: the most followed
        assert redis_client.scard(redis_keys.suggestions_counted_key(newcomer.pk)) == 0

        follow(newcomer, bob)

        found = selectors.suggestions_for(user_id=newcomer.pk, limit=3)
        assert found.items and all(item.via == 1 for item in found.items)
        assert found.items[0].reason == "followed by @bob you follow"


class TestReason:
    @pytest.mark.parametrize(
        ("via", "names", "text"),
        [
            (1, ["bob"], "followed by @bob you follow"),
            (2, ["bob", "carl"], "followed by @bob and @carl you follow"),
            (3, ["bob", "carl"], "followed by @bob, @carl and 1 other you follow"),
            (14, ["bob", "carl"], "followed by @bob, @carl and 12 others you follow"),
            (1_234, ["bob", "carl"], "followed by @bob, @carl and 1,232 others you follow"),
            (0, [], "one of the most followed accounts"),
        ],
    )
    def test_names_two_and_counts_the_rest(self, via, names, text):
        from users.models import User

        suggestion = selectors.Suggestion(user=User(username="dave"), via=via, names=[User(username=name) for name in names])

        assert suggestion.reason == text


class TestReadFilters:
    def test_accounts_blocked_muted_or_asked_since_the_set_was_stored_leave_the_page(self, alice, world, run_commits):
        suggestions.suggestions_refresh(user_id=alice.pk)
        people = world
        people["erin"].approve_followers = True
        people["erin"].save(update_fields=["approve_followers"])
        before = [item.user.username for item in selectors.suggestions_for(user_id=alice.pk).items]
        run_commits(lambda: controls.block_create(actor=people["frank"], target_id=alice.pk))
        run_commits(lambda: controls.mute_create(actor=alice, target_id=people["grace"].pk))
        # The request's job is not run: the read alone leaves erin out.
        services.follow_create(actor=alice, followee_id=people["erin"].pk)

        after = [item.user.username for item in selectors.suggestions_for(user_id=alice.pk).items]

        assert before == ["dave", "erin", "frank", "grace", "heidi", "ivan", "judy"]
        assert after == ["dave", "heidi", "ivan", "judy"]

    def test_an_expired_mute_excludes_nothing(self, alice, world, run_commits):
        from datetime import timedelta

        from social.models import Mute

        run_commits(lambda: controls.mute_create(actor=alice, target_id=world["heidi"].pk, duration=timedelta(days=1)))
        Mute.objects.filter(muter=alice).update(expires_at=timezone.now() - timedelta(seconds=1))  # the day passed
        control_mirror.mirror_apply_controls([(alice.pk, world["heidi"].pk)])

        suggestions.suggestions_refresh(user_id=alice.pk)

        assert world["heidi"].pk in [r.user_id for r in suggestions.compute(alice.pk)]
        assert "heidi" in [item.user.username for item in selectors.suggestions_for(user_id=alice.pk).items]


class TestTheCap:
    def test_a_rederivation_keeps_the_best_and_their_reasons_only(
        self, alice, bob, world, user_factory, redis_client, monkeypatch
    ):
        monkeypatch.setattr(suggestions, "SUGGESTIONS_MAX", 3)
        newcomer = user_factory(username="newcomer")
        follow(newcomer, bob)
        suggestions.suggestions_refresh(user_id=newcomer.pk)
        dave = world["dave"]
        extra = [user_factory(username=f"extra{n}") for n in range(5)]
        for other in extra:
            follow(dave, other)

        follow(newcomer, dave)  # dave's five followings are candidates now

        stored = [int(m) for m in redis_client.zrevrange(redis_keys.suggestions_key(newcomer.pk), 0, -1)]
        reasons = {int(field) for field in redis_client.hkeys(redis_keys.suggestions_why_key(newcomer.pk))}
        assert len(stored) == 3
        assert reasons == set(stored)


class TestABrokerThatRefuses:
    def test_the_page_still_answers_and_the_drain_computes_what_it_asked_for(self, alice, world, redis_client, run_commits):
        with refusing_broker():
            response = run_commits(lambda: signed_in(alice).get("/api/suggestions"))
        pending = list(
            OutboxEntry.objects.filter(kind="social.suggest_compute", subject_id=alice.pk, applied_at__isnull=True).values_list(
                "kind", flat=True
            )
        )

        drain(task_grace_seconds=0)
        again = signed_in(alice).get("/api/suggestions?limit=1").json()["data"]

        assert response.status_code == 200
        assert response.json()["data"]["computed"] is False and len(response.json()["data"]["list"]) > 0
        assert pending == ["social.suggest_compute"]
        assert again["computed"] is True
        assert again["list"][0]["reason"] == "followed by @bob and @charlie you follow"
        assert redis_client.exists(redis_keys.suggestions_queued_key(alice.pk)) == 0


# --- issue 23: decided at read time, re-derived from the rows, reconciled ------------------------


def shown(reader):
    """``[(username, reason)]`` of ``reader``'s suggestions as the page and the API get them."""
    return [(item.user.username, item.reason) for item in selectors.suggestions_for(user_id=reader.pk, limit=20).items]


def stored_ids(redis_client, reader):
    return sorted(int(member) for member in redis_client.zrange(redis_keys.suggestions_key(reader.pk), 0, -1))


@pytest.fixture
def private_link(alice, bob, charlie, user_factory, run_commits):
    """bob is private and alice an approved follower of his; bob follows dave; alice follows
    charlie, who follows erin. alice's suggestions are stored."""
    dave, erin = user_factory(username="dave"), user_factory(username="erin")
    run_commits(lambda: controls.account_privacy_set(actor=bob, private=True))
    run_commits(lambda: services.follow_create(actor=alice, followee_id=bob.pk))
    run_commits(lambda: controls.follow_request_approve(actor=bob, requester_id=alice.pk))
    follow(bob, dave)
    follow(alice, charlie)
    follow(charlie, erin)
    suggestions.suggestions_refresh(user_id=alice.pk)
    assert shown(alice) == [("dave", "followed by @bob you follow"), ("erin", "followed by @charlie you follow")]
    return dave, erin


class TestAPrivateAccountsFolloweesLeaveWhenTheReaderStopsFollowing:
    """The leak of issue 23: each way alice stops being bob's follower hides bob's followees on
    her very next read (the after-commit work not run yet: Redis still holds the old set), and
    the re-derivation then drops them from the stored set."""

    @pytest.mark.parametrize(
        "stop",
        [
            pytest.param(lambda alice, bob: controls.follower_remove(actor=bob, follower_id=alice.pk), id="removed"),
            pytest.param(lambda alice, bob: services.follow_delete(actor=alice, followee_id=bob.pk), id="unfollowed"),
            pytest.param(lambda alice, bob: controls.block_create(actor=bob, target_id=alice.pk), id="blocked-by-him"),
            pytest.param(lambda alice, bob: controls.block_create(actor=alice, target_id=bob.pk), id="blocks-him"),
        ],
    )
    def test_each_way(self, alice, bob, private_link, redis_client, stop):
        _, erin = private_link

        stop(alice, bob)  # committed; its after-commit work has not run
        next_read = shown(alice)
        drain(task_grace_seconds=0)
        following_list = signed_in(alice).get(f"/u/{bob.username}/following/").status_code

        assert following_list in (403, 404)
        assert next_read == [("erin", "followed by @charlie you follow")]
        assert stored_ids(redis_client, alice) == [erin.pk]
        assert shown(alice) == [("erin", "followed by @charlie you follow")]

    def test_turning_private_hides_his_followees_from_a_reader_he_did_not_approve(
        self, alice, bob, charlie, user_factory, redis_client
    ):
        dave, erin = user_factory(username="dave"), user_factory(username="erin")
        follow(alice, bob)  # bob is public
        follow(bob, dave)
        follow(alice, charlie)
        follow(charlie, erin)
        suggestions.suggestions_refresh(user_id=alice.pk)
        assert shown(alice)[0] == ("dave", "followed by @bob you follow")

        services.follow_delete(actor=alice, followee_id=bob.pk)  # after-commit work not run
        controls.account_privacy_set(actor=bob, private=True)
        next_read = shown(alice)
        drain(task_grace_seconds=0)
        following_list = signed_in(alice).get(f"/u/{bob.username}/following/").status_code

        assert following_list == 403
        assert next_read == [("erin", "followed by @charlie you follow")]
        assert stored_ids(redis_client, alice) == [erin.pk]

    def test_turning_private_keeps_his_followees_for_an_approved_follower(self, alice, bob, charlie, user_factory, run_commits):
        dave = user_factory(username="dave")
        follow(alice, bob)
        follow(bob, dave)
        suggestions.suggestions_refresh(user_id=alice.pk)

        run_commits(lambda: controls.account_privacy_set(actor=bob, private=True))

        assert signed_in(alice).get(f"/u/{bob.username}/following/").status_code == 200
        assert shown(alice) == [("dave", "followed by @bob you follow")]


class TestC27:
    """A follows B and C; B follows D; C follows E; A's suggestions computed; then A blocks B."""

    @pytest.fixture
    def graph(self, alice, bob, charlie, user_factory):
        dave, erin = user_factory(username="dave"), user_factory(username="erin")
        follow(alice, bob)
        follow(alice, charlie)
        follow(bob, dave)
        follow(charlie, erin)
        suggestions.suggestions_refresh(user_id=alice.pk)
        assert shown(alice) == [("dave", "followed by @bob you follow"), ("erin", "followed by @charlie you follow")]
        return dave, erin

    def test_no_suggestion_names_b_and_d_goes(self, alice, bob, charlie, graph, run_commits, redis_client):
        _, erin = graph

        run_commits(lambda: controls.block_create(actor=alice, target_id=bob.pk))
        listed = signed_in(alice).get("/api/suggestions").json()["data"]["list"]

        assert shown(alice) == [("erin", "followed by @charlie you follow")]
        assert [(item["username"], item["reason"]) for item in listed] == [("erin", "followed by @charlie you follow")]
        assert stored_ids(redis_client, alice) == [erin.pk]
        assert redis_client.hget(redis_keys.suggestions_why_key(alice.pk), erin.pk) == f"1,{charlie.pk}".encode()

    def test_d_stays_while_another_followee_links_it(self, alice, bob, charlie, graph, user_factory):
        dave, _ = graph
        frank = user_factory(username="frank")
        follow(alice, frank)
        follow(frank, dave)
        suggestions.suggestions_refresh(user_id=alice.pk)
        assert shown(alice)[0] == ("dave", "followed by @bob and @frank you follow")

        controls.block_create(actor=alice, target_id=bob.pk)  # the very next read, before the after-commit work
        before_rederive = shown(alice)
        drain(task_grace_seconds=0)

        assert before_rederive == [("dave", "followed by @frank you follow"), ("erin", "followed by @charlie you follow")]
        assert shown(alice) == [("dave", "followed by @frank you follow"), ("erin", "followed by @charlie you follow")]


class TestReasonCounts:
    """Reasons name and count only the links the reader may see, whatever the stored reason says."""

    def test_a_hidden_link_is_neither_named_nor_counted(self, alice, bob, charlie, user_factory):
        frank, grace, dave = user_factory(username="frank"), user_factory(username="grace"), user_factory(username="dave")
        for link in (bob, charlie, frank, grace):
            follow(alice, link)
            follow(link, dave)
        suggestions.suggestions_refresh(user_id=alice.pk)
        stored = shown(alice)

        user_set_active(user=grace, is_active=False)  # after-commit work not run
        one_hidden = shown(alice)
        controls.block_create(actor=bob, target_id=alice.pk)
        two_hidden = shown(alice)
        controls.block_create(actor=alice, target_id=charlie.pk)
        three_hidden = shown(alice)
        user_set_active(user=frank, is_active=False)
        all_hidden = shown(alice)

        assert stored == [("dave", "followed by @bob, @charlie and 2 others you follow")]
        assert one_hidden == [("dave", "followed by @bob, @charlie and 1 other you follow")]
        assert two_hidden == [("dave", "followed by @charlie and @frank you follow")]
        assert three_hidden == [("dave", "followed by @frank you follow")]
        assert all_hidden == []


class TestRederivedFromTheRows:
    """After each change that can alter a reader's set, once the after-commit work ran, the stored
    set, scores and reasons equal a rebuild from the database (a dry-run reconcile finds nothing)."""

    @pytest.fixture
    def reader(self, alice, bob, world):
        type(alice).objects.filter(pk=alice.pk).update(last_seen_at=timezone.now())
        suggestions.suggestions_refresh(user_id=alice.pk)
        return alice

    def rebuilt(self, reader):
        return [(r.user_id, round(r.score, 9), r.via, r.names) for r in suggestions.compute(reader.pk)]

    def stored(self, redis_client, reader):
        why = redis_client.hgetall(redis_keys.suggestions_why_key(reader.pk))
        ranked = redis_client.zrevrange(redis_keys.suggestions_key(reader.pk), 0, -1, withscores=True)
        rows = sorted(((int(m), s) for m, s in ranked), key=lambda pair: (-pair[1], pair[0]))
        found = []
        for member, score in rows:
            via, names = selectors.parse_suggestion_reason(why[str(member).encode()])
            found.append((member, round(score, 9), via, tuple(names)))
        return found

    @pytest.mark.parametrize(
        "change",
        [
            pytest.param(lambda a, bob, w: services.follow_create(actor=a, followee_id=w["dave"].pk), id="follow"),
            pytest.param(lambda a, bob, w: services.follow_delete(actor=a, followee_id=bob.pk), id="unfollow"),
            pytest.param(lambda a, bob, w: controls.follower_remove(actor=bob, follower_id=a.pk), id="removed"),
            pytest.param(lambda a, bob, w: controls.block_create(actor=a, target_id=bob.pk), id="block"),
            pytest.param(lambda a, bob, w: controls.block_create(actor=bob, target_id=a.pk), id="blocked"),
            pytest.param(lambda a, bob, w: controls.mute_create(actor=a, target_id=w["erin"].pk), id="mute"),
            pytest.param(lambda a, bob, w: user_set_active(user=bob, is_active=False), id="deactivation"),
            pytest.param(lambda a, bob, w: bob.delete(), id="deletion"),
        ],
    )
    def test_after_each_change(self, reader, bob, world, run_commits, redis_client, change):
        before = self.stored(redis_client, reader)

        run_commits(lambda: change(reader, bob, world))
        drain(task_grace_seconds=0)

        assert self.stored(redis_client, reader) == self.rebuilt(reader) != before
        assert suggestions.suggestions_reconcile(dry_run=True).readers_drifted == 0

    def test_after_unblock_unmute_and_reactivation(self, reader, bob, charlie, world, run_commits, redis_client):
        run_commits(lambda: controls.block_create(actor=reader, target_id=world["dave"].pk))
        run_commits(lambda: controls.mute_create(actor=reader, target_id=world["erin"].pk))
        run_commits(lambda: user_set_active(user=charlie, is_active=False))
        drain(task_grace_seconds=0)
        hidden = self.stored(redis_client, reader)

        run_commits(lambda: controls.block_delete(actor=reader, target_id=world["dave"].pk))
        run_commits(lambda: controls.mute_delete(actor=reader, target_id=world["erin"].pk))
        run_commits(lambda: user_set_active(user=charlie, is_active=True))
        drain(task_grace_seconds=0)

        assert world["dave"].pk not in [row[0] for row in hidden] and world["erin"].pk not in [row[0] for row in hidden]
        assert self.stored(redis_client, reader) == self.rebuilt(reader)
        assert shown(reader)[0] == ("dave", "followed by @bob and @charlie you follow")

    def test_a_withdrawn_or_rejected_request_lets_the_account_back(self, reader, world, run_commits, redis_client):
        erin = world["erin"]
        run_commits(lambda: controls.account_privacy_set(actor=erin, private=True))
        run_commits(lambda: services.follow_create(actor=reader, followee_id=erin.pk))
        drain(task_grace_seconds=0)
        asked = stored_ids(redis_client, reader)

        run_commits(lambda: services.follow_delete(actor=reader, followee_id=erin.pk))  # withdrawn
        drain(task_grace_seconds=0)
        withdrawn = stored_ids(redis_client, reader)
        run_commits(lambda: services.follow_create(actor=reader, followee_id=erin.pk))
        run_commits(lambda: controls.follow_request_reject(actor=erin, requester_id=reader.pk))
        drain(task_grace_seconds=0)

        assert erin.pk not in asked
        assert erin.pk in withdrawn
        assert erin.pk in stored_ids(redis_client, reader)
        assert self.stored(redis_client, reader) == self.rebuilt(reader)


class TestRankingsAndTheFallback:
    """A deactivated account leaves the most followed (directory and who-to-follow fallback) on the
    very next request; reactivation brings it back on the next one."""

    @pytest.fixture
    def star(self, user_factory):
        star, second = user_factory(username="star"), user_factory(username="second")
        fans = [user_factory(username=f"fan{n}") for n in range(3)]
        for fan in fans:
            follow(fan, star)
        for fan in fans[:2]:
            follow(fan, second)
        return star, second

    def ranked(self, limit=2):
        return [(user.username, count) for user, count in selectors.users_most_followed(limit=limit)]

    def test_deactivation_and_reactivation(self, star, user_factory, run_commits):
        newcomer = user_factory(username="newcomer")
        cached = self.ranked()

        user_set_active(user=star[0], is_active=False)  # the very next request, after-commit work or not
        gone = self.ranked()
        directory = signed_in(newcomer).get("/").content.decode()
        fallback = [item.user.username for item in selectors.suggestions_for(user_id=newcomer.pk).items]
        drain(task_grace_seconds=0)
        recomputed = self.ranked()
        run_commits(lambda: user_set_active(user=star[0], is_active=True))
        back = self.ranked()

        assert cached == [("star", 3), ("second", 2)]
        assert gone == [("second", 2)]
        assert 'href="/u/star/"' not in directory and 'href="/u/second/"' in directory
        assert "star" not in fallback and "second" in fallback
        assert recomputed[0] == ("second", 2)
        assert back == [("star", 3), ("second", 2)]
        assert selectors.suggestions_for(user_id=newcomer.pk).items[0].user.username == "star"

    def test_a_stored_most_followed_set_follows_reactivation_too(self, star, user_factory, run_commits):
        newcomer = user_factory(username="newcomer")
        suggestions.suggestions_refresh(user_id=newcomer.pk)  # follows nobody: the most followed, stored
        run_commits(lambda: user_set_active(user=star[0], is_active=False))
        gone = [(item.user.username, item.reason) for item in selectors.suggestions_for(user_id=newcomer.pk).items]

        run_commits(lambda: user_set_active(user=star[0], is_active=True))
        back = selectors.suggestions_for(user_id=newcomer.pk)

        assert gone[0] == ("second", "one of the most followed accounts")
        assert back.computed and [(item.user.username, item.reason) for item in back.items][:2] == [
            ("star", "one of the most followed accounts"),
            ("second", "one of the most followed accounts"),
        ]

    def test_deletion(self, star, run_commits):
        assert self.ranked() == [("star", 3), ("second", 2)]

        run_commits(star[0].delete)

        assert self.ranked()[0] == ("second", 2)


class TestReconcile:
    @pytest.fixture
    def reader(self, alice, world):
        type(alice).objects.filter(pk=alice.pk).update(last_seen_at=timezone.now())
        suggestions.suggestions_refresh(user_id=alice.pk)
        return alice

    def test_finds_and_repairs_drifted_sets_reasons_and_rankings(self, reader, bob, world, redis_client, settings):
        selectors.users_most_followed(limit=12)  # cached
        clean = suggestions.suggestions_reconcile(dry_run=True)
        redis_client.zadd(redis_keys.suggestions_key(reader.pk), {str(bob.pk): 9.0})  # followed already
        redis_client.hset(redis_keys.suggestions_why_key(reader.pk), str(world["judy"].pk), f"5,{bob.pk}")  # a patched reason
        from django.core.cache import cache

        cache.set(selectors.most_followed_cache_key(limit=12), [(bob.pk, 99)])
        before = stored_ids(redis_client, reader)

        dry = suggestions.suggestions_reconcile(dry_run=True)
        untouched = stored_ids(redis_client, reader) == before
        fixed = suggestions.suggestions_reconcile()
        after = suggestions.suggestions_reconcile(dry_run=True)

        assert (clean.readers_checked, clean.readers_drifted, clean.rankings_checked, clean.rankings_drifted) == (1, 0, 1, 0)
        assert (dry.readers_checked, dry.readers_drifted, dry.readers_fixed, dry.rankings_drifted, dry.rankings_fixed) == (
            1,
            1,
            0,
            1,
            0,
        )
        assert untouched
        assert (fixed.readers_drifted, fixed.readers_fixed, fixed.rankings_drifted, fixed.rankings_fixed) == (1, 1, 1, 1)
        assert (after.readers_drifted, after.rankings_drifted) == (0, 0)
        assert bob.pk not in stored_ids(redis_client, reader)
        assert shown(reader)[-1] == ("judy", "followed by @bob and @charlie you follow")

    def test_the_command_dry_run_exits_3_on_drift_and_records_the_run(self, reader, bob, redis_client):
        from io import StringIO

        from django.core.management import call_command

        from social.models import SuggestionReconcileRun

        redis_client.zadd(redis_keys.suggestions_key(reader.pk), {str(bob.pk): 9.0})
        out = StringIO()
        with pytest.raises(SystemExit) as exited:
            call_command("reconcile_suggestions", "--dry-run", stdout=out)
        call_command("reconcile_suggestions", stdout=StringIO())
        runs = list(SuggestionReconcileRun.objects.order_by("pk").values_list("dry_run", "readers_drifted", "readers_fixed"))

        assert exited.value.code == 3
        assert "readers_checked=1 readers_drifted=1 readers_fixed=0" in out.getvalue()
        assert runs == [(True, 1, 0), (False, 1, 1)]

    def test_the_nightly_task_is_scheduled_and_records_a_run(self, reader, settings):
        from social.models import SuggestionReconcileRun
        from social.tasks import social_suggestions_reconcile

        figures = social_suggestions_reconcile.apply().get()

        assert (
            settings.CELERY_BEAT_SCHEDULE["reconcile-suggestions-nightly"]["task"] == "social.tasks.social_suggestions_reconcile"
        )
        assert figures["readers_checked"] == 1 and figures["readers_drifted"] == 0
        assert SuggestionReconcileRun.objects.get().finished_at is not None

    def test_the_health_page_shows_the_last_run(self, reader, user_factory):
        admin = user_factory(username="root", is_staff=True, is_superuser=True)
        suggestions.suggestions_reconcile_run(dry_run=True)

        response = signed_in(admin).get("/admin/core/outboxentry/health/")
        section = response.context["health"].sections["suggestions_reconcile"]

        assert section.state == "finished"
        assert ("readers_checked", 1) in section.figures and ("rankings_drifted", 0) in section.figures
        assert b"Who to follow and rankings reconcile" in response.content

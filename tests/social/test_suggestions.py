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
from tests.conftest import refusing_broker, signed_in

pytestmark = pytest.mark.django_db


def follow(a, b, run_commits):
    run_commits(lambda: services.follow_create(actor=a, followee_id=b.pk))


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
def world(alice, bob, charlie, user_factory, run_commits):
    """alice follows bob and charlie; both follow the candidates."""
    names = ["dave", "erin", "frank", "grace", "heidi", "ivan", "judy"]
    people = {name: user_factory(username=name) for name in names}
    for followee in (bob, charlie):
        follow(alice, followee, run_commits)
        for name in names:
            follow(followee, people[name], run_commits)
    follow(bob, charlie, run_commits)  # charlie: followed by alice already
    follow(people["dave"], alice, run_commits)  # alice herself is a candidate of nobody
    return people


class TestCompute:
    def test_leaves_out_every_excluded_kind(self, alice, bob, charlie, world, run_commits, redis_client):
        people = world
        follow(alice, people["dave"], run_commits)  # followed
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

    def test_a_follow_updates_the_stored_set_incrementally(self, alice, bob, world, user_factory, run_commits, redis_client):
        newcomer = user_factory(username="newcomer")
        follow(newcomer, bob, run_commits)
        suggestions.suggestions_refresh(user_id=newcomer.pk)
        erin_before = redis_client.zscore(redis_keys.suggestions_key(newcomer.pk), world["erin"].pk)
        dave = world["dave"]
        follow(dave, world["judy"], run_commits)
        follow(dave, user_factory(username="zed"), run_commits)

        follow(newcomer, dave, run_commits)  # the job: dave leaves, the accounts dave follows gain

        stored = {int(m): s for m, s in redis_client.zrange(redis_keys.suggestions_key(newcomer.pk), 0, -1, withscores=True)}
        assert dave.pk not in stored
        assert stored[world["judy"].pk] == pytest.approx(erin_before + suggestions.weight(3))
        assert redis_client.hget(redis_keys.suggestions_why_key(newcomer.pk), world["judy"].pk) == f"2,{bob.pk},{dave.pk}".encode()

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
    def test_refreshes_readers_seen_lately_and_resumes(self, alice, bob, world, run_commits, redis_client):
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

    def test_a_first_follow_after_the_fallback_computes_anew(self, world, user_factory, run_commits, settings, redis_client, bob):
        settings.CELERY_TASK_ALWAYS_EAGER = True
        newcomer = user_factory(username="newcomer")
        suggestions.suggestions_refresh(user_id=newcomer.pk)  # follows nobody: the most followed
        assert redis_client.scard(redis_keys.suggestions_counted_key(newcomer.pk)) == 0

        follow(newcomer, bob, run_commits)

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
    def test_a_rederivation_keeps_the_best_and_their_reasons_only(self, alice, bob, world, user_factory, run_commits, redis_client, monkeypatch):
        monkeypatch.setattr(suggestions, "SUGGESTIONS_MAX", 3)
        newcomer = user_factory(username="newcomer")
        follow(newcomer, bob, run_commits)
        suggestions.suggestions_refresh(user_id=newcomer.pk)
        dave = world["dave"]
        extra = [user_factory(username=f"extra{n}") for n in range(5)]
        for other in extra:
            follow(dave, other, run_commits)

        follow(newcomer, dave, run_commits)  # dave's five followings are candidates now

        stored = [int(m) for m in redis_client.zrevrange(redis_keys.suggestions_key(newcomer.pk), 0, -1)]
        reasons = {int(field) for field in redis_client.hkeys(redis_keys.suggestions_why_key(newcomer.pk))}
        assert len(stored) == 3
        assert reasons == set(stored)


class TestABrokerThatRefuses:
    def test_the_page_still_answers_and_the_drain_computes_what_it_asked_for(self, alice, world, redis_client, run_commits):
        with refusing_broker():
            response = run_commits(lambda: signed_in(alice).get("/api/suggestions"))
        pending = list(OutboxEntry.objects.filter(kind="social.suggest_compute", subject_id=alice.pk, applied_at__isnull=True).values_list("kind", flat=True))

        drain(task_grace_seconds=0)
        again = signed_in(alice).get("/api/suggestions?limit=1").json()["data"]

        assert response.status_code == 200
        assert response.json()["data"]["computed"] is False and len(response.json()["data"]["list"]) > 0
        assert pending == ["social.suggest_compute"]
        assert again["computed"] is True
        assert again["list"][0]["reason"] == "followed by @bob and @charlie you follow"
        assert redis_client.exists(redis_keys.suggestions_queued_key(alice.pk)) == 0

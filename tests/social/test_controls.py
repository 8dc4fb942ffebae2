"""Block, mute, remove a follower, private accounts and follow requests (issue 16): the rules,
their Redis mirror, their pages and API, and bad input (4xx, nothing changed)."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from core.models import OutboxEntry
from core.redis import redis_available
from social import controls, redis_keys, selectors, services, visibility
from social.control_mirror import mirror_apply_controls
from social.models import Block, Follow, FollowRequest, Mute
from social.rebuild import rebuild_all
from tests.support.accounts import UserFactory, signed_in

pytestmark = pytest.mark.django_db


def follows(a, b):
    return Follow.objects.filter(follower=a, followee=b).exists()


class TestBlock:
    def test_ends_both_follows_and_mirrors_the_block_both_ways(self, alice, bob, redis_client, run_commits):
        run_commits(lambda: services.follow_create(actor=alice, followee_id=bob.pk))
        run_commits(lambda: services.follow_create(actor=bob, followee_id=alice.pk))

        result = run_commits(lambda: controls.block_create(actor=alice, target_id=bob.pk))

        assert set(result.unfollowed) == {(alice.pk, bob.pk), (bob.pk, alice.pk)}
        assert not follows(alice, bob) and not follows(bob, alice)
        assert redis_client.smembers(redis_keys.following_set_key(alice.pk)) == set()
        assert redis_client.smembers(redis_keys.followers_set_key(alice.pk)) == set()
        assert redis_client.smembers(redis_keys.blocks_key(alice.pk)) == {str(bob.pk).encode()}
        assert redis_client.smembers(redis_keys.blocks_key(bob.pk)) == {str(alice.pk).encode()}
        assert selectors.follow_counts(user_id=alice.pk).followers == 0

    def test_neither_can_follow_the_other_while_it_lasts(self, alice, bob, run_commits):
        run_commits(lambda: controls.block_create(actor=alice, target_id=bob.pk))

        with pytest.raises(services.FollowBlockedError) as by_blocked:
            services.follow_create(actor=bob, followee_id=alice.pk)
        with pytest.raises(services.FollowBlockedError) as by_blocker:
            services.follow_create(actor=alice, followee_id=bob.pk)

        assert by_blocked.value.status == 403 and by_blocked.value.message == "You cannot follow this account."
        assert by_blocker.value.message == "You block this account; unblock it before following it."
        assert not Follow.objects.exists()

    def test_unblock_restores_no_follow(self, alice, bob, redis_client, run_commits):
        run_commits(lambda: services.follow_create(actor=bob, followee_id=alice.pk))
        run_commits(lambda: controls.block_create(actor=alice, target_id=bob.pk))

        run_commits(lambda: controls.block_delete(actor=alice, target_id=bob.pk))

        assert not follows(bob, alice)
        assert redis_client.scard(redis_keys.blocks_key(alice.pk)) == 0
        assert redis_client.scard(redis_keys.blocks_key(bob.pk)) == 0
        assert run_commits(lambda: services.follow_create(actor=bob, followee_id=alice.pk)).changed

    def test_a_block_removes_pending_requests_both_ways(self, alice, bob, run_commits):
        alice.approve_followers = True
        alice.save(update_fields=["approve_followers"])
        run_commits(lambda: services.follow_create(actor=bob, followee_id=alice.pk))
        assert FollowRequest.objects.filter(requester=bob, target=alice).exists()

        run_commits(lambda: controls.block_create(actor=alice, target_id=bob.pk))

        assert not FollowRequest.objects.exists()

    @pytest.mark.parametrize(
        ("target", "status", "message"),
        [
            ("self", 400, "You cannot block yourself."),
            ("unknown", 404, "No such user."),
            ("deactivated", 404, "No such user."),
            ("twice", 409, "You block bob already."),
        ],
    )
    def test_bad_blocks_are_4xx_and_change_nothing(self, alice, bob, run_commits, target, status, message):
        ids = {"self": alice.pk, "unknown": 999_999, "deactivated": UserFactory.create(is_active=False).pk, "twice": bob.pk}
        if target == "twice":
            run_commits(lambda: controls.block_create(actor=alice, target_id=bob.pk))
        blocks, entries = Block.objects.count(), OutboxEntry.objects.count()

        response = signed_in(alice).put(f"/api/block/{ids[target]}/true")

        assert response.status_code == status
        assert response.json()["errorMsg"] == message
        assert (Block.objects.count(), OutboxEntry.objects.count()) == (blocks, entries)

    @pytest.mark.parametrize(
        ("path", "status", "message"),
        [
            ("block", 409, "You block bob already."),
            ("unmute", 409, "You do not mute bob."),
            ("mute?duration=2d", 400, None),
            ("remove-follower", 409, "bob does not follow you."),
        ],
    )
    def test_a_refused_form_answers_its_4xx_with_the_reason_and_changes_nothing(
        self, alice, bob, run_commits, path, status, message
    ):
        run_commits(lambda: controls.block_create(actor=alice, target_id=bob.pk))
        rows = (Block.objects.count(), Mute.objects.count(), OutboxEntry.objects.count())
        url, _, query = path.partition("?")

        response = signed_in(alice).post(f"/u/bob/{url}/", dict([query.split("=")]) if query else {})

        assert response.status_code == status
        if message:
            assert message in response.content.decode()
            assert '<a href="/u/bob/">Back to @bob</a>' in response.content.decode()
        assert (Block.objects.count(), Mute.objects.count(), OutboxEntry.objects.count()) == rows

    def test_unblocking_someone_not_blocked_is_409(self, alice, bob):
        response = signed_in(alice).put(f"/api/block/{bob.pk}/false")

        assert response.status_code == 409
        assert response.json()["errorMsg"] == "You do not block bob."


class TestTheSettingsLists:
    def test_blocks_and_mutes_page_newest_first_each_once_with_ties(self, alice, user_factory, run_commits, settings):
        from social.models import Block, Mute

        settings.FOLLOW_PAGE_SIZE = 2
        others = [user_factory(username=f"other{n}") for n in range(5)]
        for other in others:
            run_commits(lambda other=other: controls.block_create(actor=alice, target_id=other.pk))
            run_commits(lambda other=other: controls.mute_create(actor=alice, target_id=other.pk))
        now = timezone.now().replace(microsecond=123456)
        for model, field in ((Block, "blocked__in"), (Mute, "muted__in")):
            model.objects.filter(**{field: others[:1]}).update(created_at=now - timedelta(seconds=10))
            model.objects.filter(**{field: others[1:4]}).update(created_at=now - timedelta(seconds=5))  # three in one microsecond
            model.objects.filter(**{field: others[4:]}).update(created_at=now)
        client = signed_in(alice)

        seen: dict[str, list[str]] = {"blocked": [], "muted": []}
        for name in seen:
            query = ""
            while True:
                page = client.get(f"/settings/privacy/{query}")
                listing = page.context[name]
                seen[name] += [entry.username if name == "blocked" else entry.user.username for entry in listing.entries]
                assert listing.total == 5
                if listing.next_cursor is None:
                    break
                query = f"?{name}={listing.next_cursor}"

        newest_first = ["other4", "other3", "other2", "other1", "other0"]
        assert seen["blocked"] == seen["muted"] == newest_first
        assert client.get("/settings/privacy/?blocked=nonsense").status_code == 400


class TestBlockHides:
    @pytest.fixture
    def blocked_world(self, alice, bob, charlie, run_commits):
        # charlie follows both; alice follows charlie; bob follows charlie.
        for a, b in ((charlie, alice), (charlie, bob), (alice, charlie), (bob, charlie)):
            run_commits(lambda a=a, b=b: services.follow_create(actor=a, followee_id=b.pk))
        run_commits(lambda: controls.block_create(actor=alice, target_id=bob.pk))

    def test_the_blocked_account_gets_404_for_the_blocker(self, alice, bob, blocked_world):
        client = signed_in(bob)

        assert client.get(f"/u/{alice.username}/").status_code == 404
        assert client.get(f"/u/{alice.username}/notes/").status_code == 404
        assert client.get(f"/u/{alice.username}/followers/").status_code == 404
        assert client.get(f"/api/users/{alice.pk}").status_code == 404
        assert client.get(f"/api/users/{alice.pk}/followers").status_code == 404
        assert client.get(f"/api/follow/common/{alice.pk}").status_code == 404
        assert client.get(f"/api/follow/or/not/{alice.pk}").status_code == 404
        assert signed_in(alice).get(f"/api/follow/or/not/{bob.pk}").json()["data"] is False  # the blocker asks: no

    def test_the_name_in_another_case_is_a_404_too_not_a_redirect(self, alice, bob, blocked_world):
        client = signed_in(bob)

        for path in (
            f"/u/{alice.username.upper()}/",
            f"/u/{alice.username.upper()}/followers/",
            f"/u/{alice.username.upper()}/notes/",
        ):
            assert client.get(path).status_code == 404, path
        assert signed_in(alice).get(f"/u/{bob.username.upper()}/").status_code == 301  # the blocker is not hidden from

    def test_removing_the_blocker_as_a_follower_is_a_404_that_names_no_one(self, alice, bob, blocked_world):
        response = signed_in(bob).delete(f"/api/followers/{alice.pk}")

        assert response.status_code == 404
        assert response.json()["errorMsg"] == "No such user."

    def test_the_blocker_sees_an_unblock_button_and_no_notes(self, alice, bob, blocked_world):
        page = signed_in(alice).get(f"/u/{bob.username}/")

        assert page.status_code == 200
        assert b'id="unblock-button"' in page.content
        assert b'class="follow-button' not in page.content
        assert b'id="blocked-notice"' in page.content

    def test_each_is_left_out_of_the_lists_the_other_sees(self, alice, bob, charlie, blocked_world):
        followers_for_alice = signed_in(alice).get(f"/api/users/{charlie.pk}/followers").json()["data"]["list"]
        followers_for_bob = signed_in(bob).get(f"/api/users/{charlie.pk}/followers").json()["data"]["list"]
        followers_signed_out = Client().get(f"/api/users/{charlie.pk}/followers").json()["data"]["list"]

        assert [row["id"] for row in followers_for_alice] == [alice.pk]
        assert [row["id"] for row in followers_for_bob] == [bob.pk]
        assert {row["id"] for row in followers_signed_out} == {alice.pk, bob.pk}

    def test_each_is_left_out_of_you_both_follow_and_familiar_followers(self, alice, bob, charlie, user_factory, run_commits):
        dave = user_factory(username="dave")
        for a, b in ((alice, bob), (dave, bob), (alice, charlie), (dave, charlie), (bob, dave)):
            run_commits(lambda a=a, b=b: services.follow_create(actor=a, followee_id=b.pk))
        before = selectors.common_following(user_id=alice.pk, other_id=dave.pk)
        run_commits(lambda: controls.block_create(actor=bob, target_id=alice.pk))

        hidden = visibility.hidden_ids(viewer_id=alice.pk)
        common = selectors.common_following(user_id=alice.pk, other_id=dave.pk, hidden=hidden)
        familiar = selectors.familiar_followers(
            viewer_id=dave.pk, user_id=alice.pk, hidden=visibility.hidden_ids(viewer_id=dave.pk)
        )

        assert {u.pk for u in before.users} == {bob.pk, charlie.pk}
        assert {u.pk for u in common.users} == {charlie.pk}
        assert hidden == {bob.pk}
        assert familiar.count == 0  # dave follows nobody who follows alice (bob's follow of her ended)


class TestMute:
    def test_mirrors_the_expiry_and_only_the_muter(self, alice, bob, redis_client, run_commits):
        run_commits(lambda: controls.mute_create(actor=alice, target_id=bob.pk, duration=timedelta(days=1)))

        score = redis_client.zscore(redis_keys.mutes_key(alice.pk), str(bob.pk))
        expires = Mute.objects.get(muter=alice).expires_at
        assert expires is not None

        assert score == int(expires.timestamp() * 1000)
        assert redis_client.zcard(redis_keys.mutes_key(bob.pk)) == 0
        assert visibility.muted_ids(user_id=alice.pk) == {bob.pk}
        assert visibility.muted_ids(user_id=bob.pk) == set()

    def test_an_expired_mute_counts_as_none(self, alice, bob, run_commits):
        run_commits(lambda: controls.mute_create(actor=alice, target_id=bob.pk, duration=timedelta(days=1)))
        Mute.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
        run_commits(lambda: mirror_apply_controls([(alice.pk, bob.pk)]))

        assert visibility.muted_ids(user_id=alice.pk) == set()
        assert visibility.muted_ids_database(user_id=alice.pk) == set()
        assert run_commits(controls.mutes_expire) == 1
        assert not Mute.objects.exists()

    def test_muting_again_sets_the_new_duration(self, alice, bob, redis_client, run_commits):
        run_commits(lambda: controls.mute_create(actor=alice, target_id=bob.pk, duration=timedelta(days=1)))
        run_commits(lambda: controls.mute_create(actor=alice, target_id=bob.pk, duration=None))

        assert Mute.objects.get(muter=alice).expires_at is None
        assert redis_client.zscore(redis_keys.mutes_key(alice.pk), str(bob.pk)) == redis_keys.MUTE_FOREVER_MS

    def test_changes_no_follow(self, alice, bob, run_commits):
        run_commits(lambda: services.follow_create(actor=alice, followee_id=bob.pk))

        run_commits(lambda: controls.mute_create(actor=alice, target_id=bob.pk))

        assert follows(alice, bob)

    @pytest.mark.parametrize(
        ("path", "body", "status", "message"),
        [
            ("self/true", None, 400, "You cannot mute yourself."),
            ("999999/true", None, 404, "No such user."),
            ("bob/true?duration=2d", None, 400, "The duration must be 1d, 7d or forever."),
            ("bob/true", '{"duration": 7}', 400, "The duration must be 1d, 7d or forever."),
            ("bob/false", None, 409, "You do not mute bob."),
            ("bob/maybe", None, 400, "The last path segment must be true or false."),
        ],
    )
    def test_bad_mutes_are_4xx_and_change_nothing(self, alice, bob, path, body, status, message):
        path = path.replace("self", str(alice.pk)).replace("bob", str(bob.pk))

        response = signed_in(alice).put(f"/api/mute/{path}", data=body or "", content_type="application/json")

        assert response.status_code == status
        assert response.json()["errorMsg"] == message
        assert not Mute.objects.exists() and not OutboxEntry.objects.exists()

    def test_the_api_mutes_for_a_duration(self, alice, bob, run_commits):
        response = run_commits(
            lambda: signed_in(alice).put(f"/api/mute/{bob.pk}/true", data='{"duration": "7d"}', content_type="application/json")
        )

        expires_at = Mute.objects.get(muter=alice).expires_at
        assert expires_at is not None
        left = expires_at - timezone.now()
        assert response.status_code == 200
        assert timedelta(days=6, hours=23) < left <= timedelta(days=7)


class TestRemoveFollower:
    def test_the_follower_stops_following_and_may_follow_again(self, alice, bob, redis_client, run_commits):
        run_commits(lambda: services.follow_create(actor=bob, followee_id=alice.pk))

        response = run_commits(lambda: signed_in(alice).delete(f"/api/followers/{bob.pk}"))

        assert response.status_code == 200
        assert response.json()["data"]["changed"] is True
        assert Client().get(f"/api/users/{alice.pk}").json()["data"]["followers"] == 0
        assert not follows(bob, alice)
        assert redis_client.scard(redis_keys.followers_set_key(alice.pk)) == 0
        assert run_commits(lambda: services.follow_create(actor=bob, followee_id=alice.pk)).changed

    def test_removing_an_account_that_does_not_follow_you_is_409(self, alice, bob):
        response = signed_in(alice).delete(f"/api/followers/{bob.pk}")

        assert response.status_code == 409
        assert response.json()["errorMsg"] == "bob does not follow you."

    def test_the_page_button_removes(self, alice, bob, run_commits):
        run_commits(lambda: services.follow_create(actor=bob, followee_id=alice.pk))
        client = signed_in(alice)
        listed = client.get(f"/u/{alice.username}/followers/")

        response = run_commits(lambda: client.post(f"/u/{bob.username}/remove-follower/", {"back": "followers"}))

        assert b"remove-follower" in listed.content
        assert response.status_code == 302 and response["Location"] == f"/u/{alice.username}/followers/"
        assert not follows(bob, alice)


@pytest.fixture
def private_alice(alice):
    alice.approve_followers = True
    alice.save(update_fields=["approve_followers"])
    return alice


class TestFollowRequests:
    def test_a_follow_of_a_private_account_is_a_request(self, private_alice, bob, run_commits):
        response = run_commits(lambda: signed_in(bob).put(f"/api/follow/{private_alice.pk}/true"))

        assert response.json()["data"] == {"changed": True, "following": False, "requested": True, "followers": 0}
        assert not follows(bob, private_alice)
        assert FollowRequest.objects.filter(requester=bob, target=private_alice).count() == 1

    def test_asking_twice_makes_one_request(self, private_alice, bob, run_commits):
        run_commits(lambda: services.follow_create(actor=bob, followee_id=private_alice.pk))

        again = run_commits(lambda: services.follow_create(actor=bob, followee_id=private_alice.pk))

        assert again.requested and not again.changed
        assert FollowRequest.objects.count() == 1

    def test_the_owner_lists_them_newest_first_with_a_cursor(self, private_alice, user_factory, run_commits):
        askers = [user_factory() for _ in range(5)]
        at = timezone.now().replace(microsecond=0)
        for index, asker in enumerate(askers):
            run_commits(lambda asker=asker: services.follow_create(actor=asker, followee_id=private_alice.pk))
            # askers 1, 2 and 3 asked in the same millisecond: newest request (highest id) first.
            minutes = {0: 10, 1: 5, 2: 5, 3: 5, 4: 1}[index]
            FollowRequest.objects.filter(requester=asker).update(created_at=at - timedelta(minutes=minutes))
        client = signed_in(private_alice)

        first = client.get("/api/follow-requests?limit=2").json()["data"]
        second = client.get(f"/api/follow-requests?limit=2&cursor={first['next_cursor']}").json()["data"]
        third = client.get(f"/api/follow-requests?limit=2&cursor={second['next_cursor']}").json()["data"]
        page = client.get(f"/requests/?cursor={first['next_cursor']}")

        assert [row["id"] for row in first["list"]] == [askers[4].pk, askers[3].pk]
        assert [row["id"] for row in second["list"]] == [askers[2].pk, askers[1].pk]
        assert [row["id"] for row in third["list"]] == [askers[0].pk]
        assert third["next_cursor"] is None
        assert [entry.user.pk for entry in page.context["page"].entries][:2] == [askers[2].pk, askers[1].pk]

    def test_approval_creates_the_follow_through_the_normal_path(self, private_alice, bob, redis_client, run_commits):
        run_commits(lambda: services.follow_create(actor=bob, followee_id=private_alice.pk))

        response = run_commits(lambda: signed_in(private_alice).put(f"/api/follow-requests/{bob.pk}/approve"))

        assert response.status_code == 200 and response.json()["data"]["approved"] is True
        assert Client().get(f"/api/users/{private_alice.pk}").json()["data"]["followers"] == 1
        assert follows(bob, private_alice)
        assert not FollowRequest.objects.exists()
        assert redis_client.sismember(redis_keys.followers_set_key(private_alice.pk), str(bob.pk))

    def test_rejection_and_withdrawal_delete_the_request(self, private_alice, bob, charlie, run_commits):
        run_commits(lambda: services.follow_create(actor=bob, followee_id=private_alice.pk))
        run_commits(lambda: services.follow_create(actor=charlie, followee_id=private_alice.pk))

        rejected = signed_in(private_alice).put(f"/api/follow-requests/{bob.pk}/reject")
        withdrawn = signed_in(charlie).put(f"/api/follow/{private_alice.pk}/false")

        assert rejected.status_code == 200
        assert withdrawn.json()["data"]["changed"] is True
        assert not FollowRequest.objects.exists() and not Follow.objects.exists()

    @pytest.mark.parametrize(
        ("path", "status", "message"),
        [
            ("bob/approve", 404, "No such follow request."),
            ("bob/reject", 404, "No such follow request."),
            ("bob/maybe", 400, "The decision must be approve or reject."),
            ("x/approve", 400, None),
        ],
    )
    def test_bad_decisions_are_4xx_and_change_nothing(self, private_alice, bob, charlie, run_commits, path, status, message):
        # charlie's request is to alice: bob cannot decide it, nor alice one bob never made.
        run_commits(lambda: services.follow_create(actor=charlie, followee_id=private_alice.pk))

        response = signed_in(private_alice).put(f"/api/follow-requests/{path.replace('bob', str(bob.pk))}")
        by_someone_else = signed_in(bob).put(f"/api/follow-requests/{charlie.pk}/approve")

        assert response.status_code == status
        if message:
            assert response.json()["errorMsg"] == message
        assert by_someone_else.status_code == 404
        assert FollowRequest.objects.filter(requester=charlie).count() == 1
        assert not Follow.objects.exists()

    def test_turning_approval_off_approves_every_pending_request(self, private_alice, bob, charlie, run_commits):
        run_commits(lambda: services.follow_create(actor=bob, followee_id=private_alice.pk))
        run_commits(lambda: services.follow_create(actor=charlie, followee_id=private_alice.pk))

        response = run_commits(
            lambda: signed_in(private_alice).put("/api/me/settings", data='{"private": false}', content_type="application/json")
        )

        assert response.json()["data"] == {"private": False, "approved": 2}
        assert follows(bob, private_alice) and follows(charlie, private_alice)
        assert not FollowRequest.objects.exists()

    def test_the_settings_page_turns_approval_off_and_the_new_followers_get_the_notes(
        self, private_alice, bob, charlie, run_commits, redis_client
    ):
        from feed import services as feed_services
        from feed.services import note_create
        from tests.support.feed import inbox_ids

        note = run_commits(lambda: note_create(author=private_alice, body="for followers"))
        for requester in (bob, charlie):
            run_commits(lambda requester=requester: services.follow_create(actor=requester, followee_id=private_alice.pk))
            run_commits(lambda requester=requester: feed_services.feed_visit(user=requester))  # readers of the home feed

        response = run_commits(lambda: signed_in(private_alice).post("/settings/privacy/", {}))

        private_alice.refresh_from_db()
        assert response.status_code == 302
        assert private_alice.approve_followers is False
        assert follows(bob, private_alice) and follows(charlie, private_alice)
        assert inbox_ids(redis_client, bob) == inbox_ids(redis_client, charlie) == [note.pk]

    def test_approving_a_deactivated_requester_is_409_in_the_owners_words(self, private_alice, bob, run_commits):
        run_commits(lambda: services.follow_create(actor=bob, followee_id=private_alice.pk))
        type(bob).objects.filter(pk=bob.pk).update(is_active=False)

        response = signed_in(private_alice).put(f"/api/follow-requests/{bob.pk}/approve")

        assert response.status_code == 409
        assert response.json()["errorMsg"] == "@bob's account is deactivated; it cannot follow you now."
        assert FollowRequest.objects.filter(requester=bob).exists() and not follows(bob, private_alice)

    def test_approvals_an_interrupted_request_left_are_finished_by_the_drain(
        self, private_alice, bob, charlie, run_commits, django_capture_on_commit_callbacks
    ):
        from core.outbox import drain

        run_commits(lambda: services.follow_create(actor=bob, followee_id=private_alice.pk))
        run_commits(lambda: services.follow_create(actor=charlie, followee_id=private_alice.pk))
        with django_capture_on_commit_callbacks(execute=False):  # the process stops right after the commit
            controls.account_privacy_set(actor=private_alice, private=False)
        left = FollowRequest.objects.count()

        drain(task_grace_seconds=0)

        assert left == 2
        assert follows(bob, private_alice) and follows(charlie, private_alice)
        assert not FollowRequest.objects.exists()
        assert not OutboxEntry.objects.filter(kind="social.privacy_open", applied_at__isnull=True).exists()

    @pytest.mark.parametrize("value", ["true", "1", "off", ""])
    def test_the_settings_form_takes_on_or_nothing_and_nothing_else(self, private_alice, bob, run_commits, value):
        run_commits(lambda: services.follow_create(actor=bob, followee_id=private_alice.pk))

        response = run_commits(lambda: signed_in(private_alice).post("/settings/privacy/", {"approve_followers": value}))

        private_alice.refresh_from_db()
        assert response.status_code == 400
        assert private_alice.approve_followers is True
        assert FollowRequest.objects.filter(requester=bob).exists() and not follows(bob, private_alice)

    @pytest.mark.parametrize("body", ['{"private": "yes"}', '{"privat": true}', "[]", "not json"])
    def test_bad_settings_are_400(self, alice, body):
        response = signed_in(alice).put("/api/me/settings", data=body, content_type="application/json")

        alice.refresh_from_db()
        assert response.status_code == 400
        assert alice.approve_followers is False

    def test_the_requests_page_approves(self, private_alice, bob, run_commits):
        run_commits(lambda: services.follow_create(actor=bob, followee_id=private_alice.pk))
        client = signed_in(private_alice)
        page = client.get("/requests/")

        response = run_commits(lambda: client.post(f"/requests/{bob.username}/approve/"))

        assert f'data-requester="{bob.username}"'.encode() in page.content
        assert response.status_code == 302
        assert follows(bob, private_alice)


class TestPrivateAccountLists:
    """A private account's followers list through every path, for each kind of viewer."""

    @pytest.fixture
    def world(self, private_alice, bob, charlie, user_factory, run_commits):
        # bob: an approved follower; charlie: follows bob (so "followed by people you follow" could reveal bob).
        approved = user_factory(username="approved")
        run_commits(lambda: services.follow_create(actor=approved, followee_id=private_alice.pk))
        run_commits(lambda: controls.follow_request_approve(actor=private_alice, requester_id=approved.pk))
        run_commits(lambda: services.follow_create(actor=bob, followee_id=private_alice.pk))
        run_commits(lambda: controls.follow_request_approve(actor=private_alice, requester_id=bob.pk))
        run_commits(lambda: services.follow_create(actor=approved, followee_id=bob.pk))
        run_commits(lambda: services.follow_create(actor=private_alice, followee_id=bob.pk))
        run_commits(lambda: services.follow_create(actor=charlie, followee_id=bob.pk))
        blocked = user_factory(username="blocked")
        run_commits(lambda: services.follow_create(actor=blocked, followee_id=bob.pk))
        run_commits(lambda: controls.block_create(actor=private_alice, target_id=blocked.pk))
        return {"approved": approved, "stranger": charlie, "blocked": blocked, "signed out": None}

    @pytest.mark.parametrize(
        ("viewer", "page", "api", "common", "familiar"),
        [
            ("approved", 200, 200, 200, 1),
            ("stranger", 403, 403, 403, 0),
            ("blocked", 404, 404, 404, 0),
            ("signed out", 403, 403, None, None),
        ],
    )
    def test_every_path(self, private_alice, bob, world, viewer, page, api, common, familiar):
        user = world[viewer]
        client = signed_in(user) if user is not None else Client()

        assert client.get(f"/u/{private_alice.username}/followers/").status_code == page
        assert client.get(f"/u/{private_alice.username}/following/").status_code == page
        assert client.get(f"/api/users/{private_alice.pk}/followers").status_code == api
        if common is not None:
            assert client.get(f"/api/follow/common/{private_alice.pk}").status_code == common
            profile = client.get(f"/u/{private_alice.username}/")
            shown = profile.context["familiar"].count if profile.status_code == 200 and "familiar" in profile.context else 0
            assert shown == familiar

    def test_the_profile_shows_a_lock_and_hides_the_notes_from_a_stranger(self, private_alice, charlie, world):
        page = signed_in(charlie).get(f"/u/{private_alice.username}/")

        assert page.status_code == 200
        assert b"badge-lock" in page.content
        assert b'id="private-notice"' in page.content
        assert b"Request to follow" in page.content


class TestControlsMirror:
    def test_rebuild_restores_the_sets_from_the_database(self, alice, bob, charlie, redis_client, run_commits):
        run_commits(lambda: controls.block_create(actor=alice, target_id=bob.pk))
        run_commits(lambda: controls.mute_create(actor=charlie, target_id=alice.pk))
        redis_client.delete(redis_keys.blocks_key(alice.pk), redis_keys.blocks_key(bob.pk), redis_keys.mutes_key(charlie.pk))
        redis_client.sadd(redis_keys.blocks_key(charlie.pk), "12345")  # drift: an extra member

        rebuild_all()

        assert redis_client.smembers(redis_keys.blocks_key(alice.pk)) == {str(bob.pk).encode()}
        assert redis_client.smembers(redis_keys.blocks_key(bob.pk)) == {str(alice.pk).encode()}
        assert redis_client.smembers(redis_keys.blocks_key(charlie.pk)) == set()
        assert redis_client.zscore(redis_keys.mutes_key(charlie.pk), str(alice.pk)) == redis_keys.MUTE_FOREVER_MS

    def test_reads_fall_back_to_the_database_while_redis_is_down(self, alice, bob, run_commits, settings):
        run_commits(lambda: controls.block_create(actor=alice, target_id=bob.pk))
        run_commits(lambda: controls.mute_create(actor=bob, target_id=alice.pk, duration=timedelta(days=7)))
        from_redis = (
            visibility.hidden_ids(viewer_id=bob.pk),
            visibility.hidden_ids(viewer_id=alice.pk),
            visibility.muted_ids(user_id=bob.pk),
            visibility.hidden_and_muted_ids(viewer_id=bob.pk),
        )

        settings.CACHES = {**settings.CACHES, "default": {**settings.CACHES["default"], "LOCATION": "redis://127.0.0.1:1/0"}}
        settings.REDIS_CIRCUIT_OPEN_SECONDS = 30.0
        from_database = (
            visibility.hidden_ids(viewer_id=bob.pk),
            visibility.hidden_ids(viewer_id=alice.pk),
            visibility.muted_ids(user_id=bob.pk),
            visibility.hidden_and_muted_ids(viewer_id=bob.pk),
        )

        assert not redis_available()
        assert from_database == from_redis == ({alice.pk}, {bob.pk}, {alice.pk}, ({alice.pk}, {alice.pk}))

    def test_hidden_and_muted_read_together_equal_each_read_alone(self, alice, bob, charlie, user_factory, run_commits):
        dave = user_factory(username="dave")
        run_commits(lambda: controls.block_create(actor=alice, target_id=bob.pk))
        run_commits(lambda: controls.block_create(actor=charlie, target_id=alice.pk))
        run_commits(lambda: controls.mute_create(actor=alice, target_id=dave.pk, duration=None))
        run_commits(lambda: controls.mute_create(actor=alice, target_id=charlie.pk, duration=timedelta(days=1)))
        Mute.objects.filter(muted=charlie).update(expires_at=timezone.now() - timedelta(seconds=1))
        run_commits(lambda: mirror_apply_controls([(alice.pk, charlie.pk)]))

        for person in (alice, bob, charlie, dave):
            together = visibility.hidden_and_muted_ids(viewer_id=person.pk)
            assert together == (visibility.hidden_ids(viewer_id=person.pk), visibility.muted_ids(user_id=person.pk))
        assert visibility.hidden_and_muted_ids(viewer_id=alice.pk) == ({bob.pk, charlie.pk}, {dave.pk})


class TestControlsReconcile:
    def test_finds_and_repairs_drifted_blocks_and_mutes(self, alice, bob, charlie, redis_client, run_commits):
        from social.reconcile import reconcile_all

        run_commits(lambda: controls.block_create(actor=alice, target_id=bob.pk))
        run_commits(lambda: controls.mute_create(actor=charlie, target_id=alice.pk, duration=timedelta(days=7)))
        redis_client.srem(redis_keys.blocks_key(bob.pk), str(alice.pk))  # a lost write
        redis_client.zadd(redis_keys.mutes_key(charlie.pk), {str(alice.pk): redis_keys.MUTE_FOREVER_MS})  # a wrong expiry
        redis_client.sadd(redis_keys.blocks_key(charlie.pk), str(bob.pk))  # a block that does not exist

        dry = reconcile_all(repair=False)
        repaired = reconcile_all()
        after = reconcile_all(repair=False)

        assert dry.controls_drifted == 3
        assert repaired.controls_drifted == 3 and repaired.pairs_repaired >= 3
        assert after.controls_drifted == 0
        assert redis_client.smembers(redis_keys.blocks_key(bob.pk)) == {str(alice.pk).encode()}
        assert redis_client.smembers(redis_keys.blocks_key(charlie.pk)) == set()
        expires_at = Mute.objects.get(muter=charlie).expires_at
        assert expires_at is not None
        assert redis_client.zscore(redis_keys.mutes_key(charlie.pk), str(alice.pk)) == int(expires_at.timestamp() * 1000)


class TestListControls:
    def test_each_row_of_a_list_offers_mute_and_block(self, alice, bob, charlie, run_commits):
        run_commits(lambda: services.follow_create(actor=bob, followee_id=charlie.pk))

        page = signed_in(alice).get(f"/u/{charlie.username}/followers/")
        blocked = run_commits(lambda: signed_in(alice).post(f"/u/{bob.username}/block/"))

        assert f'form="row-action" formaction="/u/{bob.username}/block/"'.encode() in page.content
        assert f'form="row-action" formaction="/u/{bob.username}/mute/"'.encode() in page.content
        assert blocked.status_code == 302
        assert Block.objects.filter(blocker=alice, blocked=bob).exists()


@pytest.mark.django_db(transaction=True)
class TestARequestRacingApprovalOff:
    def test_waits_for_the_change_and_becomes_a_follow(self):
        import threading

        from django.db import connections

        owner = UserFactory.create(username="owner", approve_followers=True)
        bob = UserFactory.create(username="bob")
        other = connections.create_connection("default")
        with other.cursor() as cursor:
            # The owner's change is in flight: its row locked, the flag written, not committed.
            cursor.execute("START TRANSACTION")
            cursor.execute("UPDATE users_user SET approve_followers = 0 WHERE id = %s", [owner.pk])
        outcome = {}

        def follow() -> None:
            try:
                outcome["result"] = services.follow_create(actor=bob, followee_id=owner.pk)
            finally:
                connections.close_all()

        racer = threading.Thread(target=follow)
        racer.start()
        racer.join(1.0)  # the follow read "private" and now waits for the owner's row
        waited = racer.is_alive()
        with other.cursor() as cursor:
            cursor.execute("COMMIT")
        other.close()
        racer.join(30)

        assert waited is True
        assert outcome["result"].changed is True and outcome["result"].requested is False
        assert follows(bob, owner)
        assert not FollowRequest.objects.exists()


def control_sets(client, user_ids) -> dict[int, tuple[set[int], dict[int, float]]]:
    """Each account's block set and mute set (member -> score) as Redis holds them."""
    return {
        user_id: (
            {int(member) for member in client.smembers(redis_keys.blocks_key(user_id))},
            {int(member): score for member, score in client.zrange(redis_keys.mutes_key(user_id), 0, -1, withscores=True)},
        )
        for user_id in user_ids
    }


@pytest.fixture
def controls_around_b(alice, bob, charlie, user_factory, run_commits):
    """C26 (c): A blocks B and C mutes B; B also blocks D and mutes E (B's own keys)."""
    dave, erin = user_factory(username="dave"), user_factory(username="erin")
    run_commits(lambda: controls.block_create(actor=alice, target_id=bob.pk))
    run_commits(lambda: controls.mute_create(actor=charlie, target_id=bob.pk))
    run_commits(lambda: controls.block_create(actor=bob, target_id=dave.pk))
    run_commits(lambda: controls.mute_create(actor=bob, target_id=erin.pk, duration=timedelta(days=3)))
    return dave, erin


class TestC26ControlsOfADeletedAccount:
    @pytest.mark.parametrize("path", ["instance", "queryset"])
    def test_no_block_or_mute_set_keeps_the_deleted_id(
        self, alice, bob, charlie, controls_around_b, redis_client, run_commits, path
    ):
        from social.reconcile import reconcile_all

        dave, erin = controls_around_b
        b = bob.pk  # the instance loses its pk when deleted
        assert redis_client.sismember(redis_keys.blocks_key(alice.pk), str(bob.pk))
        assert redis_client.zscore(redis_keys.mutes_key(charlie.pk), str(bob.pk)) == redis_keys.MUTE_FOREVER_MS
        others = [alice.pk, charlie.pk, dave.pk, erin.pk]
        last_entry = OutboxEntry.objects.order_by("-pk").values_list("pk", flat=True).first()

        run_commits(bob.delete if path == "instance" else lambda: UserFactory._meta.model.objects.filter(pk=b).delete())

        sets = control_sets(redis_client, [*others, b])
        assert all(b not in blocked and b not in muted for blocked, muted in sets.values())
        assert sets == {user_id: (set(), {}) for user_id in [*others, b]}
        assert redis_client.exists(redis_keys.blocks_key(b), redis_keys.mutes_key(b)) == 0
        deletion = OutboxEntry.objects.filter(pk__gt=last_entry)
        assert {(e.kind, e.object_id) for e in deletion.filter(kind="social.control")} == {
            ("social.control", other) for other in others
        }
        assert not deletion.filter(applied_at__isnull=True).exists()  # applied right after the deletion's commit
        dry = reconcile_all(repair=False)
        assert (dry.controls_drifted, dry.drift, dry.users_drifted) == (0, 0, 0)

    def test_the_after_commit_work_may_land_in_any_order(
        self, alice, bob, charlie, controls_around_b, redis_client, django_capture_on_commit_callbacks
    ):
        from core.outbox import drain

        dave, erin = controls_around_b
        ids = [alice.pk, charlie.pk, dave.pk, erin.pk, bob.pk]
        with django_capture_on_commit_callbacks(execute=False):
            bob.delete()  # the request died before its after-commit work
        entries = list(OutboxEntry.objects.filter(applied_at__isnull=True).order_by("-pk"))
        kinds = {entry.kind for entry in entries}
        OutboxEntry.objects.update(attempts=1)  # every task's grace is over

        drain()

        assert {"social.control", "social.user"} <= kinds
        assert control_sets(redis_client, ids) == {user_id: (set(), {}) for user_id in ids}

    def test_a_stale_id_left_in_a_set_is_drift_the_reconcile_repairs(self, alice, bob, redis_client, run_commits):
        from social.reconcile import reconcile_all

        ghost = UserFactory.create(username="ghost")
        run_commits(lambda: controls.block_create(actor=alice, target_id=ghost.pk))
        ghost_id = ghost.pk
        ghost.delete()  # its after-commit work never ran (no run_commits): A's set keeps the id
        assert redis_client.smembers(redis_keys.blocks_key(alice.pk)) == {str(ghost_id).encode()}

        dry = reconcile_all(repair=False)
        repaired = reconcile_all()
        after = reconcile_all(repair=False)

        assert redis_client.smembers(redis_keys.blocks_key(alice.pk)) == set()
        assert (dry.controls_drifted, repaired.controls_drifted, repaired.controls_repaired, after.controls_drifted) == (
            1,
            1,
            1,
            0,
        )


class TestControlsOfADeactivatedAccount:
    def test_deactivation_and_reactivation_keep_the_sets_equal_to_a_rebuild(
        self, alice, bob, charlie, controls_around_b, redis_client, run_commits
    ):
        from social.reconcile import reconcile_all
        from users.services import user_set_active

        dave, erin = controls_around_b
        ids = [alice.pk, bob.pk, charlie.pk, dave.pk, erin.pk]
        before = control_sets(redis_client, ids)

        for active in (False, True):
            run_commits(lambda active=active: user_set_active(user=bob, is_active=active))
            after_change = control_sets(redis_client, ids)
            rebuild_all()
            rebuilt = control_sets(redis_client, ids)
            dry = reconcile_all(repair=False)

            # The blocks stay in force in the database, so the sets keep them.
            assert (
                Block.objects.filter(blocker=alice, blocked=bob).exists()
                and Mute.objects.filter(muter=charlie, muted=bob).exists()
            )
            assert after_change == rebuilt == before
            assert bob.pk in after_change[alice.pk][0] and bob.pk in after_change[charlie.pk][1]
            assert dry.controls_drifted == 0


class TestControlWritesComeFromTheDatabase:
    def test_a_write_from_a_stale_read_is_rewritten_by_its_verifying_read(
        self, alice, bob, redis_client, run_commits, monkeypatch
    ):
        from social import control_mirror

        run_commits(lambda: controls.block_create(actor=alice, target_id=bob.pk))
        run_commits(lambda: controls.mute_create(actor=alice, target_id=bob.pk))
        real = control_mirror.pair_controls
        reads = []

        def stale_first(pairs):
            # The first read is of an older state (block and mute gone): an applier that read
            # before the block and wrote after a newer applier.
            reads.append(pairs)
            if len(reads) == 1:
                return {
                    pair: control_mirror.PairControls(blocked=False, a_mutes_b_until=None, b_mutes_a_until=None) for pair in pairs
                }
            return real(pairs)

        monkeypatch.setattr(control_mirror, "pair_controls", stale_first)
        control_mirror.mirror_apply_controls([(bob.pk, alice.pk)])

        assert len(reads) == 3  # the stale read, the verifying read that saw it moved, the check after the rewrite
        assert redis_client.smembers(redis_keys.blocks_key(alice.pk)) == {str(bob.pk).encode()}
        assert redis_client.smembers(redis_keys.blocks_key(bob.pk)) == {str(alice.pk).encode()}
        assert redis_client.zscore(redis_keys.mutes_key(alice.pk), str(bob.pk)) == redis_keys.MUTE_FOREVER_MS
        assert control_mirror.controls_differences(redis_client, [alice.pk, bob.pk]) == set()

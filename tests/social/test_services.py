import pytest

from core.errors import InvalidInput
from core.models import OutboxEntry
from core.parsing import parse_id
from social import redis_keys, selectors, services
from social.models import Follow
from tests.support.graph import assert_mirror_equals_database

pytestmark = pytest.mark.django_db


class TestFollowCreate:
    def test_creates_row_and_mirrors_after_commit(self, alice, bob, redis_client, django_capture_on_commit_callbacks):
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            result = services.follow_create(actor=alice, followee_id=bob.pk)
            # Before commit Redis has not been touched.
            assert not redis_client.sismember(redis_keys.following_set_key(alice.pk), bob.pk)

        with django_capture_on_commit_callbacks(execute=True):  # and what they schedule in turn
            for callback in callbacks:
                callback()

        assert result.changed is True
        assert Follow.objects.filter(follower=alice, followee=bob).count() == 1
        assert redis_client.sismember(redis_keys.following_set_key(alice.pk), bob.pk)
        assert redis_client.sismember(redis_keys.followers_set_key(bob.pk), alice.pk)
        created = Follow.objects.get(follower=alice, followee=bob).created_at
        assert redis_client.zscore(redis_keys.followers_zset_key(bob.pk), alice.pk) == int(created.timestamp())
        assert OutboxEntry.objects.filter(applied_at__isnull=True).count() == 0

    def test_repeat_is_a_no_op_success(self, alice, bob, redis_client, django_capture_on_commit_callbacks):
        with django_capture_on_commit_callbacks(execute=True):
            first = services.follow_create(actor=alice, followee_id=bob.pk)
        first_time = redis_client.zscore(redis_keys.followers_zset_key(bob.pk), alice.pk)

        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            results = [services.follow_create(actor=alice, followee_id=bob.pk) for _ in range(4)]

        assert first.changed is True
        assert [r.changed for r in results] == [False] * 4
        assert callbacks == []  # no side effects for a repeat
        assert Follow.objects.filter(follower=alice, followee=bob).count() == 1
        assert selectors.follow_counts(user_id=bob.pk).followers == 1
        assert redis_client.zscore(redis_keys.followers_zset_key(bob.pk), alice.pk) == first_time

    def test_self_follow_is_rejected(self, alice, redis_client):
        with pytest.raises(services.SelfFollowError):
            services.follow_create(actor=alice, followee_id=alice.pk)

        assert Follow.objects.count() == 0
        assert redis_client.scard(redis_keys.following_set_key(alice.pk)) == 0

    @pytest.mark.parametrize("raw", ["abc", "-1", "0", "1.5", "", " ", "99999999999999999999", True])
    def test_malformed_id_is_rejected_at_the_edge(self, alice, raw):
        # Services take parsed ids; the parsing at the edge refuses these.
        with pytest.raises(InvalidInput):
            services.follow_create(actor=alice, followee_id=parse_id(raw))

        assert Follow.objects.filter(follower=alice).count() == 0

    def test_unknown_or_inactive_target_is_rejected(self, alice, user_factory):
        ghost = user_factory(is_active=False)

        with pytest.raises(services.TargetNotFoundError):
            services.follow_create(actor=alice, followee_id=999999999)
        with pytest.raises(services.TargetNotFoundError):
            services.follow_create(actor=alice, followee_id=ghost.pk)

        assert Follow.objects.filter(follower=alice).count() == 0
        assert OutboxEntry.objects.count() == 0

    def test_rolled_back_follow_leaves_no_trace(self, alice, bob, redis_client, django_capture_on_commit_callbacks):
        from django.db import transaction

        with django_capture_on_commit_callbacks(execute=True) as callbacks, pytest.raises(RuntimeError), transaction.atomic():
            services.follow_create(actor=alice, followee_id=bob.pk)
            raise RuntimeError("boom")

        assert callbacks == []
        assert Follow.objects.count() == 0
        assert not redis_client.exists(redis_keys.following_set_key(alice.pk))


class TestFollowDelete:
    def test_removes_only_that_edge(self, alice, bob, charlie, redis_client, django_capture_on_commit_callbacks):
        """C02: A→B and C→B; A unfollows B: only A's row goes, C's row, sets and counts stay."""
        with django_capture_on_commit_callbacks(execute=True):
            services.follow_create(actor=alice, followee_id=bob.pk)
            services.follow_create(actor=charlie, followee_id=bob.pk)

        with django_capture_on_commit_callbacks(execute=True):
            result = services.follow_delete(actor=alice, followee_id=bob.pk)

        assert result.changed is True
        assert set(Follow.objects.values_list("follower_id", "followee_id")) == {(charlie.pk, bob.pk)}
        assert selectors.follow_counts(user_id=bob.pk).followers == 1
        assert selectors.follow_counts(user_id=charlie.pk).following == 1
        assert_mirror_equals_database(redis_client, [alice.pk, bob.pk, charlie.pk])

    def test_unfollowing_a_stranger_is_a_no_op_success(self, alice, bob, django_capture_on_commit_callbacks):
        """C02: unfollowing someone A does not follow is a success that changes nothing."""
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            result = services.follow_delete(actor=alice, followee_id=bob.pk)

        assert result.changed is False
        assert callbacks == []

    def test_unfollow_of_deactivated_account_succeeds(self, alice, bob, redis_client, django_capture_on_commit_callbacks):
        with django_capture_on_commit_callbacks(execute=True):
            services.follow_create(actor=alice, followee_id=bob.pk)
        bob.is_active = False
        bob.save()

        with django_capture_on_commit_callbacks(execute=True):
            result = services.follow_delete(actor=alice, followee_id=bob.pk)

        assert result.changed is True
        assert not Follow.objects.exists()
        assert_mirror_equals_database(redis_client, [alice.pk, bob.pk])

"""C01: duplicate follows sent in a row and at once, each on its own DB connection."""

import threading

import pytest
from django.db import connection

from core.models import OutboxEntry
from social import redis_keys, selectors, services
from social.models import Follow
from social.signals import follow_created
from tests.support.graph import assert_mirror_equals_database

pytestmark = pytest.mark.django_db(transaction=True)


class TestDuplicateFollow:
    def test_in_a_row_and_at_once_make_one_edge_and_one_side_effect(self, alice, bob, redis_client):
        side_effects: list[int] = []

        def count_backfill(sender, follower_id, followee_id, **kwargs):
            side_effects.append(followee_id)

        follow_created.connect(count_backfill, dispatch_uid="test.count_backfill")
        try:
            in_a_row = [services.follow_create(actor=alice, followee_id=bob.pk) for _ in range(5)]
            first_time = redis_client.zscore(redis_keys.followers_zset_key(bob.pk), alice.pk)
            services.follow_delete(actor=alice, followee_id=bob.pk)

            results: list[services.FollowResult] = []
            errors: list[BaseException] = []
            barrier = threading.Barrier(5)

            def follow_once() -> None:
                try:
                    barrier.wait()
                    results.append(services.follow_create(actor=alice, followee_id=bob.pk))
                except BaseException as exc:  # noqa: BLE001 - collected and asserted
                    errors.append(exc)
                finally:
                    connection.close()

            threads = [threading.Thread(target=follow_once) for _ in range(5)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            follow_created.disconnect(dispatch_uid="test.count_backfill")

        assert [r.changed for r in in_a_row] == [True, False, False, False, False]
        assert first_time is not None
        assert errors == []
        assert sorted(r.changed for r in results) == [False, False, False, False, True]
        assert Follow.objects.filter(follower=alice, followee=bob).count() == 1
        assert side_effects == [bob.pk, bob.pk]  # once per real follow: the first run, then the concurrent one
        row_time = int(Follow.objects.get(follower=alice, followee=bob).created_at.timestamp())
        assert redis_client.zscore(redis_keys.followers_zset_key(bob.pk), alice.pk) == row_time
        assert redis_client.zcard(redis_keys.followers_zset_key(bob.pk)) == 1
        assert selectors.follow_counts(user_id=bob.pk).followers == 1
        assert selectors.follow_counts(user_id=alice.pk).following == 1
        assert OutboxEntry.objects.filter(applied_at__isnull=True).count() == 0
        assert_mirror_equals_database(redis_client, [alice.pk, bob.pk])

"""Invariant 5 (reads): with Redis unreachable, every selector answers from the database."""

import pytest

from core.redis import redis_available
from social import controls, selectors, services

pytestmark = pytest.mark.django_db

DEAD_REDIS = "redis://127.0.0.1:1/0"


@pytest.fixture
def graph(alice, bob, charlie, user_factory, django_capture_on_commit_callbacks):
    dave = user_factory(username="dave")
    with django_capture_on_commit_callbacks(execute=True):
        for actor, target in [(alice, bob), (alice, dave), (charlie, bob), (charlie, dave), (bob, alice), (dave, alice)]:
            services.follow_create(actor=actor, followee_id=target.pk)
        controls.mute_create(actor=charlie, target_id=alice.pk)
    return alice, bob, charlie, dave


def answers(alice, bob, charlie, dave):
    return {
        "is_following": selectors.is_following(follower_id=alice.pk, followee_id=bob.pk),
        "relationship": selectors.relationship(viewer_id=alice.pk, user_id=bob.pk),
        "counts": selectors.follow_counts(user_id=bob.pk),
        "counts_many": selectors.follow_counts_many(user_ids=[alice.pk, bob.pk, charlie.pk, dave.pk]),
        "followers": [e.user.pk for e in selectors.followers_page(user_id=bob.pk, cursor=None, limit=10).entries],
        "following": [e.user.pk for e in selectors.following_page(user_id=alice.pk, cursor=None, limit=10).entries],
        "common": {u.pk for u in selectors.common_following(user_id=alice.pk, other_id=charlie.pk).users},
        "familiar": {u.pk for u in selectors.familiar_followers(viewer_id=alice.pk, user_id=charlie.pk).users},
        "mutual": {u.pk for u in selectors.mutual_follows(user_id=alice.pk).users},
        "profile_graph": printed(selectors.profile_graph(user_id=alice.pk, viewer_id=charlie.pk)),
        "profile_graph_controls": printed(selectors.profile_graph(user_id=alice.pk, viewer_id=charlie.pk, read_controls=True)),
    }


def printed(graph):
    """What a profile prints of ``graph``: its counts, the relationship, and each sample's size and
    accounts (id, handle, shown name), whichever type holds them (``User`` or the account cache's)."""
    samples = [graph.samples.mutual, graph.samples.common, graph.samples.familiar]
    return {
        "counts": graph.counts,
        "relationship": graph.relationship,
        "muting": graph.muting,
        "samples": [
            None if sample is None else (sample.count, [(u.pk, u.username, u.shown_name) for u in sample.users])
            for sample in samples
        ],
    }


class TestReadsWithRedisDown:
    def test_database_answers_equal_redis_answers(self, graph, settings):
        alice, bob, charlie, dave = graph
        from_redis = answers(*graph)

        settings.CACHES = {**settings.CACHES, "default": {**settings.CACHES["default"], "LOCATION": DEAD_REDIS}}
        settings.REDIS_CIRCUIT_OPEN_SECONDS = 30.0
        from_database = answers(*graph)

        assert not redis_available()  # the breaker opened on the first failure
        assert from_database == from_redis
        assert from_database["common"] == {bob.pk, dave.pk}
        assert from_database["mutual"] == {bob.pk, dave.pk}
        profile = from_database["profile_graph"]
        assert profile["counts"] == selectors.Counts(followers=2, following=2)
        pair = sorted([(bob.pk, "bob", bob.shown_name), (dave.pk, "dave", dave.shown_name)])
        assert profile["samples"][0] == (2, pair)  # mutual
        assert profile["samples"][1] == (2, pair)  # common
        assert profile["relationship"] == selectors.Relationship(is_following=False, follows_you=False)
        assert profile["muting"] is None
        assert from_database["profile_graph_controls"] == {**profile, "muting": True}
        assert from_database["counts"] == selectors.Counts(followers=2, following=1)
        assert from_database["counts_many"] == {
            alice.pk: selectors.Counts(followers=2, following=2),
            bob.pk: selectors.Counts(followers=2, following=1),
            charlie.pk: selectors.Counts(followers=0, following=2),
            dave.pk: selectors.Counts(followers=2, following=1),
        }

    def test_follow_succeeds_and_queues_while_redis_is_down(self, alice, bob, settings, django_capture_on_commit_callbacks):
        from core.models import OutboxEntry
        from social.models import OUTBOX_PAIR, Follow

        settings.CACHES = {**settings.CACHES, "default": {**settings.CACHES["default"], "LOCATION": DEAD_REDIS}}

        with django_capture_on_commit_callbacks(execute=True):
            result = services.follow_create(actor=alice, followee_id=bob.pk)

        assert result.changed is True
        assert Follow.objects.filter(follower=alice, followee=bob).exists()
        assert OutboxEntry.objects.filter(applied_at__isnull=True, kind=OUTBOX_PAIR).count() == 1
        assert selectors.is_following(follower_id=alice.pk, followee_id=bob.pk) is True

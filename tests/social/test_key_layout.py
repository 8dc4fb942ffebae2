"""C06: with a cache key prefix and version configured, one key per logical set, decimal members."""

import re

import pytest

from core.redis import all_sentinel_keys
from notifications.redis_keys import unread_key
from social import redis_keys, selectors, services
from social.rebuild import rebuild_all
from social.reconcile import reconcile_all

pytestmark = pytest.mark.django_db


def our_keys(client, prefix):
    return {key.decode() for key in client.scan_iter(match=f"{prefix}*", count=1000)}


class TestKeyLayout:
    def test_common_follows_and_one_key_per_set_through_every_writer(
        self, settings, user_factory, redis_client, redis_isolated, django_capture_on_commit_callbacks
    ):
        settings.CACHES = {
            **settings.CACHES,
            "default": {**settings.CACHES["default"], "KEY_PREFIX": "siteA", "VERSION": 7},
        }
        a, b, x, y, z, w = (user_factory() for _ in range(6))
        with django_capture_on_commit_callbacks(execute=True):
            for target in (x, y, z):
                services.follow_create(actor=a, followee_id=target.pk)
            for target in (y, z, w):
                services.follow_create(actor=b, followee_id=target.pk)

        before = {u.pk for u in selectors.common_following(user_id=a.pk, other_id=b.pk).users}
        rebuild_all()
        after_rebuild = {u.pk for u in selectors.common_following(user_id=a.pk, other_id=b.pk).users}
        report = reconcile_all(repair=True)
        after_reconcile = {u.pk for u in selectors.common_following(user_id=a.pk, other_id=b.pk).users}

        assert before == after_rebuild == after_reconcile == {y.pk, z.pk}
        assert report.pairs_repaired == 0
        keys = our_keys(redis_client, redis_isolated)
        sentinels = set(all_sentinel_keys(redis_client))
        expected = set(sentinels)
        for user in (a, b):
            expected |= {redis_keys.following_set_key(user.pk), redis_keys.following_zset_key(user.pk)}
        counters = {unread_key(user.pk) for user in (x, y, z, w)}  # each followed account was notified
        for user in (x, y, z, w):
            expected |= {redis_keys.followers_set_key(user.pk), redis_keys.followers_zset_key(user.pk)}
        # The request's versioned writes leave one fence per set written (social.mirror).
        fences = {key for key in keys if key.startswith(f"{redis_isolated}fence:")}
        fenced = {re.sub(r":w[0-9]+$", "", key.replace("fence:", "", 1)) for key in fences}
        assert fenced == {key for key in expected - sentinels if redis_client.type(key) == b"set"}
        keys -= fences
        assert keys == expected | counters
        assert not [k for k in redis_client.scan_iter(match="*siteA*", count=1000) if b"follow" in k]
        assert [redis_client.get(unread_key(user.pk)) for user in (x, y, z, w)] == [b"1:1", b"2:2", b"2:2", b"1:1"]
        for key in keys - sentinels - counters:
            members = redis_client.smembers(key) if redis_client.type(key) == b"set" else redis_client.zrange(key, 0, -1)
            assert members and all(re.fullmatch(rb"[1-9][0-9]*", m) for m in members), key

    def test_keys_carry_one_hash_tag_per_user_or_shard(self, settings):
        settings.REDIS_KEY_PREFIX = "ff:"

        assert redis_keys.following_set_key(42) == "ff:follow:{42}"
        assert redis_keys.followers_zset_key(42) == "ff:followers:z:{42}"
        assert redis_keys.followers_set_shard_key(42, 3) == "ff:followers:{42.s3}"

        def hash_tag(key: str) -> str:
            found = re.search(r"\{([^}]*)\}", key)
            assert found is not None, key  # every key of an account carries a hash tag
            return found.group(1)

        tags = {hash_tag(k) for k in redis_keys.all_user_keys(42)}
        assert tags == {"42"} | {f"42.s{s}" for s in range(settings.FOLLOWERS_SHARDS)}

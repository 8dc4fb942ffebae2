"""A Redis reply about the data a command met (a key of another type, a script's runtime error)
answers that read from the database and opens no breaker: every other read keeps using Redis
(``core.redis.is_data_error``). The server's own trouble still opens it."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
import redis

from core.metrics import REDIS_DATA_ERRORS
from core.redis import breaker_node, failures_seen, is_data_error, redis_available, redis_failed
from social import redis_keys, selectors
from social.selectors import Counts
from tests.support.graph import follow

pytestmark = pytest.mark.django_db


def server_error(client: Any, script: str, *keys: str) -> redis.exceptions.ResponseError:
    """The error the server answers ``script`` with (run through the client, as the code does)."""
    with pytest.raises(redis.exceptions.ResponseError) as raised:
        client.eval(script, len(keys), *keys)
    return raised.value


class TestWhatIsADataError:
    def test_the_servers_replies_about_data_are_and_its_trouble_is_not(self, redis_client: Any) -> None:
        key = redis_keys.followers_set_key(990_001)
        redis_client.set(key, "not a set")
        try:
            wrong_type = server_error(redis_client, "return redis.call('SCARD', KEYS[1])", key)
            pipe = redis_client.pipeline(transaction=False)
            pipe.scard(key)
            with pytest.raises(redis.exceptions.ResponseError) as in_pipeline:
                pipe.execute()
        finally:
            redis_client.delete(key)
        runtime = server_error(redis_client, "return 1 < nil")

        assert str(wrong_type).startswith("WRONGTYPE")
        assert "of pipeline caused error: WRONGTYPE" in str(in_pipeline.value)
        assert [is_data_error(error) for error in (wrong_type, in_pipeline.value, runtime)] == [True, True, True]
        trouble = [
            redis.exceptions.OutOfMemoryError("OOM command not allowed when used memory > 'maxmemory'."),
            redis.exceptions.ReadOnlyError("READONLY You can't write against a read only replica."),
            redis.exceptions.ResponseError("BUSY Redis is busy running a script."),
            redis.exceptions.ResponseError("MISCONF Redis is configured to save RDB snapshots, but it's unable to persist."),
            redis.exceptions.ConnectionError("Error 111 connecting to 127.0.0.1:1. Connection refused."),
            # Before Redis 7, a script's error wraps what its command met.
            redis.exceptions.ResponseError(
                "Error running script (call to f_0123): @user_script:1: -OOM command not allowed when used memory > 'maxmemory'."
            ),
        ]
        assert [is_data_error(error) for error in trouble] == [False] * len(trouble)

    def test_a_data_error_opens_no_breaker_and_the_servers_trouble_does(
        self, redis_client: Any, settings: Any, caplog: pytest.LogCaptureFixture
    ) -> None:
        settings.REDIS_CIRCUIT_OPEN_SECONDS = 30.0
        runtime = server_error(redis_client, "return 1 < nil")
        failures, counted = failures_seen(), REDIS_DATA_ERRORS._value.get()

        with caplog.at_level(logging.ERROR, logger="core.redis"):
            redis_failed(runtime, "a-node")
            redis_failed(runtime, "a-node")

        assert redis_available("a-node")
        assert failures_seen() == failures + 2
        assert REDIS_DATA_ERRORS._value.get() == counted + 2
        assert [record.getMessage() for record in caplog.records] == [
            f"Redis refused a command on its data (a-node) (the breaker stays closed): {runtime}"
        ]
        assert "attempt to compare" in str(runtime)

        redis_failed(redis.exceptions.ResponseError("BUSY Redis is busy running a script."), "a-node")
        assert not redis_available("a-node")


class TestAKeyOfAnotherTypeUnderARead:
    def test_that_read_answers_from_the_database_and_the_others_from_redis(
        self, user_factory: Any, redis_client: Any, settings: Any
    ) -> None:
        settings.REDIS_CIRCUIT_OPEN_SECONDS = 30.0
        star, fan, other = user_factory(), user_factory(), user_factory()
        follow(fan, star)
        follow(fan, other)
        broken = redis_keys.followers_set_key(star.pk)
        redis_client.delete(broken)
        redis_client.set(broken, "not a set")
        # Behind the writers' back, so an answer from Redis shows: the database says 1.
        redis_client.sadd(redis_keys.followers_set_key(other.pk), 990_002)

        assert selectors.follow_counts(user_id=star.pk) == Counts(followers=1, following=0)
        assert redis_available(breaker_node(broken))
        assert selectors.follow_counts(user_id=other.pk) == Counts(followers=2, following=0)


def test_a_data_error_met_by_the_probe_of_a_half_open_breaker_closes_it(redis_client: Any, settings: Any) -> None:
    settings.REDIS_CIRCUIT_OPEN_SECONDS = 0.05
    redis_failed(redis.exceptions.ConnectionError("Error 111 connecting. Connection refused."), "b-node")
    assert not redis_available("b-node")
    time.sleep(0.1)
    assert redis_available("b-node")  # this caller probes; the others wait
    assert not redis_available("b-node")

    redis_failed(server_error(redis_client, "return 1 < nil"), "b-node")

    assert redis_available("b-node")

"""``feed.page_reader``'s batched reads: one script over many sorted sets reads what one command
per set reads (members, scores, ties, positions, empty sets), so either way a page is the same."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from feed import page_reader
from feed.paging import Position
from social.redis_keys import following_set_key

# Scores from a few milliseconds, so runs of equal scores (ties) are common.
sets = st.lists(
    st.dictionaries(st.integers(1, 400), st.integers(1_700_000_000_000, 1_700_000_000_008), max_size=12), min_size=3, max_size=8
)


def both_ways(read: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """``read()`` as one script, then as one command per set."""
    batched = read()
    monkeypatch.setattr(page_reader, "BATCH_MIN_KEYS", 10**9)
    pipelined = read()
    monkeypatch.setattr(page_reader, "BATCH_MIN_KEYS", 3)
    return batched, pipelined


@pytest.mark.django_db
@hypothesis_settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    contents=sets,
    n=st.integers(1, 6),
    after=st.none() | st.tuples(st.integers(1_700_000_000_000, 1_700_000_000_009), st.integers(0, 401)),
)
def test_a_script_reads_each_set_as_one_command_per_set_does(contents, n, after, redis_client, monkeypatch) -> None:
    keys = [f"{settings.REDIS_KEY_PREFIX}page-reader:{index}" for index in range(len(contents))]
    redis_client.delete(*keys)
    for key, members in zip(keys, contents, strict=True):
        if members:
            redis_client.zadd(key, {str(member): score for member, score in members.items()})
    position = Position(*after) if after is not None else None
    cuts = {key: min(members.values()) for key, members in zip(keys, contents, strict=True) if members}

    windows = both_ways(lambda: page_reader._read_windows(redis_client, keys, position, n), monkeypatch)
    runs = both_ways(lambda: page_reader._read_runs(redis_client, cuts), monkeypatch)
    whole = both_ways(lambda: page_reader.redis_window(redis_client, keys, position, n), monkeypatch)
    redis_client.delete(*keys)

    assert windows[0] == windows[1]
    assert runs[0] == runs[1]
    assert whole[0] == whole[1]
    # And what was read is the sets' own: every member at most n per set, newest first.
    assert all(len(read.items) <= n for read in windows[0])


def test_the_first_round_takes_a_pull_set_of_any_size(redis_client) -> None:
    pull = list(range(1, 8_200))
    following = following_set_key(7)
    redis_client.sadd(following, 5, 8_100)

    found = page_reader.inbox_round(redis_client, reader_id=7, pull=pull, after=None, n=5, notes=6)

    assert found.pulled == [5, 8_100]

"""The raw limits every operation is compared with, measured in the same run on the same servers.

- ``redis_ping``: one redis-py round trip (``PING``) on the client the
  application uses (``core.redis.get_redis``): the floor of any
  read that needs Redis at all.
- ``redis_zadd_pipelined``: ``ZADD`` of one member to each of ``ZADD_BATCH``
  different keys per pipeline round trip, the shape of a fan-out, as
  commands per second (the ceiling of a fan-out from one Python process).
- ``redis_zrevrange_page``: ``ZREVRANGE key 0 50 WITHSCORES`` of a real
  followers sorted set, decoded to ``(id, score)`` ints, in one round trip:
  the floor of a followers page (51 ids and times cross the wire).
- ``mariadb_pk_select``: ``SELECT id, username FROM users_user WHERE id = %s``
  through Django's cursor (no ORM): the floor of any read that needs MariaDB.
"""

from __future__ import annotations

import random
from typing import Any, cast

from django.contrib.auth import get_user_model
from django.db import connection

from core.redis import get_redis

from . import timing

ZADD_BATCH = 1000


def raw_key(name: str, index: int) -> str:
    """A scratch key of the raw measurements, under the run's key prefix."""
    from social.redis_keys import prefix

    return f"{prefix()}bench:raw:{name}:{{{index}}}"


def redis_ping(**budget: Any) -> timing.Summary:
    """Latency of one ``PING`` round trip."""
    client = get_redis()
    return timing.run(lambda _: client.ping(), **budget)


def redis_zadd_pipelined(*, batches: int = 40, batch: int = ZADD_BATCH) -> timing.Summary:
    """``ZADD`` rate: ``batches`` pipelines of ``batch`` single-member ZADDs to distinct keys.

    :returns: a ``Summary`` whose ``ops_per_s`` is ZADD commands per second
        (p50/p99 are per pipeline); the scratch keys are removed.
    """
    client = get_redis()
    keys = [raw_key("zadd", index) for index in range(batch)]

    def one(index: int) -> None:
        pipe = client.pipeline(transaction=False)
        member = str(index)
        for key in keys:
            pipe.zadd(key, {member: index})
        pipe.execute()

    try:
        return timing.run(one, min_calls=batches, max_calls=batches, warmup=2, units_per_call=batch)
    finally:
        for start in range(0, len(keys), 500):
            client.unlink(*keys[start : start + 500])


def redis_zrevrange_page(key: str, count: int = 51, **budget: Any) -> timing.Summary:
    """Latency of reading the top ``count`` members of sorted set ``key`` with their scores, as ints."""
    client = get_redis()

    def one(_: int) -> list[tuple[int, int]]:
        page = cast("list[tuple[bytes, float]]", client.zrevrange(key, 0, count - 1, withscores=True))
        return [(int(member), int(score)) for member, score in page]

    return timing.run(one, **budget)


def mariadb_pk_select(**budget: Any) -> timing.Summary:
    """Latency of one primary-key ``SELECT`` of a user row (random ids of existing users)."""
    table = connection.ops.quote_name(get_user_model()._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT MIN(id), MAX(id) FROM {table}")
        low, high = cursor.fetchone()
    rng = random.Random(7)
    ids = [rng.randint(low, high) for _ in range(1000)]
    sql = f"SELECT id, username FROM {table} WHERE id = %s"
    with connection.cursor() as cursor:

        def one(index: int) -> None:
            cursor.execute(sql, [ids[index % len(ids)]])
            cursor.fetchone()

        return timing.run(one, **budget)

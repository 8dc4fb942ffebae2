"""The follow graph in tests: following through the service, and the mirror against the database."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

from social import layout, redis_keys, services
from social.models import Follow
from tests.support.commits import run_on_commit


def follow(follower: Any, followee: Any) -> None:
    """``follower`` follows ``followee`` through the service, with the after-commit work (the
    mirror, the feed backfill) run as a request would (in a transactional test it ran at commit)."""
    with run_on_commit():
        services.follow_create(actor=follower, followee_id=followee.pk)


def star_with_fans(user_factory: Any, *, fans: int = 12) -> tuple[Any, Any, list[Any]]:
    """``(star, viewer, fans)``: ``fans`` accounts follow the star, the viewer follows the first
    five of them, the star follows the fourth to the seventh back."""
    star, viewer = user_factory(), user_factory()
    following = [user_factory() for _ in range(fans)]
    for fan in following:
        follow(fan, star)
    for fan in following[:5]:
        follow(viewer, fan)
    for fan in following[3:7]:
        follow(star, fan)
    return star, viewer, following


def unfollow(follower: Any, followee: Any) -> None:
    """``follower`` stops following ``followee`` through the service, after-commit work run (the
    mirror, the inbox clean-up)."""
    with run_on_commit():
        services.follow_delete(actor=follower, followee_id=followee.pk)


def db_edges() -> set[tuple[int, int]]:
    """Active edges in the database as ``{(follower_id, followee_id)}``."""
    return set(
        Follow.objects.filter(follower__is_active=True, followee__is_active=True).values_list("follower_id", "followee_id")
    )


def redis_edges(client: Any, user_ids: list[int]) -> dict[str, set[tuple[int, int]]]:
    """Edges as seen by each of the four Redis structures of ``user_ids``.

    :returns: ``{"following_set": {...}, "following_zset": ..., "followers_set": ..., "followers_zset": ...}``.
    """
    found: dict[str, set[tuple[int, int]]] = {
        "following_set": set(),
        "following_zset": set(),
        "followers_set": set(),
        "followers_zset": set(),
    }
    for user_id in user_ids:
        found["following_set"] |= {(user_id, int(m)) for m in client.smembers(redis_keys.following_set_key(user_id))}
        found["following_zset"] |= {(user_id, int(m)) for m in client.zrange(redis_keys.following_zset_key(user_id), 0, -1)}
        live = client.get(redis_keys.followers_layout_key(user_id)) or layout.LAYOUT_SINGLE
        set_keys = [set_key for set_key, _ in layout.read_keys(user_id, live)]
        zset_keys = [zset_key for _, zset_key in layout.read_keys(user_id, live)]
        for key in set_keys:
            found["followers_set"] |= {(int(m), user_id) for m in client.smembers(key)}
        for key in zset_keys:
            found["followers_zset"] |= {(int(m), user_id) for m in client.zrange(key, 0, -1)}
    return found


def assert_mirror_equals_database(client: Any, user_ids: list[int]) -> None:
    """Every Redis structure of ``user_ids`` holds exactly the database's active edges."""
    users = set(user_ids)
    truth = {(a, b) for a, b in db_edges() if a in users or b in users}
    found = redis_edges(client, user_ids)
    expected = {
        "following_set": {(a, b) for a, b in truth if a in users},
        "following_zset": {(a, b) for a, b in truth if a in users},
        "followers_set": {(a, b) for a, b in truth if b in users},
        "followers_zset": {(a, b) for a, b in truth if b in users},
    }
    for name, want in expected.items():
        assert found[name] == want, name


def write_edges(path: Path, text: str) -> Path:
    """Write ``text`` (an edge list, SNAP style: "follower<TAB>followee" lines) gzipped to ``path``; returns it."""
    with gzip.open(path, "wt") as handle:
        handle.write(text)
    return path

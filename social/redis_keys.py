"""The Redis key layout of the follow graph; the only place that builds these keys.

Every key carries its user's hash tag (``{42}``; a followers shard ``{42.s3}``), under
``REDIS_KEY_PREFIX``. Members are decimal user ids; follow scores are whole unix seconds (32-bit,
5-byte listpack entries). Each function names its key's type and content; which follower keys
are live is ``social.layout``'s decision. Design: docs/architecture.md#the-follow-graph.
"""

from __future__ import annotations

import time

from django.conf import settings


def prefix() -> str:
    """The configured key prefix (``REDIS_KEY_PREFIX``), e.g. ``"ff:"``."""
    return str(settings.REDIS_KEY_PREFIX)


def following_set_key(user_id: int) -> str:
    """SET of the ids ``user_id`` follows."""
    return f"{prefix()}follow:{{{int(user_id)}}}"


def following_zset_key(user_id: int) -> str:
    """ZSET of the ids ``user_id`` follows, scored by follow time (seconds)."""
    return f"{prefix()}following:z:{{{int(user_id)}}}"


def followers_set_key(user_id: int) -> str:
    """SET of the ids following ``user_id`` (single-key layout)."""
    return f"{prefix()}followers:{{{int(user_id)}}}"


def followers_zset_key(user_id: int) -> str:
    """ZSET of the ids following ``user_id``, scored by follow time (single-key layout)."""
    return f"{prefix()}followers:z:{{{int(user_id)}}}"


def followers_set_shard_key(user_id: int, shard: int) -> str:
    """SET shard ``shard`` of the followers of big account ``user_id``."""
    return f"{prefix()}followers:{{{int(user_id)}.s{int(shard)}}}"


def followers_zset_shard_key(user_id: int, shard: int) -> str:
    """ZSET shard ``shard`` of the followers of big account ``user_id``."""
    return f"{prefix()}followers:z:{{{int(user_id)}.s{int(shard)}}}"


def followers_layout_key(user_id: int) -> str:
    """STRING marker naming the live followers layout of ``user_id``."""
    return f"{prefix()}followers:layout:{{{int(user_id)}}}"


def followers_migration_lock_key(user_id: int) -> str:
    """STRING lock held (with a TTL) by the layout migration running for ``user_id``."""
    return f"{prefix()}followers:migration:{{{int(user_id)}}}"


def followers_migration_queued_key(user_id: int) -> str:
    """STRING set (with a TTL) while a layout migration task for ``user_id`` is queued or running."""
    return f"{prefix()}followers:migration:queued:{{{int(user_id)}}}"


def graph_version_key(user_id: int) -> str:
    """STRING: a random token of the current state of ``user_id``'s follow-graph keys (its
    following set, its followers set); every writer of those keys deletes it after writing, and
    a reader of a cached profile sample sets a new one when it finds none."""
    return f"{prefix()}graph:version:{{{int(user_id)}}}"


def profile_samples_key_head() -> str:
    """The head of a cached profile sample's key: the script that reads it (``PROFILE_GRAPH_LUA``)
    appends the account, the viewer, both graph version tokens and a digest of its arguments."""
    return f"{prefix()}profile:samples:"


# A cached profile sample is left behind by any change of its accounts' graphs (its key holds
# their version tokens); this only bounds how long a left-behind one takes memory.
PROFILE_SAMPLES_TTL_SECONDS = 300


def blocks_key(user_id: int) -> str:
    """SET of the ids hidden from ``user_id`` by a block in either direction."""
    return f"{prefix()}blocks:{{{int(user_id)}}}"


def mutes_key(user_id: int) -> str:
    """ZSET of the ids ``user_id`` mutes, scored by the mute's expiry (unix ms)."""
    return f"{prefix()}mutes:{{{int(user_id)}}}"


def suggestions_key(user_id: int) -> str:
    """ZSET: the accounts suggested to ``user_id`` ("who to follow"), by score."""
    return f"{prefix()}suggestions:{{{int(user_id)}}}"


def suggestions_why_key(user_id: int) -> str:
    """HASH: candidate id -> "via,name,name" (how many of ``user_id``'s followees follow it, two of them)."""
    return f"{prefix()}suggestions:why:{{{int(user_id)}}}"


def suggestions_counted_key(user_id: int) -> str:
    """SET: no longer written (stored sets are re-derived whole); deleted with ``user_id``'s suggestions."""
    return f"{prefix()}suggestions:counted:{{{int(user_id)}}}"


def suggestions_empty_key(user_id: int) -> str:
    """STRING: set when ``user_id``'s suggestions were computed and none was found."""
    return f"{prefix()}suggestions:empty:{{{int(user_id)}}}"


def suggestions_queued_key(user_id: int) -> str:
    """STRING: a computation of ``user_id``'s suggestions is queued (with a TTL)."""
    return f"{prefix()}suggestions:queued:{{{int(user_id)}}}"


def suggestions_refresh_checkpoint_key() -> str:
    """STRING ``<last user id>``: how far the running nightly refresh got (with a TTL, so tomorrow's run starts afresh)."""
    return f"{prefix()}suggestions:refresh:checkpoint"


def most_followed_generation_key() -> str:
    """Django cache key: the generation of the cached most-followed rankings (an int; a change
    of an account's activity moves it on, so every cached ranking is left behind at once)."""
    return f"{prefix()}users:most_followed:generation"


def most_followed_cache_key(*, limit: int, generation: int) -> str:
    """Django cache key: the most-followed ranking of ``limit`` accounts in ``generation``."""
    return f"{prefix()}users:most_followed:{int(generation)}:{int(limit)}"


# Stored suggestions live this long past their last computation (the nightly reconcile renews them).
SUGGESTIONS_TTL_SECONDS = 2 * 86_400
SUGGESTIONS_QUEUED_TTL_SECONDS = 300
# An interrupted nightly refresh is resumed within this time, not after.
SUGGESTIONS_CHECKPOINT_TTL_SECONDS = 12 * 3600


# The score of a mute without an end (year 2286; a double holds it exactly).
MUTE_FOREVER_MS = 9_999_999_999_999


# A versioned mirror write older than half this is not made (``social.mirror``); fences live
# three windows, so one made by a newer write is always still there when an older one lands.
FENCE_WINDOW_SECONDS = 600


def fence_window(now_seconds: float) -> int:
    """The fence window (``FENCE_WINDOW_SECONDS`` long) of unix time ``now_seconds``."""
    return int(now_seconds // FENCE_WINDOW_SECONDS)


def fence_keys(structure_key: str, window: int) -> list[str]:
    """HASH keys fencing the versioned writes of ``structure_key`` (same hash slot): those of
    windows ``window - 1``, ``window`` (written) and ``window + 1`` (another clock's)."""
    base = structure_key[len(prefix()) :]
    return [f"{prefix()}fence:{base}:w{w}" for w in (window - 1, window, window + 1)]


def all_user_keys(user_id: int) -> list[str]:
    """Every follow-graph key of ``user_id`` in every layout (for rebuild and delete)."""
    keys = [
        following_set_key(user_id),
        following_zset_key(user_id),
        followers_set_key(user_id),
        followers_zset_key(user_id),
        followers_layout_key(user_id),
        followers_migration_lock_key(user_id),
        followers_migration_queued_key(user_id),
        graph_version_key(user_id),
        blocks_key(user_id),
        mutes_key(user_id),
        suggestions_key(user_id),
        suggestions_why_key(user_id),
        suggestions_counted_key(user_id),
        suggestions_empty_key(user_id),
        suggestions_queued_key(user_id),
    ]
    for shard in range(int(settings.FOLLOWERS_SHARDS)):
        keys.append(followers_set_shard_key(user_id, shard))
        keys.append(followers_zset_shard_key(user_id, shard))
    window = fence_window(time.time())
    for structure in [following_set_key(user_id), followers_set_key(user_id), *keys[-2 * int(settings.FOLLOWERS_SHARDS) :: 2]]:
        keys += fence_keys(structure, window)
    return keys

"""Where a big account's followers live in Redis: the layout policy, pure (no I/O).

Decides which layout a follower count wants (single key, or ``FOLLOWERS_SHARDS`` shards from
``FOLLOWERS_SHARD_THRESHOLD``, back below ``unshard_threshold()``) and which keys each marker
state reads and writes; every other module asks it. Design: docs/architecture.md#big-accounts.
"""

from __future__ import annotations

from django.conf import settings

from . import redis_keys

KeyPair = tuple[str, str]  # (set_key, zset_key)

LAYOUT_SINGLE = b"single"  # never stored: a missing marker means single
LAYOUT_SHARDED = b"sharded"
LAYOUT_MIGRATING = b"migrating"  # single -> sharded; readers still read the single key
LAYOUT_UNSHARDING = b"unsharding"  # sharded -> single; readers still read the shards


def marker_layout(value: bytes | str | None) -> bytes:
    """The layout a marker's stored ``value`` names (None, a missing marker, is single)."""
    if isinstance(value, str):
        return value.encode()
    return value or LAYOUT_SINGLE


# The markers under which readers read the follower shards (else the single key).
SHARD_READING_LAYOUTS = (LAYOUT_SHARDED, LAYOUT_UNSHARDING)


def reads_shards(layout: bytes) -> bool:
    """Whether readers of an account in ``layout`` read its follower shards (else the single key)."""
    return layout in SHARD_READING_LAYOUTS


def writes_single(layout: bytes) -> bool:
    """Whether writers of an account in ``layout`` write its single follower keys."""
    return layout != LAYOUT_SHARDED


def writes_shards(layout: bytes) -> bool:
    """Whether writers of an account in ``layout`` write its follower shards."""
    return layout != LAYOUT_SINGLE


def shard_count() -> int:
    """How many shard pairs a sharded account has (``FOLLOWERS_SHARDS``)."""
    return int(settings.FOLLOWERS_SHARDS)


def follower_shard(follower_id: int) -> int:
    """The shard (0..FOLLOWERS_SHARDS-1) that holds ``follower_id`` in a sharded account."""
    return int(follower_id) % shard_count()


def unshard_threshold() -> int:
    """Follower count below which a sharded account goes back to one key:
    ``FOLLOWERS_SHARD_THRESHOLD * FOLLOWERS_UNSHARD_RATIO`` (the gap is the hysteresis band).
    """
    return int(settings.FOLLOWERS_SHARD_THRESHOLD * settings.FOLLOWERS_UNSHARD_RATIO)


def desired_layout(*, followers: int, layout: bytes) -> bytes:
    """The settled layout (``LAYOUT_SINGLE`` or ``LAYOUT_SHARDED``) an account wants.

    :param followers: its follower count.
    :param layout: its marker now; inside the hysteresis band an account
        keeps it (a migration under way is carried to its end).
    """
    if followers >= settings.FOLLOWERS_SHARD_THRESHOLD:
        return LAYOUT_SHARDED
    if followers < unshard_threshold():
        return LAYOUT_SINGLE
    if layout in (LAYOUT_SHARDED, LAYOUT_MIGRATING):
        return LAYOUT_SHARDED
    return LAYOUT_SINGLE


def migration_due(*, followers: int, layout: bytes) -> bool:
    """Whether an account with ``followers`` in ``layout`` needs a layout migration."""
    return desired_layout(followers=followers, layout=layout) != layout


def single_keys(user_id: int) -> KeyPair:
    """The single layout's ``(set_key, zset_key)`` of ``user_id``'s followers."""
    return redis_keys.followers_set_key(user_id), redis_keys.followers_zset_key(user_id)


def shard_keys(user_id: int, shard: int) -> KeyPair:
    """Shard ``shard``'s ``(set_key, zset_key)`` of ``user_id``'s followers."""
    return redis_keys.followers_set_shard_key(user_id, shard), redis_keys.followers_zset_shard_key(user_id, shard)


def all_shard_keys(user_id: int) -> list[KeyPair]:
    """``[(set_key, zset_key)]`` of every follower shard of ``user_id``, shard 0 first."""
    return [shard_keys(user_id, shard) for shard in range(shard_count())]


def read_keys(user_id: int, layout: bytes) -> list[KeyPair]:
    """``[(set_key, zset_key)]`` readers use for ``user_id``'s followers in ``layout``."""
    if reads_shards(layout):
        return all_shard_keys(user_id)
    return [single_keys(user_id)]


def home_keys(user_id: int, follower_id: int) -> dict[bytes, KeyPair]:
    """Where ``follower_id`` lives among ``user_id``'s followers in each settled layout:
    ``{LAYOUT_SINGLE: single pair, LAYOUT_SHARDED: its shard's pair}``."""
    return {LAYOUT_SINGLE: single_keys(user_id), LAYOUT_SHARDED: shard_keys(user_id, follower_shard(follower_id))}


def write_keys(user_id: int, follower_id: int, layout: bytes) -> list[KeyPair]:
    """The key pairs a write of the edge ``follower_id -> user_id`` touches in ``layout``
    (both layouts while a migration runs, so neither reads stale when the marker flips)."""
    homes = home_keys(user_id, follower_id)
    targets = []
    if writes_single(layout):
        targets.append(homes[LAYOUT_SINGLE])
    if writes_shards(layout):
        targets.append(homes[LAYOUT_SHARDED])
    return targets


def stale_keys(user_id: int, follower_id: int, layout: bytes) -> list[KeyPair]:
    """The pair of the layout that is *not* live in a settled ``layout``, where a write that raced
    with a marker flip may have left ``follower_id`` (nothing while a migration runs)."""
    homes = home_keys(user_id, follower_id)
    if layout == LAYOUT_SHARDED:
        return [homes[LAYOUT_SINGLE]]
    if layout == LAYOUT_SINGLE:
        return [homes[LAYOUT_SHARDED]]
    return []


def every_set_key(user_id: int) -> list[str]:
    """The follower SET keys of ``user_id`` in every layout at once (single and all shards), for
    finding every follower whatever the marker says (fan-out, deletion, rebuild).
    """
    return [single_keys(user_id)[0]] + [set_key for set_key, _ in all_shard_keys(user_id)]

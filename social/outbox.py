"""The follow graph's outbox kinds (``social.pair``, ``.layout``, ``.control``, ``.suggest``,
``.suggest_compute``, ``.suggest_account``, ``.rankings``, ``.user``) and their handlers, and the
graph's rebuild step for ``core.outbox.rebuild_locked``. What each kind does and when it applies:
docs/architecture.md#the-outbox-and-its-kinds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from functools import partial

from django.db import transaction

from core import outbox
from core.models import OutboxEntry
from core.redis import REDIS_ERRORS, get_redis, redis_available, redis_failed
from users.models import User

from . import layout, redis_keys
from .control_mirror import mirror_apply_controls
from .mirror import LayoutObservation, Version, mirror_apply_pairs, mirror_apply_user
from .models import OUTBOX_CONTROL, OUTBOX_PAIR, OUTBOX_USER
from .rebuild import rebuild_all
from .sharding import followers_layout_migrate
from .suggestions import rankings_invalidate, suggestions_rederive, suggestions_rederive_account, suggestions_refresh

# While this many seconds pass, follows of an account queue no second layout migration.
QUEUED_TTL_SECONDS = 300


def layout_migrations_enqueue(observed: dict[int, LayoutObservation]) -> list[int]:
    """Record a ``social.layout`` entry for each account whose observed count asks for another layout
    (one SET NX on a ``queued`` key each, so a stream of follows records one entry).

    :param observed: ``{followee_id: LayoutObservation}``.
    :returns: the user ids for which an entry was recorded.
    :raises: ``REDIS_ERRORS``; ``django.db.DatabaseError`` (the queued key then expires).
    """
    due = [user_id for user_id, seen in observed.items() if layout.migration_due(followers=seen.count, layout=seen.layout)]
    if not due:
        return []
    client = get_redis()
    queued = []
    for user_id in due:
        if client.set(redis_keys.followers_migration_queued_key(user_id), "1", nx=True, ex=QUEUED_TTL_SECONDS):
            queued.append(user_id)
            outbox.record(LAYOUT, subject_id=user_id)
    return queued


def _apply_layouts(entries: Sequence[OutboxEntry]) -> None:
    for user_id in sorted({entry.subject_id for entry in entries}):
        result = followers_layout_migrate(user_id=user_id)
        # Follows that landed meanwhile may ask for the other layout already.
        if result.after is not None and result.skipped != "locked":
            layout_migrations_enqueue({user_id: result.after})


def _apply_pairs(entries: Sequence[OutboxEntry], *, verify: bool = True) -> None:
    pairs = [(entry.subject_id, entry.object_id) for entry in entries if entry.object_id is not None]
    # A pair changed twice in one batch has two hints: none is trusted.
    hinted = [
        (entry.subject_id, entry.object_id, entry.hint) for entry in entries if entry.object_id is not None and entry.hinted
    ]
    counts = Counter(pairs)
    hints = {(follower, followee): hint for follower, followee, hint in hinted if counts[(follower, followee)] == 1}
    versions: dict[tuple[int, int], Version] = {}
    for entry in sorted(entries, key=lambda e: e.pk):
        if entry.object_id is not None:
            versions[(entry.subject_id, entry.object_id)] = Version(
                entry_id=entry.pk, created_ms=int(entry.created_at.timestamp() * 1000)
            )
    layout_migrations_enqueue(mirror_apply_pairs(pairs, hints=hints, verify=verify, versions=versions))


def _apply_controls(entries: Sequence[OutboxEntry]) -> None:
    mirror_apply_controls([(entry.subject_id, entry.object_id) for entry in entries if entry.object_id is not None])


def _apply_users(entries: Sequence[OutboxEntry]) -> None:
    for user_id in sorted({entry.subject_id for entry in entries}):
        layout_migrations_enqueue(mirror_apply_user(user_id))
        if not User.objects.filter(pk=user_id).exists():
            # A deleted account: its markers and any emptied shard go too.
            get_redis().unlink(*redis_keys.all_user_keys(user_id))


# Graph entries are applied before the feed's (stage 0): a feed job decides
# from the follow mirror, so the mirror must already show the change.
# In the request of a follow, the transaction's state is written without the verifying read:
# the follow's feed job applies the entry again, verified, before its own work.
PAIR = outbox.register(OUTBOX_PAIR, apply=_apply_pairs, provisional=partial(_apply_pairs, verify=False), inline=True, stage=0)
USER = outbox.register(OUTBOX_USER, apply=_apply_users, inline=True, stage=0)
CONTROL = outbox.register(OUTBOX_CONTROL, apply=_apply_controls, inline=True, stage=0)
# A layout migration (``social.sharding``) runs in a message of its own, with the long tasks' time limits.
LAYOUT = outbox.register("social.layout", apply=_apply_layouts, alone=True, long=True, stage=3)


def _apply_suggestions(entries: Sequence[OutboxEntry]) -> None:
    suggestions_rederive(user_ids=[entry.subject_id for entry in entries])


def _apply_suggestions_compute(entries: Sequence[OutboxEntry]) -> None:
    client = get_redis()
    for user_id in sorted({entry.subject_id for entry in entries}):
        suggestions_refresh(user_id=user_id)
        client.delete(redis_keys.suggestions_queued_key(user_id))


def _apply_suggestions_account(entries: Sequence[OutboxEntry]) -> None:
    for account_id in sorted({entry.subject_id for entry in entries}):
        suggestions_rederive_account(account_id=account_id)


def _apply_rankings(entries: Sequence[OutboxEntry]) -> None:
    rankings_invalidate()


# After the feed's entries of the same follow (the task's message carries both).
SUGGEST = outbox.register("social.suggest", apply=_apply_suggestions, stage=2)
SUGGEST_COMPUTE = outbox.register("social.suggest_compute", apply=_apply_suggestions_compute, stage=2)
SUGGEST_ACCOUNT = outbox.register("social.suggest_account", apply=_apply_suggestions_account, stage=2)
# Inline: the directory's next request ranks without the deactivated account's follows.
RANKINGS = outbox.register("social.rankings", apply=_apply_rankings, inline=True, stage=2)


def suggestions_record(*user_ids: int) -> None:
    """Record a ``SUGGEST`` entry for each of ``user_ids`` in the current transaction (a change
    between them that can alter their "who to follow": a block or a mute, either way)."""
    for user_id in dict.fromkeys(user_ids):
        outbox.record(SUGGEST, subject_id=user_id)


def suggestions_request(*, user_id: int) -> bool:
    """Record a ``SUGGEST_COMPUTE`` entry for ``user_id`` unless one was asked for within
    ``SUGGESTIONS_QUEUED_TTL_SECONDS``. Best effort: nothing while Redis is down.

    :returns: True when an entry was recorded.
    """
    if not redis_available():
        return False
    try:
        queued = get_redis().set(
            redis_keys.suggestions_queued_key(user_id), 1, nx=True, ex=redis_keys.SUGGESTIONS_QUEUED_TTL_SECONDS
        )
    except REDIS_ERRORS as exc:
        redis_failed(exc)
        return False
    if not queued:
        return False
    with transaction.atomic():
        outbox.record(SUGGEST_COMPUTE, subject_id=user_id)
    return True


def _rebuild_graph(renew: Callable[[], None]) -> None:
    rebuild_all(on_progress=lambda users, edges: renew())


outbox.register_rebuild("social.graph", rebuild=_rebuild_graph, order=0)

"""Bringing the Redis mirror back after faults: the outbox drain and the rebuild after data loss.

``outbox_drain_pending`` is what the beat-driven drain task runs every
``SOCIAL_OUTBOX_DRAIN_SECONDS``: it first looks for the sentinel key (absent
when Redis restarted without persistence, was flushed, or never got a
rebuild) and, if it is missing, queues one background rebuild; reads use the
database meanwhile because the selectors check the same sentinel. Then it
applies every pending outbox entry from the database's current state.

``mirror_rebuild_locked`` runs the whole rebuild under a Redis lock, so the
drain can ask for it every few seconds and only one runs. The lock is a
plain ``SET NX EX`` with a token, renewed after every batch; a worker killed
mid-rebuild leaves a lock that expires after ``REBUILD_LOCK_SECONDS``, and
the next drain starts a fresh rebuild (every step of which is idempotent).
The lock is released and renewed with GET-then-DEL/SET, not a Lua script,
so it also runs on the embedded fakeredis; the window in which a lock that
expired is renewed or released by its old holder only means two rebuilds
may overlap, which is safe, just wasteful.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from . import redis_keys
from .mirror import MirrorNotConverged, outbox_apply, outbox_purge
from .models import MirrorOutbox
from .redis_client import REDIS_ERRORS, get_redis, redis_failed, redis_succeeded

logger = logging.getLogger(__name__)

# A rebuild renews its lock after every batch of accounts (a few seconds at
# most on the Slashdot graph); two minutes without a renewal means its
# worker died.
REBUILD_LOCK_SECONDS = 120


@dataclass
class DrainResult:
    """What one drain did: ``applied`` entries, ``stuck`` entries left pending because their
    pair kept changing, ``rebuild_queued`` when the sentinel was missing, ``redis_down``."""

    applied: int = 0
    stuck: int = 0
    rebuild_queued: bool = False
    redis_down: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The figures as a dict (the task's return value)."""
        return asdict(self)


def _apply_batch(entries: list[MirrorOutbox]) -> tuple[int, int]:
    """Apply ``entries``; when their pairs keep changing, apply them one by one so only the hot
    pairs stay pending. :returns: ``(applied, stuck)``."""
    try:
        return outbox_apply(entries), 0
    except MirrorNotConverged:
        applied = stuck = 0
        for entry in entries:
            try:
                applied += outbox_apply([entry])
            except MirrorNotConverged:
                stuck += 1  # still pending; the next drain retries it
        return applied, stuck


def mirror_needs_rebuild(client: Any) -> bool:
    """Whether Redis lost the mirror (sentinel missing) and no rebuild holds the lock."""
    pipe = client.pipeline(transaction=False)
    pipe.exists(redis_keys.social_sentinel_key())
    pipe.exists(redis_keys.social_rebuild_lock_key())
    has_sentinel, locked = pipe.execute()
    return not has_sentinel and not locked


def outbox_drain_pending(*, batch: int | None = None, max_batches: int | None = None, start_rebuild: bool = True) -> DrainResult:
    """Queue a rebuild if Redis lost the mirror, then apply every pending outbox entry, oldest first.

    Entries are walked by id (keyset), so an entry that cannot be applied
    now is skipped for this run instead of being retried in a loop; entries
    created while the drain runs are picked up as the walk reaches them.

    :param batch: entries per round (one database read, one Redis pipeline);
        default ``SOCIAL_OUTBOX_DRAIN_BATCH`` (500).
    :param max_batches: stop after this many rounds (None: until the end).
    :param start_rebuild: queue ``social_mirror_rebuild`` when the sentinel is missing.
    :returns: a ``DrainResult``; Redis errors are caught (``redis_down``), the
        entries stay pending and the next run retries.
    """
    result = DrainResult()
    batch = batch or int(settings.SOCIAL_OUTBOX_DRAIN_BATCH)
    try:
        client = get_redis()
        if start_rebuild and mirror_needs_rebuild(client):
            from .tasks import social_mirror_rebuild

            logger.warning("mirror sentinel missing: Redis lost its data; queueing a rebuild, reads use the database")
            social_mirror_rebuild.delay()
            result.rebuild_queued = True
        cursor = 0
        rounds = 0
        while max_batches is None or rounds < max_batches:
            entries = list(MirrorOutbox.objects.filter(applied_at__isnull=True, id__gt=cursor).order_by("id")[:batch])
            if not entries:
                break
            cursor = entries[-1].id
            MirrorOutbox.objects.filter(id__in=[e.id for e in entries]).update(attempts=F("attempts") + 1)
            applied, stuck = _apply_batch(entries)
            result.applied += applied
            result.stuck += stuck
            rounds += 1
        redis_succeeded()
    except REDIS_ERRORS as exc:
        redis_failed(exc)
        result.redis_down = True
        return result
    outbox_purge()
    if result.applied or result.stuck:
        logger.info("outbox drain: %s", result.as_dict())
    return result


def mirror_rebuild_locked() -> dict[str, Any]:
    """Rebuild the whole mirror unless another rebuild holds the lock.

    :returns: ``{"rebuilt": bool, "users": int, "edges": int}``; the
        sentinel key is set by ``rebuild_all`` at the end.
    :raises redis.exceptions.RedisError: Redis failed mid-rebuild (the lock
        expires; the next drain starts again).
    """
    from .rebuild import rebuild_all

    client = get_redis()
    key = redis_keys.social_rebuild_lock_key()
    token = uuid.uuid4().hex
    if not client.set(key, token, nx=True, ex=REBUILD_LOCK_SECONDS):
        return {"rebuilt": False, "users": 0, "edges": 0}

    def renew(users: int, edges: int) -> None:
        if client.get(key) == token.encode():
            client.set(key, token, xx=True, ex=REBUILD_LOCK_SECONDS)

    started = timezone.now()
    try:
        stats = rebuild_all(on_progress=renew)
    finally:
        try:
            if client.get(key) == token.encode():
                client.delete(key)
        except REDIS_ERRORS:
            pass  # the lock expires by itself
    logger.warning(
        "mirror rebuilt after data loss: %s users, %s edges in %.1fs",
        stats.users, stats.edges, (timezone.now() - started).total_seconds(),
    )
    return {"rebuilt": True, "users": stats.users, "edges": stats.edges}

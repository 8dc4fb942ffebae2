"""Writes of the demo: forget the Redis mirror before a bulk load, and warm it up again afterwards.

A bulk load bypasses the outbox, so ``mirror_forget`` first deletes the sentinel and watermark
(an interrupted load never leaves a mirror claiming to be current); ``mirror_warm_up`` rebuilds
it while the site serves from the database. Operation: docs/operations.md#make-run-the-embedded-default.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db.models import Max

from core import redis_keys as core_keys
from core.outbox import REBUILD_LOCK_SECONDS, drain, now_ms
from core.redis import REDIS_ERRORS, RedisLock, delete_sentinels, forget_sentinel, get_redis
from feed.rebuild import readers_to_rebuild, rebuild_all_inboxes
from social.rebuild import rebuild_all
from users.models import User

from . import redis_keys
from .datasets import dataset_path
from .selectors import WarmupProgress, database_fingerprint, mirror_state
from .simulate import DEMO_NOTES, HIGGS_ACTIVITY, accounts_by_followers, default_end, has_notes, plan_replay, replay

logger = logging.getLogger(__name__)

# How often (seconds) a warm-up waiting for another rebuild's lock looks again.
LOCK_POLL_SECONDS = 1.0

# What a warm-up is doing, as the pages' banner says it ("Warming up: <stage>, 40% done").
STAGE_WAITING = "waiting for another rebuild of the Redis mirror"
STAGE_NOTES = "replaying the Higgs activity as notes"
STAGE_OUTBOXES = "building the authors' outboxes in Redis"
STAGE_INBOXES = "building the readers' inboxes in Redis"
STAGE_GRAPH = "building the follow graph in Redis"
STAGE_OUTBOX_ENTRIES = "applying pending outbox entries to Redis"
STAGE_FAILED = "failed"


@dataclass
class WarmupResult:
    """What ``mirror_warm_up`` did: ``notes`` replayed, ``rebuilt`` the whole mirror, ``applied``
    pending outbox entries, in ``seconds``."""

    notes: int = 0
    rebuilt: bool = False
    applied: int = 0
    seconds: float = 0.0


def mirror_forget() -> None:
    """Delete the mirror's sentinel and the demo's watermark: readers use the database until a
    warm-up (``mirror_warm_up``) has rebuilt the mirror from it.

    :raises: ``REDIS_ERRORS`` when Redis is unreachable.
    """
    client = get_redis()
    delete_sentinels(client)
    client.delete(redis_keys.watermark_key())


class _Progress:
    """Writes a warm-up's progress to its key (renewing its expiry) and hands it to a callback."""

    def __init__(self, on_progress: Callable[[WarmupProgress], None] | None) -> None:
        self.client = get_redis()
        self.on_progress = on_progress
        self.started_ms = now_ms()
        self.stage = ""
        self.done = 0
        self.total = 0

    def start(self, stage: str, total: int) -> None:
        self.stage, self.done, self.total = stage, 0, total
        self._write()

    def add(self, done: int) -> None:
        self.done += done
        self._write()

    def _write(self) -> None:
        key = redis_keys.warmup_key()
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(key, mapping={"stage": self.stage, "done": self.done, "total": self.total, "started_ms": self.started_ms})
        pipe.hdel(key, "error")
        pipe.expire(key, redis_keys.WARMUP_TTL_SECONDS)
        pipe.execute()
        if self.on_progress is not None:
            self.on_progress(WarmupProgress(stage=self.stage, done=self.done, total=self.total))

    def fail(self, error: str) -> None:
        """Mark the warm-up failed, with ``error``, until the next one (quietly: Redis may be what failed)."""
        key = redis_keys.warmup_key()
        try:
            pipe = self.client.pipeline(transaction=True)
            pipe.hset(key, mapping={"stage": STAGE_FAILED, "error": error[:500]})
            pipe.persist(key)
            pipe.execute()
        except REDIS_ERRORS:
            pass

    def finish(self) -> None:
        """No warm-up runs any more (quietly, as ``fail``)."""
        try:
            self.client.delete(redis_keys.warmup_key())
        except REDIS_ERRORS:
            pass


def _acquire(lock: RedisLock, progress: _Progress) -> None:
    """Take the rebuild lock, waiting while another rebuild (a drain's) holds it; a holder that
    died leaves a lock that expires within ``REBUILD_LOCK_SECONDS``."""
    while not lock.acquire():
        if progress.stage != STAGE_WAITING:
            progress.start(STAGE_WAITING, 0)
        else:
            progress.add(0)
        time.sleep(LOCK_POLL_SECONDS)


def _replay_notes(progress: _Progress) -> int:
    """Replay the Higgs activity as about ``DEMO_NOTES`` notes (``datatools.simulate``), the mirror
    forgotten first. Returns the notes created; raises ``DatasetError`` without the activity file."""
    path = dataset_path(HIGGS_ACTIVITY)
    progress.start(STAGE_NOTES, 0)
    mirror_forget()
    plan = plan_replay(path, notes=DEMO_NOTES, accounts=accounts_by_followers(), end=default_end())
    progress.start(STAGE_NOTES, len(plan.rows))
    return replay(plan, on_progress=progress.add)


def mirror_warm_up(*, replay_notes: bool = False, on_progress: Callable[[WarmupProgress], None] | None = None) -> WarmupResult:
    """Bring the demo's data and the Redis mirror up to date, for a site that serves meanwhile.

    Replays the notes if there are none; when the mirror is missing or stale (``MirrorState``)
    rebuilds feeds and graph under the rebuild lock, sentinel last; drains the outbox; sets the
    watermark; compacts the embedded server's AOF. Progress is in ``ff:demo:warmup`` (``failed``
    with the error on failure).

    :param replay_notes: replay the demo's notes when there are none.
    :param on_progress: called with a ``WarmupProgress`` after each batch.
    :returns: a ``WarmupResult``.
    :raises: ``REDIS_ERRORS``, database errors, ``RedisLockLost`` (the lock expired under it)
        and ``DatasetError`` (the activity file is missing and could not be fetched).
    """
    started = time.perf_counter()
    result = WarmupResult()
    client = get_redis()
    progress = _Progress(on_progress)
    try:
        if replay_notes and not has_notes():
            result.notes = _replay_notes(progress)
        fingerprint = database_fingerprint()
        state = mirror_state(client)
        if state.needs_rebuild:
            lock = RedisLock(client=client, key=core_keys.rebuild_lock_key(), milliseconds=REBUILD_LOCK_SECONDS * 1000)
            _acquire(lock, progress)
            try:
                mirror_forget()
                top = User.objects.aggregate(top=Max("pk"))["top"] or 0
                readers = readers_to_rebuild().count()

                def on_feed(kind: str, count: int) -> None:
                    lock.renew()
                    if kind == "inboxes" and progress.stage != STAGE_INBOXES:
                        progress.start(STAGE_INBOXES, readers)
                    progress.add(count)

                progress.start(STAGE_OUTBOXES, top)
                rebuild_all_inboxes(on_progress=on_feed)

                def on_graph(users: int, edges: int) -> None:
                    lock.renew()
                    progress.add(users)

                # rebuild_all counts the accounts found in each id range: all of them in the end.
                progress.start(STAGE_GRAPH, User.objects.count())
                # Last: it sets the sentinel, and with it pages read the mirror.
                rebuild_all(on_progress=on_graph)
                result.rebuilt = True
            finally:
                lock.release()
            forget_sentinel()
        pending = mirror_state(client).pending_entries
        if pending:
            progress.start(STAGE_OUTBOX_ENTRIES, pending)
            # No task is working on entries left from before this start: none is left to one.
            drained = drain(task_grace_seconds=0)
            result.applied = drained.applied
            progress.add(drained.applied)
        client.set(redis_keys.watermark_key(), fingerprint)
        if settings.REDIS_EMBEDDED and result.rebuilt:
            client.bgrewriteaof()
        progress.finish()
    except Exception as exc:
        progress.fail(f"{type(exc).__name__}: {exc}")
        raise
    except BaseException:
        # Interrupted (Ctrl-C, a stop): no banner claims a warm-up that no longer runs.
        progress.finish()
        raise
    result.seconds = time.perf_counter() - started
    logger.info("mirror warmed up: %s", result)
    return result

"""The one transactional outbox: every side effect of a committed change goes through here.

``record`` writes an ``OutboxEntry`` in the change's transaction; it is applied after commit
(inline or by ``core.tasks.outbox_apply``) and by ``drain`` while pending. Handlers must be
idempotent. Design: docs/architecture.md#the-outbox-and-its-kinds, #consistency-under-faults.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import redis
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import InterfaceError, close_old_connections, connection, transaction
from django.db import OperationalError as DatabaseOperationalError
from django.db.models import F, Q
from django.db.models.functions import Greatest
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from . import redis_keys
from .cluster import pipeline
from .errors import EntryNotApplied
from .models import OutboxEntry, RedisWatch
from .parsing import id_or_none
from .redis import (
    REDIS_ERRORS,
    RedisLock,
    delete_sentinels,
    get_redis,
    is_data_error,
    redis_available,
    redis_failed,
    redis_succeeded,
    refresh_topology,
    sentinel_keys,
    watched_servers,
    write_sentinels,
)
from .replica import primary_reads
from .sender import sender_for

logger = logging.getLogger(__name__)

Handler = Callable[[Sequence[OutboxEntry]], None]
Rebuilder = Callable[[Callable[[], None]], None]

# A rebuild renews its lock after every step; this long without a renewal
# means its worker died (seconds).
REBUILD_LOCK_SECONDS = 120


@dataclass(frozen=True)
class Kind:
    """A registered kind: ``name``, handler, ``inline`` (else the task), ``stage`` (lower first),
    ``alone`` (own message), ``provisional`` (first application leaves it pending), ``long``.
    """

    name: str
    apply: Handler
    inline: bool = False
    stage: int = 0
    alone: bool = False
    provisional: Handler | None = None
    long: bool = False


@dataclass(frozen=True)
class RebuildStep:
    """A registered rebuilder: called with a ``renew`` callback it must call every few seconds."""

    name: str
    rebuild: Rebuilder
    order: int


_kinds: dict[str, Kind] = {}
_rebuilders: dict[str, RebuildStep] = {}


def register(
    name: str,
    *,
    apply: Handler,
    inline: bool = False,
    stage: int = 0,
    alone: bool = False,
    provisional: Handler | None = None,
    long: bool = False,
) -> Kind:
    """Register the handler of entries of kind ``name`` (at import of the app's outbox module).

    :returns: the ``Kind`` that ``record`` takes.
    :raises ValueError: ``name`` is registered already with another handler, or longer than 40.
    """
    if len(name) > 40:
        raise ValueError(f"outbox kind {name!r} is longer than 40 characters")
    kind = Kind(name=name, apply=apply, inline=inline, stage=stage, alone=alone, provisional=provisional, long=long)
    known = _kinds.get(name)
    if known is not None and known.apply is not apply:
        raise ValueError(f"outbox kind {name!r} is registered twice")
    _kinds[name] = kind
    return kind


def register_rebuild(name: str, *, rebuild: Rebuilder, order: int) -> None:
    """Register a rebuilder that ``rebuild_locked`` runs (lowest ``order`` first) after Redis lost its data."""
    _rebuilders[name] = RebuildStep(name=name, rebuild=rebuild, order=order)


def kind_names() -> list[str]:
    """The names of every registered kind."""
    return sorted(_kinds)


def kind_named(name: str) -> Kind:
    """The registered ``Kind`` called ``name``.

    :raises KeyError: no such kind is registered.
    """
    return _kinds[name]


# --- recording --------------------------------------------------------------


class NoHint:
    """The type of ``NO_HINT``: ``record`` was given no hint."""


NO_HINT = NoHint()

_batches: threading.local = threading.local()


@contextlib.contextmanager
def batched() -> Iterator[None]:
    """Inside a transaction: insert the entries ``record`` makes in this block in one multi-row
    INSERT at its end, and apply each group after commit in one call. Nested blocks join the
    outermost; an exception discards the entries.

    :raises django.db.DatabaseError: the INSERT failed (raised at the end of the block).
    """
    if getattr(_batches, "entries", None) is not None:
        yield
        return
    _batches.entries = []
    try:
        yield
        entries: list[tuple[OutboxEntry, bool]] = _batches.entries
    finally:
        _batches.entries = None
    if entries:
        _insert([entry for entry, _ in entries])
        sent = [entry for entry, now in entries if not now]
        # When the batch also sends entries to the task, the request applies
        # its inline entries without marking them (no second commit in the
        # request): the task's handlers apply and mark what they depend on
        # first (``apply_pending_before``), and the drain anything left.
        _schedule([entry for entry, now in entries if now], inline=True, mark=not sent)
        _schedule(sent, inline=False)


def _insert(entries: list[OutboxEntry]) -> None:
    # One multi-row INSERT ... RETURNING id (MariaDB and SQLite answer in row
    # order), so the entries carry their pks for the after-commit work. Raw
    # SQL: every follow and note runs it, and bulk_create's compilation cost
    # more than the statement.
    if not connection.features.can_return_rows_from_bulk_insert:
        OutboxEntry.objects.bulk_create(entries)
        return
    table = OutboxEntry._meta.db_table
    rows = ", ".join(["(%s, %s, %s, %s, 0, '')"] * len(entries))
    params: list[Any] = []
    for entry in entries:
        params += [entry.kind, entry.subject_id, entry.object_id, connection.ops.adapt_datetimefield_value(entry.created_at)]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (kind, subject_id, object_id, created_at, attempts, last_error) VALUES {rows} RETURNING id",
            params,
        )
        ids = [row[0] for row in cursor.fetchall()]
    for entry, pk in zip(entries, ids, strict=True):
        entry.pk = pk
        entry._state.adding = False
        entry._state.db = connection.alias


def _schedule(entries: list[OutboxEntry], *, inline: bool, mark: bool = True) -> None:
    if not entries:
        return
    if inline:
        transaction.on_commit(partial(apply_after_commit, entries, mark=mark))
        return
    alone = any(_kinds[entry.kind].alone for entry in entries if entry.kind in _kinds)
    long = any(_kinds[entry.kind].long for entry in entries if entry.kind in _kinds)
    transaction.on_commit(partial(send_after_commit, [e.pk for e in entries], alone=alone or long, long=long))


def record(
    kind: Kind,
    *,
    subject_id: int,
    object_id: int | None = None,
    inline: bool | None = None,
    hint: int | NoHint | None = NO_HINT,
) -> OutboxEntry:
    """Record an entry of ``kind`` in the current transaction; apply it after commit.

    :param inline: override the kind's choice: True applies it in this
        process right after commit, False sends it to the Celery task.
    :param hint: the entry's ``hint`` (what the transaction knew; handlers verify it).
    :returns: the entry; saved at once, or inside a ``batched`` block when the block ends.
    :raises django.db.DatabaseError: the insert failed (the caller's
        transaction then fails with it, so no change commits without its entry).
    """
    entry = OutboxEntry(kind=kind.name, subject_id=int(subject_id), object_id=object_id)
    if not isinstance(hint, NoHint):
        entry.hinted, entry.hint = True, hint
    now = kind.inline if inline is None else inline
    pending: list[tuple[OutboxEntry, bool]] | None = getattr(_batches, "entries", None)
    if pending is not None:
        pending.append((entry, now))
        return entry
    entry.save()
    _schedule([entry], inline=now)
    return entry


# Entries per INSERT and per task message when many are recorded at once.
RECORD_BATCH = 1000


def record_many(kind: Kind, pairs: Sequence[tuple[int, int | None]]) -> int:
    """Record one entry of ``kind`` per ``(subject_id, object_id)``, in INSERTs and messages of ``RECORD_BATCH``.

    :returns: how many entries were recorded.
    :raises django.db.DatabaseError: as ``record``.
    """
    for start in range(0, len(pairs), RECORD_BATCH):
        rows = [OutboxEntry(kind=kind.name, subject_id=int(s), object_id=o) for s, o in pairs[start : start + RECORD_BATCH]]
        _insert(rows)
        _schedule(rows, inline=kind.inline)
    return len(pairs)


# primary_reads: a handler writes what it reads, and a page's on_commit (a
# catch-up) runs here inside the page's replica reads (core.replica).
@primary_reads()
def apply_after_commit(entries: Sequence[OutboxEntry], *, mark: bool = True) -> None:
    """Apply the just-committed ``entries`` in this process, best effort (``on_commit`` of inline kinds);
    nothing while the breaker is open; what fails stays pending for the drain.

    :param mark: False leaves them pending after applying them (another handler confirms them).
    """
    if not redis_available():
        return
    try:
        apply_entries(list(entries), mark=mark)
    except REDIS_ERRORS as exc:
        redis_failed(exc)


def send_after_commit(entry_ids: Sequence[int], *, alone: bool = False, long: bool = False) -> None:
    """Have ``outbox_apply`` sent for pending entries (``on_commit`` of task kinds) via ``core.sender``,
    or at once when eager, ``alone`` or ``OUTBOX_SEND_COALESCE_SECONDS`` is 0; a refused message is logged.
    """
    from .tasks import outbox_apply  # the task module imports this one

    window = float(settings.OUTBOX_SEND_COALESCE_SECONDS)
    if alone or window <= 0 or outbox_apply.app.conf.task_always_eager:  # type: ignore[attr-defined]
        _send(list(entry_ids), long=long)
    else:
        sender_for(_send, window_seconds=window).put(entry_ids)


@primary_reads()  # an eager task (CELERY_TASK_ALWAYS_EAGER) runs inside apply_async
def _send(entry_ids: list[int], *, long: bool = False) -> None:
    from .tasks import outbox_apply  # the task module imports this one

    limits: dict[str, int] = {}
    if long:
        limits = {"soft_time_limit": settings.LONG_TASK_TIME_LIMIT, "time_limit": settings.LONG_TASK_TIME_LIMIT + 60}
    try:
        # Transient: the committed entry is the durable copy and the message only wakes a worker
        # (a lost one leaves the entry to the drain), so the broker keeps it in memory, not on disk.
        outbox_apply.apply_async(kwargs={"entry_ids": entry_ids}, delivery_mode=TRANSIENT, **limits)
    except BrokerError as exc:
        logger.warning("broker refused outbox entries %s (the drain applies them): %r", entry_ids, exc)


# AMQP delivery mode 1: the broker does not write the message to disk.
TRANSIENT = 1


# --- applying ---------------------------------------------------------------


@dataclass
class ApplyResult:
    """``applied`` entries marked applied; ``stuck`` left pending (``EntryNotApplied``, a failure, an unknown kind)."""

    applied: int = 0
    stuck: int = 0


def _mark_applied(entries: Sequence[OutboxEntry]) -> None:
    OutboxEntry.objects.filter(pk__in=[e.pk for e in entries]).update(applied_at=timezone.now(), last_error="")


# Failures that say a service is down, not that an entry is bad: they stop
# the application (the entries stay pending for the next drain).
_SERVICE_ERRORS: tuple[type[BaseException], ...] = (
    *REDIS_ERRORS,
    DatabaseOperationalError,
    InterfaceError,
    SoftTimeLimitExceeded,
)


def _apply_kind(kind: Kind, entries: list[OutboxEntry], result: ApplyResult, mark: bool) -> None:
    # Entries left pending are confirmed by a later application: the kind's cheaper first one.
    handler = kind.apply if mark else (kind.provisional or kind.apply)
    try:
        handler(entries)
    except Exception as exc:  # EntryNotApplied, a handler that fails on one entry, or a service down
        # A data error (a key of another type) is one entry's, not the service's: Redis answers.
        if isinstance(exc, _SERVICE_ERRORS) and not is_data_error(exc):
            raise
        if len(entries) > 1:
            for entry in entries:
                _apply_kind(kind, [entry], result, mark)
            return
        error = str(exc)
        if not isinstance(exc, EntryNotApplied):
            # One entry its handler cannot take (a bug, a row gone in a way the
            # handler did not foresee) must not hold up every entry after it:
            # it stays pending with its error, and each drain tries it again.
            logger.exception("outbox entry %s (%s) failed; it stays pending", entries[0].pk, kind.name)
            # redis-py's repr of its errors names only their kind.
            error = f"{type(exc).__name__}: {exc}" if is_data_error(exc) else repr(exc)
        result.stuck += 1
        # At least one attempt (the drain counts its own): the drain then
        # takes it up at once, not after the task's grace.
        OutboxEntry.objects.filter(pk=entries[0].pk).update(attempts=Greatest(F("attempts"), 1), last_error=error[:500])
        return
    if mark:
        _mark_applied(entries)
    result.applied += len(entries)


@primary_reads()
def apply_entries(entries: Sequence[OutboxEntry], *, mark: bool = True) -> ApplyResult:
    """Apply ``entries`` (any kinds, lower stages first) and mark the applied ones.

    :param mark: False applies them (``provisional`` handlers where they exist) and leaves them pending.
    :returns: an ``ApplyResult``.
    :raises: ``REDIS_ERRORS`` from a handler propagate (the remaining entries stay pending).
    """
    result = ApplyResult()
    by_kind: dict[str, list[OutboxEntry]] = defaultdict(list)
    for entry in entries:
        by_kind[entry.kind].append(entry)
    unknown = [name for name in by_kind if name not in _kinds]
    for name in unknown:
        logger.error("outbox entries of unknown kind %r stay pending: %s", name, [e.pk for e in by_kind[name]])
        OutboxEntry.objects.filter(pk__in=[e.pk for e in by_kind.pop(name)]).update(last_error="unknown kind")
        result.stuck += 1
    for name in sorted(by_kind, key=lambda n: (_kinds[n].stage, n)):
        _apply_kind(_kinds[name], by_kind[name], result, mark)
    return result


def apply_pending_before(entry: OutboxEntry, kind: str, **where: int | None) -> None:
    """Apply and mark the pending entries of ``kind`` matching ``where`` recorded before ``entry``
    (what ``entry``'s handler depends on: the follow mirror before a feed job).

    :raises EntryNotApplied: one of them could not be applied (``entry`` must wait).
    :raises: ``REDIS_ERRORS``.
    """
    pending = list(OutboxEntry.objects.filter(kind=kind, applied_at__isnull=True, id__lt=entry.pk, **where))
    if pending and apply_entries(pending).stuck:
        raise EntryNotApplied(f"{kind} entries {[e.pk for e in pending]} before {entry.pk} are not applied yet")


# --- the drain --------------------------------------------------------------


@dataclass
class DrainResult:
    """One drain's figures: ``applied``, ``stuck`` (left pending), ``rebuilt`` (the mirror),
    ``redis_down``, ``reapplied`` (marked pending again after a rollback).
    """

    applied: int = 0
    stuck: int = 0
    rebuilt: bool = False
    redis_down: bool = False
    reapplied: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The figures as a dict (the task's return value)."""
        return asdict(self)


def now_ms() -> int:
    """The current time in unix milliseconds (heartbeats)."""
    return int(timezone.now().timestamp() * 1000)


# Entries applied this long before the heartbeat a restored Redis holds
# are applied again too: the heartbeat and the applies come from different
# processes' clocks, and the heartbeat is written once per drain (seconds).
ROLLBACK_MARGIN_SECONDS = 30


@dataclass(frozen=True)
class Rollback:
    """Redis came back with data as old as ``to_ms``: ``reapplied`` entries marked pending again;
    ``beyond_retention`` when older than the outbox keeps (a rebuild is needed)."""

    to_ms: int
    reapplied: int
    beyond_retention: bool


def watch_redis() -> Rollback | None:
    """Notice a Redis that restarted with older data (``run_id`` changed) and mark entries applied since
    its heartbeat (less ``ROLLBACK_MARGIN_SECONDS``) pending again; write this drain's heartbeat.

    :returns: a ``Rollback`` after a restart, else None.
    :raises: ``REDIS_ERRORS``.
    """
    client = get_redis()
    rollbacks = [
        found
        for name, server, sentinel in watched_servers(client)
        if (found := _watch_server(name, server, sentinel)) is not None
    ]
    if not rollbacks:
        return None
    rollback = Rollback(
        to_ms=min(found.to_ms for found in rollbacks),
        reapplied=sum(found.reapplied for found in rollbacks),
        beyond_retention=any(found.beyond_retention for found in rollbacks),
    )
    if rollback.beyond_retention:
        # Older than the outbox keeps: only a rebuild can bring the mirror back.
        delete_sentinels(client)
    return rollback


def _watch_server(node: str, client: redis.Redis, sentinel: str) -> Rollback | None:
    run_id = str(client.info("server").get("run_id", ""))
    stored = client.get(sentinel)
    beat = now_ms()
    rollback: Rollback | None = None
    with transaction.atomic():
        watch = RedisWatch.objects.select_for_update().filter(node=node).first()
        if watch is None:
            watch = RedisWatch(node=node, run_id=run_id)
        elif watch.run_id != run_id and stored is not None:
            # A sentinel without a heartbeat: as old as can be.
            restored = id_or_none(stored if isinstance(stored, bytes) else str(stored)) or 0
            since = datetime.fromtimestamp(restored / 1000, tz=UTC) - timedelta(seconds=ROLLBACK_MARGIN_SECONDS)
            again = OutboxEntry.objects.filter(applied_at__gte=since)
            reapplied = again.update(
                applied_at=None, attempts=F("attempts") + 1, last_error="applied again after a Redis rollback"
            )
            retention = timedelta(seconds=int(settings.OUTBOX_RETENTION_SECONDS))
            rollback = Rollback(to_ms=restored, reapplied=reapplied, beyond_retention=since < timezone.now() - retention)
            watch.rollbacks += 1
            watch.last_rollback_at = timezone.now()
            watch.last_rollback_to_ms = restored
            watch.last_reapplied = reapplied
            logger.warning(
                "Redis (%s) restarted with data as of %s: %s entries applied again",
                node,
                datetime.fromtimestamp(restored / 1000, tz=UTC).isoformat(timespec="seconds"),
                reapplied,
            )
        watch.run_id = run_id
        if stored is not None:
            # XX: a missing sentinel (data lost) stays missing until the rebuild.
            client.set(sentinel, beat, xx=True)
            watch.heartbeat_ms = beat
        watch.checked_at = timezone.now()
        watch.save()
    return rollback


def needs_rebuild() -> bool:
    """Whether Redis lost the mirror (sentinel missing) and no rebuild holds the lock.

    :raises: ``REDIS_ERRORS`` when Redis is unreachable.
    """
    client = get_redis()
    pipe = pipeline(client)
    pipe.exists(redis_keys.rebuild_lock_key())
    sentinels = sentinel_keys(client)
    for key in sentinels:
        pipe.exists(key)
    locked, *present = pipe.execute()
    return not all(present) and not locked


@primary_reads()
def drain(
    *,
    batch: int | None = None,
    max_batches: int | None = None,
    start_rebuild: bool = True,
    task_grace_seconds: float | None = None,
) -> DrainResult:
    """Rebuild the mirror if Redis lost it, then apply every pending entry by id (keyset: one that
    fails is skipped, not retried in a loop); purge old applied ones.

    :param batch: entries per round; default ``SOCIAL_OUTBOX_DRAIN_BATCH``.
    :param max_batches: stop after this many rounds (None: to the end).
    :param start_rebuild: rebuild the mirror (``rebuild_locked``) when the sentinel is missing.
    :param task_grace_seconds: task kinds younger than this are left to their task;
        default ``OUTBOX_TASK_GRACE_SECONDS``.
    :returns: a ``DrainResult``; Redis errors are caught (``redis_down``).
    """
    result = DrainResult()
    size = batch or int(settings.SOCIAL_OUTBOX_DRAIN_BATCH)
    grace = float(settings.OUTBOX_TASK_GRACE_SECONDS) if task_grace_seconds is None else task_grace_seconds
    young = Q(
        created_at__gt=timezone.now() - timedelta(seconds=grace),
        attempts=0,
        kind__in=[k.name for k in _kinds.values() if not k.inline],
    )
    try:
        rollback = watch_redis()
        if rollback is not None:
            result.reapplied = rollback.reapplied
        if start_rebuild and needs_rebuild():
            # Here, not in a task of its own: behind a backlog of messages a
            # queued rebuild would wait for all of them, reads on the database.
            logger.warning("mirror sentinel missing: Redis lost its data; rebuilding, reads use the database meanwhile")
            result.rebuilt = rebuild_locked().rebuilt
        cursor = 0
        rounds = 0
        while max_batches is None or rounds < max_batches:
            entries = list(
                OutboxEntry.objects.filter(applied_at__isnull=True, id__gt=cursor).exclude(young).order_by("id")[:size]
            )
            if not entries:
                break
            cursor = entries[-1].pk
            OutboxEntry.objects.filter(pk__in=[e.pk for e in entries]).update(attempts=F("attempts") + 1)
            applied = apply_entries(entries)
            result.applied += applied.applied
            result.stuck += applied.stuck
            rounds += 1
        redis_succeeded()
    except REDIS_ERRORS as exc:
        redis_failed(exc)
        refresh_topology()  # after a failover the next drain uses the new slot map
        result.redis_down = True
        return result
    purge()
    if result.applied or result.stuck:
        logger.info("outbox drain: %s", result.as_dict())
    return result


class BackgroundDrain:
    """``drain`` every ``interval`` seconds (default ``SOCIAL_OUTBOX_DRAIN_SECONDS``) in a daemon thread,
    for a process serving without beat (``run_demo``); a failed round is logged.

    :param paused: called before each round; True skips it.
    :param start_rebuild: passed to ``drain``.
    """

    def __init__(
        self, *, interval: float | None = None, paused: Callable[[], bool] = lambda: False, start_rebuild: bool = True
    ) -> None:
        self.interval = float(settings.SOCIAL_OUTBOX_DRAIN_SECONDS) if interval is None else interval
        self.paused = paused
        self.start_rebuild = start_rebuild
        self.rounds = 0
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="outbox-drain", daemon=True)

    def start(self) -> BackgroundDrain:
        """Start the thread (its first round comes after one interval); returns ``self``."""
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Ask the thread to end and wait up to ``timeout`` seconds for its current round."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        try:
            while not self._stopping.wait(self.interval):
                if self.paused():
                    continue
                try:
                    drain(start_rebuild=self.start_rebuild)
                except Exception:
                    logger.exception("background outbox drain failed; the next round tries again")
                finally:
                    self.rounds += 1
                    close_old_connections()
        finally:
            connection.close()


def purge(*, older_than_seconds: int | None = None) -> int:
    """Delete applied entries older than ``older_than_seconds`` (default ``OUTBOX_RETENTION_SECONDS``).

    :returns: how many were deleted.
    """
    seconds = int(settings.OUTBOX_RETENTION_SECONDS) if older_than_seconds is None else older_than_seconds
    cutoff = timezone.now() - timedelta(seconds=seconds)
    deleted, _ = OutboxEntry.objects.filter(applied_at__isnull=False, applied_at__lt=cutoff).delete()
    return deleted


# --- the rebuild after data loss -----------------------------------------------


@dataclass
class RebuildResult:
    """``rebuilt`` False when another rebuild held the lock; ``steps`` the rebuilders run."""

    rebuilt: bool
    steps: list[str] = field(default_factory=list)


@primary_reads()
def rebuild_locked() -> RebuildResult:
    """Run every registered rebuilder under one Redis lock (``SET NX EX`` with a token, renewed by
    ``renew``, expiring after ``REBUILD_LOCK_SECONDS``), then set the sentinel.

    :returns: a ``RebuildResult``.
    :raises: ``REDIS_ERRORS`` when Redis failed mid-rebuild (the lock expires).
    """
    client = get_redis()
    lock = RedisLock(client=client, key=redis_keys.rebuild_lock_key(), milliseconds=REBUILD_LOCK_SECONDS * 1000)
    if not lock.acquire():
        return RebuildResult(rebuilt=False)
    done: list[str] = []
    try:
        for step in sorted(_rebuilders.values(), key=lambda s: s.order):
            step.rebuild(lock.renew)
            done.append(step.name)
        write_sentinels(client, now_ms())
    finally:
        try:
            lock.release()
        except REDIS_ERRORS:
            pass  # the lock expires by itself
    logger.warning("mirror rebuilt after data loss: %s", done)
    return RebuildResult(rebuilt=True, steps=done)

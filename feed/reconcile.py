"""Inbox reconcile: compare each maintained inbox with the feed the database computes, and repair.

Readers are walked in id order, ``batch`` at a time (one pipeline, one window query each);
a reader differs by ``notes_missing``, ``notes_extra`` or ``scores_wrong`` and is repaired by
``feed.rebuild.inbox_rebuild``. A note published between the two reads can show as drift; its
rebuild is harmless. Design: docs/architecture.md#notes-and-the-home-feed (Inbox reconcile).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass

import redis
from django.db.models import Count

from core.cluster import pipeline
from core.parsing import id_or_none
from core.redis import get_redis
from core.replica import primary_reads
from core.runs import recorded_run
from users.models import User

from . import redis_keys
from .delivery import active_cutoff
from .models import FEED_VISIBILITIES, AuthorNoteCount, InboxReconcileRun, List, Note, to_ms
from .note_counts import count_recount
from .rebuild import (
    database_inboxes,
    database_lists,
    inboxes_rebuild,
    list_timeline_truth,
    lists_rebuild,
    pull_authors,
    redis_lists,
)

logger = logging.getLogger(__name__)

# Readers per batch (one pipeline and one truth query each).
BATCH = 500


@dataclass
class InboxReport:
    """Figures of one inbox reconcile: ``readers_checked`` (maintained inboxes compared),
    ``readers_drifted``, ``notes_missing``, ``notes_extra``, ``scores_wrong``,
    ``readers_repaired`` (0 in a dry run), ``lists_drifted`` (readers whose list keys differed,
    rewritten unless a dry run) and the checkpoint ``last_user_id``."""

    readers_checked: int = 0
    readers_drifted: int = 0
    notes_missing: int = 0
    notes_extra: int = 0
    scores_wrong: int = 0
    readers_repaired: int = 0
    lists_drifted: int = 0
    last_user_id: int = 0

    def as_dict(self) -> dict[str, int]:
        """The figures as ``{name: int}``."""
        return asdict(self)

    @property
    def drift(self) -> int:
        """``notes_missing + notes_extra + scores_wrong``."""
        return self.notes_missing + self.notes_extra + self.scores_wrong


@dataclass(frozen=True)
class HeldTimeline:
    """A kept sorted set as Redis holds it: ``entries`` ``{member: score}`` and its ``floor`` (the
    highest score trimmed at the cap, -1: none)."""

    entries: dict[bytes, float]
    floor: int


def held_timelines(client: redis.Redis, key_sets: Sequence[tuple[str, str, str, str]]) -> list[HeldTimeline | None]:
    """Each kept sorted set as Redis holds it, from its ``(synced marker, build lock, set, floor)``
    keys, or None when it is not maintained (not synced, or being built right now): one pipeline."""
    pipe = pipeline(client)
    for synced_key, build_key, set_key, floor_key in key_sets:
        pipe.exists(synced_key)
        pipe.exists(build_key)
        pipe.zrange(set_key, 0, -1, withscores=True)
        pipe.get(floor_key)
    replies = pipe.execute()
    found: list[HeldTimeline | None] = []
    for index in range(len(key_sets)):
        synced, building, rows, floor = replies[4 * index : 4 * index + 4]
        found.append(HeldTimeline(dict(rows), int(floor or -1)) if synced and not building else None)
    return found


def redis_inboxes(client: redis.Redis, reader_ids: Sequence[int]) -> dict[int, HeldTimeline | None]:
    """Each reader's inbox as Redis holds it, or None when it is not maintained (``held_timelines``)."""
    key_sets = [
        (
            redis_keys.inbox_synced_key(reader_id),
            redis_keys.inbox_build_key(reader_id),
            redis_keys.inbox_key(reader_id),
            redis_keys.inbox_floor_key(reader_id),
        )
        for reader_id in reader_ids
    ]
    return dict(zip(reader_ids, held_timelines(client, key_sets)))


def _pulled_notes(
    held: Sequence[HeldTimeline], truths: Sequence[dict[int, int]], pulled: set[int], authors: Sequence[Collection[int] | None]
) -> set[int]:
    """The ids among what each of ``held`` has beyond its truth that a pulled author published at that
    very score and, for a list (``authors`` not None), a member of it: a pulled author's notes
    delivered before it was pulled stay until the next rebuild, harmless (reads merge its outbox).
    One query, none when nothing is extra."""
    extra: dict[int, list[tuple[float, Collection[int] | None]]] = {}
    for timeline, truth, shown in zip(held, truths, authors):
        for member, score in timeline.entries.items():
            note_id = id_or_none(member)
            if note_id is not None and note_id not in truth:
                extra.setdefault(note_id, []).append((score, shown))
    if not extra or not pulled:
        return set()
    rows = Note.objects.filter(pk__in=sorted(extra), author_id__in=sorted(pulled)).values_list("pk", "author_id", "created_at")
    return {
        note_id
        for note_id, author_id, created_at in rows
        if all(score == to_ms(created_at) and (shown is None or author_id in shown) for score, shown in extra[note_id])
    }


def _compare(timeline: HeldTimeline, truth: dict[int, int], report: InboxReport, pulled_notes: set[int]) -> bool:
    """Add the differences of one kept sorted set from its ``truth`` to ``report``, above its floor
    (or its lowest score, if lower: reads trust the set down to that); returns whether it differs.

    At and below the floor the two may differ with nothing wrong (reads take that part from the
    database): the cap trims the lower member of equal times where the truth keeps the lower id,
    and a note deleted from a full set leaves the truth one note below the floor. A member that
    is no note id is extra wherever it is.
    """
    before = report.drift
    floor = min([timeline.floor, *timeline.entries.values()])
    held: dict[int | None, float] = {}
    for member, score in timeline.entries.items():
        note_id = id_or_none(member)
        if note_id is None:
            report.notes_extra += 1
        elif score > floor and note_id not in pulled_notes:
            held[note_id] = score
    for note_id, score in truth.items():
        if score <= floor:
            continue
        if note_id not in held:
            report.notes_missing += 1
        elif held[note_id] != score:
            report.scores_wrong += 1
    report.notes_extra += sum(1 for note_id in held if note_id not in truth)
    return report.drift > before


@primary_reads()
def reconcile_inboxes(
    *,
    repair: bool = True,
    user_id: int | None = None,
    sample: float = 1.0,
    start_after: int = 0,
    batch: int = BATCH,
    seed: int | None = None,
    on_batch: Callable[[InboxReport], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> InboxReport:
    """Compare the maintained inboxes and the list keys of active readers (or one ``user_id``, or a
    ``sample``) with the database and rebuild those that differ unless told not to.

    :param repair: False for a dry run.
    :param sample: fraction 0 < f <= 1 of readers, chosen at random per id.
    :param start_after: walk reader ids above this one (resume).
    :param on_batch: called with the running report after each batch (checkpoint).
    :param on_progress: called with the number of readers walked after each batch.
    :returns: an ``InboxReport``.
    :raises ValueError: ``sample`` outside (0, 1].
    :raises: ``REDIS_ERRORS``; repaired batches stay repaired.
    """
    if not 0 < sample <= 1:
        raise ValueError("sample must be in (0, 1]")
    client = get_redis()
    rng = random.Random(seed)  # noqa: S311 - a seeded sample of readers, not a secret
    report = InboxReport(last_user_id=start_after)
    pulled = pull_authors(client)
    readers = User.objects.filter(is_active=True, last_seen_at__gte=active_cutoff()).order_by("pk")
    if user_id is not None:
        readers = readers.filter(pk=user_id)
    low = start_after
    while True:
        ids = list(readers.filter(pk__gt=low).values_list("pk", flat=True)[:batch])
        if not ids:
            break
        chosen = [reader_id for reader_id in ids if sample >= 1 or rng.random() < sample]
        inboxes = redis_inboxes(client, chosen)
        checked = {reader_id: inbox for reader_id, inbox in inboxes.items() if inbox is not None}
        found = database_inboxes(list(checked), pulled)
        truths = {reader_id: dict(found[reader_id]) for reader_id in checked}
        pulled_notes = _pulled_notes(list(checked.values()), list(truths.values()), pulled, [None] * len(checked))
        drifted = [reader_id for reader_id, inbox in checked.items() if _compare(inbox, truths[reader_id], report, pulled_notes)]
        report.readers_checked += len(checked)
        report.readers_drifted += len(drifted)
        if repair and drifted:
            rebuilt = inboxes_rebuild(drifted)
            report.readers_repaired += sum(1 for result in rebuilt.values() if not result.busy)
        report.lists_drifted += lists_compare(client, chosen, repair=repair)
        report.last_user_id = low = ids[-1]
        if on_batch is not None:
            on_batch(report)
        if on_progress is not None:
            on_progress(len(ids))
    logger.info("inbox reconcile: %s", report.as_dict())
    return report


FIGURES = (
    "readers_checked",
    "readers_drifted",
    "notes_missing",
    "notes_extra",
    "scores_wrong",
    "readers_repaired",
    "lists_drifted",
)


@primary_reads()
def reconcile_inboxes_run(
    *,
    dry_run: bool = False,
    user_id: int | None = None,
    sample: float = 1.0,
    start_after: int | None = None,
    resume: bool = False,
    batch: int = BATCH,
    on_progress: Callable[[int], None] | None = None,
) -> tuple[InboxReconcileRun, InboxReport]:
    """Run ``reconcile_inboxes`` and record it as an ``InboxReconcileRun`` (checkpointed after every batch).

    :param resume: continue the latest unfinished whole run of the same kind from its checkpoint.
    :returns: ``(run, report)``; ``run.finished_at`` is set on success.
    :raises: as ``reconcile_inboxes``; the run keeps its checkpoint and the error text.
    """
    return recorded_run(
        InboxReconcileRun,
        FIGURES,
        lambda begin, on_batch: reconcile_inboxes(
            repair=not dry_run,
            user_id=user_id,
            sample=sample,
            start_after=begin,
            batch=batch,
            on_batch=on_batch,
            on_progress=on_progress,
        ),
        dry_run=dry_run,
        user_id=user_id,
        start_after=start_after,
        resume=resume,
        fields={"sample": sample},
    )


def inboxes_drift(*, repair: bool) -> int:
    """The table's reconcile of the inboxes: every active reader's inbox against the database.

    :returns: notes missing, extra or with a wrong score (readers rebuilt unless ``repair`` is False).
    """
    return reconcile_inboxes(repair=repair).drift


def note_counts_drift(*, repair: bool, batch: int = 1000) -> int:
    """Every author's ``AuthorNoteCount`` against a count of its notes, ``batch`` accounts at a
    time in id order (re-run safely from the start). A drifted row is made again from a count
    (``feed.note_counts.count_recount``), as is a missing row of an author with notes.

    :returns: rows that differed (remade unless ``repair`` is False); missing rows are not drift
        (reads count the notes) and are made only when repairing.
    """
    drifted = 0
    after = 0
    with primary_reads():
        while True:
            author_ids = list(User.objects.filter(pk__gt=after).order_by("pk").values_list("pk", flat=True)[:batch])
            if not author_ids:
                return drifted
            stored = dict(AuthorNoteCount.objects.filter(author_id__in=author_ids).values_list("author_id", "notes"))
            counted = dict(
                Note.objects.filter(
                    author_id__in=author_ids, is_hidden=False, deleted_at__isnull=True, visibility__in=FEED_VISIBILITIES
                )
                .values("author_id")
                .annotate(shown=Count("id"))
                .values_list("author_id", "shown")
            )
            wrong = [author_id for author_id, notes in stored.items() if counted.get(author_id, 0) != notes]
            missing = [author_id for author_id in counted if author_id not in stored]
            drifted += len(wrong)
            if wrong:
                logger.warning("note counts: %d authors' counts drifted", len(wrong))
            if repair:
                for author_id in [*wrong, *missing]:
                    count_recount(author_id=author_id)
            after = author_ids[-1]


def lists_compare(client: redis.Redis, reader_ids: Sequence[int], *, repair: bool) -> int:
    """Compare the list keys of ``reader_ids`` (members of each list, the excluded set) with the
    database, and rewrite those that differ unless ``repair`` is False; then their lists' kept
    timelines (``kept_lists_compare``).

    :returns: the number of readers whose keys or kept timelines differed.
    """
    if not reader_ids:
        return 0
    truth = database_lists(reader_ids)
    held = redis_lists(client, reader_ids)
    drifted = [reader_id for reader_id in truth if truth[reader_id] != held[reader_id]]
    if repair and drifted:
        lists_rebuild(drifted)
    agreed = {reader_id: truth[reader_id].lists for reader_id in truth if reader_id not in drifted}
    timelines = kept_lists_compare(client, agreed, repair=repair)
    return len(set(drifted) | timelines)


def kept_lists_compare(client: redis.Redis, lists: dict[int, dict[int, set[int]]], *, repair: bool) -> set[int]:
    """Compare the kept timelines among ``lists`` (``{reader_id: {list_id: member ids}}``, the member
    sets Redis holds; not those being built) with ``feed.rebuild.list_timeline_truth`` above their
    floors, as ``_compare`` does an inbox; one that differs is dropped unless ``repair`` is False
    (the next read builds it again).

    :returns: the readers with a kept timeline that differed.
    """
    pairs = [(reader_id, list_id) for reader_id, held_lists in lists.items() for list_id in sorted(held_lists)]
    if not pairs:
        return set()
    key_sets = [
        (
            redis_keys.list_synced_key(reader_id, list_id),
            redis_keys.list_build_key(reader_id, list_id),
            redis_keys.list_inbox_key(reader_id, list_id),
            redis_keys.list_floor_key(reader_id, list_id),
        )
        for reader_id, list_id in pairs
    ]
    held = held_timelines(client, key_sets)
    pulled = pull_authors(client)
    kept = {pair: timeline for pair, timeline in zip(pairs, held) if timeline is not None}
    truths = {(reader_id, list_id): dict(list_timeline_truth(lists[reader_id][list_id], pulled)) for reader_id, list_id in kept}
    members = [lists[reader_id][list_id] for reader_id, list_id in kept]
    pulled_notes = _pulled_notes(list(kept.values()), list(truths.values()), pulled, members)
    # Counted apart: the figures of the inbox reconcile are the inboxes'.
    scratch = InboxReport()
    drifted = [pair for pair, timeline in kept.items() if _compare(timeline, truths[pair], scratch, pulled_notes)]
    if repair and drifted:
        pipe = pipeline(client)
        for reader_id, list_id in drifted:
            # One key per command: on a cluster they share the reader's slot, but a pipeline routes by key.
            for key in redis_keys.list_timeline_keys(reader_id, list_id):
                pipe.delete(key)
        pipe.execute()
    if drifted:
        logger.warning("list timelines: %d kept timelines drifted", len(drifted))
    return {reader_id for reader_id, _ in drifted}


@primary_reads()
def lists_drift(*, repair: bool, batch: int = BATCH) -> int:
    """The table's reconcile of the lists: the list keys of every reader who has lists.

    :returns: readers whose keys differed (rewritten unless ``repair`` is False).
    """
    client = get_redis()
    owners = List.objects.values_list("owner_id", flat=True).distinct().order_by("owner_id")
    drifted = low = 0
    while ids := list(owners.filter(owner_id__gt=low)[:batch]):
        drifted += lists_compare(client, ids, repair=repair)
        low = ids[-1]
    return drifted

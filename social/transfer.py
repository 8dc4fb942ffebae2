"""Moving follows in and out: a CSV export in Mastodon's layout, and an import that follows each
listed account through the normal follow path in a Celery job.

The import's file is checked whole first (``parse_import``); then a ``FollowImport`` row and
its ``social.follows_import`` entry drive ``follows_import_run``, one transaction per line under
the import's row lock, from a checkpoint. Behaviour: docs/behaviours.md (Export and import).
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import partial

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core import outbox
from core.errors import EntryNotApplied, InvalidInput, NotFound
from core.limits import RateLimited
from core.models import OutboxEntry
from core.parsing import username_problem
from core.transactions import retry_on_deadlock
from users.models import User

from .models import Block, Follow, FollowImport
from .services import ActorInactiveError, FollowError, follow_create

HEADER = ["Account address", "Show boosts", "Notify on new posts", "Languages"]

# Skip reasons, as reported per line.
SKIP_UNKNOWN = "no such account"
SKIP_INACTIVE = "deactivated"
SKIP_BLOCKED = "blocked"
SKIP_FOLLOWING = "already followed"
SKIP_SELF = "yourself"
SKIP_INVALID = "not a username"
SKIP_REQUESTED = "private: follow request sent"
SKIP_REFUSED = "refused"


# A cell starting with one of these is a formula to a spreadsheet (OWASP's "CSV injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n")


def spreadsheet_safe(cell: str) -> str:
    """``cell`` as a spreadsheet shows it as text: a leading ``'`` before a formula's first character."""
    return "'" + cell if cell.startswith(FORMULA_STARTS) else cell


def export_rows(*, user_id: int, batch: int = 2000) -> Iterator[str]:
    """The CSV of the accounts ``user_id`` follows, line by line (header first), oldest follow
    first, read in keyset batches of ``batch`` (a streaming response holds one batch)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")

    def line(row: list[str]) -> str:
        buffer.seek(0)
        buffer.truncate()
        # Whatever its origin (a name made before the one rule, a header), no cell runs as a formula.
        writer.writerow([spreadsheet_safe(cell) for cell in row])
        return buffer.getvalue()

    yield line(HEADER)
    last = 0
    while True:
        chunk = list(
            Follow.objects.filter(follower_id=user_id, followee__is_active=True, pk__gt=last)
            .order_by("pk")
            .values_list("pk", "followee__username")[:batch]
        )
        if not chunk:
            return
        for _, username in chunk:
            yield line([username, "true", "false", ""])
        last = chunk[-1][0]


def parse_import(raw: bytes) -> list[str]:
    """The usernames of an uploaded file, in order, without repeats.

    :raises InvalidInput: larger than ``FOLLOWS_IMPORT_MAX_BYTES``, more lines than
        ``FOLLOWS_IMPORT_MAX_LINES``, not UTF-8 text, not CSV, a header that is not
        Mastodon's, or no username at all (400; nothing changes).
    """
    max_bytes, max_lines = int(settings.FOLLOWS_IMPORT_MAX_BYTES), int(settings.FOLLOWS_IMPORT_MAX_LINES)
    if len(raw) > max_bytes:
        raise InvalidInput(f"The file is larger than {max_bytes // 1024:,} KB.")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InvalidInput("The file is not UTF-8 text.") from None
    if "\x00" in text:
        raise InvalidInput("The file is not text (it holds NUL bytes).")
    # Rows as the csv module reads them (quotes, doubled quotes, CR LF, a quoted line
    # break), so the header is recognised however a program quoted it.
    try:
        rows = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    except csv.Error as exc:
        raise InvalidInput(f"The file is not CSV: {exc}.") from None
    rows = [row for row in rows if any(cell.strip() for cell in row)]
    if not rows:
        raise InvalidInput("The file lists no account.")
    first = [cell.strip().lower() for cell in rows[0]]
    wanted = [cell.lower() for cell in HEADER]
    # Mastodon's layout has a header row; a plain list has none.
    header = 1 if first[0] == wanted[0] else 0
    if len(rows) - header > max_lines:
        raise InvalidInput(f"The file has {len(rows) - header:,} lines; at most {max_lines:,} accounts can be imported at once.")
    if header:
        if first != wanted[: len(first)]:
            raise InvalidInput(f"The columns must be {', '.join(HEADER)} (Mastodon's export), or one username per line.")
        rows = rows[1:]
        if any(len(row) > len(HEADER) for row in rows):
            raise InvalidInput(f"A row has more than the {len(HEADER)} columns of the header.")
    elif len(first) > 1 or any(len([cell for cell in row if cell.strip()]) > 1 for row in rows):
        raise InvalidInput(f"The columns must be {', '.join(HEADER)} (Mastodon's export), or one username per line.")
    usernames = [row[0].strip().removeprefix("@") for row in rows if row and row[0].strip()]
    if not usernames:
        raise InvalidInput("The file lists no account.")
    if all(username_problem(username) is not None for username in usernames):
        raise InvalidInput("The file lists no username (one per line, or Mastodon's CSV).")
    return list(dict.fromkeys(usernames))


def follows_import_start(*, actor: User, raw: bytes) -> FollowImport:
    """Check the file and record the import; the caller's commit queues its job.

    :raises InvalidInput: see ``parse_import`` (nothing recorded).
    """
    usernames = parse_import(raw)
    with transaction.atomic():
        job = FollowImport.objects.create(user=actor, usernames=usernames, total=len(usernames))
        outbox.record(IMPORT, subject_id=job.pk)
    return job


# Lines one application of an import's outbox entry handles; the entry stays
# pending until the import is done, and the drain applies it again.
LINES_PER_APPLY = 500


def _apply_imports(entries: Sequence[OutboxEntry]) -> None:
    unfinished = []
    for entry in entries:
        try:
            step = follows_import_run(import_id=entry.subject_id, limit=LINES_PER_APPLY)
        except NotFound:
            continue  # the import went with its account: nothing left to do
        if not step.finished and not step.actor_inactive:
            unfinished.append(entry.subject_id)
    if unfinished:
        raise EntryNotApplied(f"imports {unfinished} go on at the next drain")


@dataclass(frozen=True)
class ImportStep:
    """What one run of the job did: ``done`` lines handled in all, ``finished``,
    ``wait_seconds`` when the follow rate limit stopped it (run again after that), and
    ``actor_inactive`` when the importing account is deactivated (it goes on when reactivated)."""

    done: int
    finished: bool
    wait_seconds: int = 0
    actor_inactive: bool = False


def _skip_reason(actor: User, username: str) -> tuple[str | None, User | None]:
    """Why line ``username`` is skipped (None: follow it) and the account it names."""
    if username_problem(username) is not None:
        return SKIP_INVALID, None
    target = User.objects.filter(username__iexact=username).first()
    if target is None:
        return SKIP_UNKNOWN, None
    if target.pk == actor.pk:
        return SKIP_SELF, target
    if not target.is_active:
        return SKIP_INACTIVE, target
    if Block.objects.filter(blocker_id__in=[actor.pk, target.pk], blocked_id__in=[actor.pk, target.pk]).exists():
        return SKIP_BLOCKED, target
    if Follow.objects.filter(follower_id=actor.pk, followee_id=target.pk).exists():
        return SKIP_FOLLOWING, target
    return None, target


# Skipped lines kept with their reason (the count of all of them is position - followed).
SKIPS_KEPT = 1000


class ImportOvertaken(Exception):
    """Another run of the same import handled this line already: this one stops."""


@dataclass(frozen=True)
class _LineOutcome:
    """One handled line: ``followed`` (this import's insert created the follow row), or the
    skip ``reason``; ``retry_after`` > 0 when the follow rate limit stopped the line, and
    ``actor_inactive`` when the importing account is deactivated (the line stays unhandled)."""

    followed: bool = False
    reason: str | None = None
    retry_after: int = 0
    actor_inactive: bool = False


def _follow_line(actor: User, username: str) -> _LineOutcome:
    reason, target = _skip_reason(actor, username)
    if reason is not None or target is None:
        return _LineOutcome(reason=reason)
    try:
        result = follow_create(actor=actor, followee_id=target.pk)
    except RateLimited as exc:
        return _LineOutcome(retry_after=max(1, int(exc.retry_after)))
    except ActorInactiveError:
        return _LineOutcome(actor_inactive=True)
    except FollowError as exc:
        return _LineOutcome(reason=f"{SKIP_REFUSED}: {exc.message}")
    if result.requested:
        return _LineOutcome(reason=SKIP_REQUESTED)
    # The insert's own result: a follow another import (or a click) made meanwhile
    # is "already followed" here, so imports of one list never count a row twice.
    return _LineOutcome(followed=True) if result.changed else _LineOutcome(reason=SKIP_FOLLOWING)


def _handle_line(actor: User, import_id: int, position: int) -> tuple[FollowImport, _LineOutcome]:
    """Handle the line at ``position`` and save its outcome with the checkpoint in one transaction
    holding the import's row lock (two runs of one import handle each line once).

    :raises NotFound: the import is gone (its account was deleted).
    :raises ImportOvertaken: another run handled this line already.
    """
    with transaction.atomic():
        # The import's row only (a join would lock the account's row too, before the follow does).
        job = FollowImport.objects.select_for_update().filter(pk=import_id).first()
        if job is None:
            raise NotFound("No such import.")
        if job.position != position:
            raise ImportOvertaken(import_id)
        username = job.usernames[job.position]
        outcome = _follow_line(actor, username)
        if outcome.actor_inactive:
            return job, outcome
        if outcome.retry_after:
            job.waiting_until = timezone.now() + timedelta(seconds=outcome.retry_after)
            job.save(update_fields=["waiting_until"])
            return job, outcome
        if outcome.followed:
            job.followed += 1
        elif len(job.skipped) < SKIPS_KEPT:
            job.skipped = [*job.skipped, [username, outcome.reason]]
        job.position += 1
        job.waiting_until = None
        if job.position >= job.total:
            job.finished_at = timezone.now()
        job.save(update_fields=["followed", "skipped", "position", "waiting_until", "finished_at"])
    return job, outcome


def follows_import_run(*, import_id: int, limit: int | None = None) -> ImportStep:
    """Follow the import's accounts from its checkpoint on, one transaction per line (``_handle_line``).

    :param limit: handle at most this many lines in this run (None: all).
    :returns: ``ImportStep``; ``wait_seconds`` > 0 when the follow rate limit was reached;
        ``finished`` False and no wait when another run of it is ahead (that one goes on).
    :raises NotFound: no such import.
    """
    job = FollowImport.objects.select_related("user").filter(pk=import_id).first()
    if job is None:
        raise NotFound("No such import.")
    if job.waiting_until is not None and job.waiting_until > timezone.now():
        # Paused at the follow rate limit: the drain's next applications find it
        # still waiting and cost this one read until the limit lifts.
        return ImportStep(
            done=job.position, finished=False, wait_seconds=int((job.waiting_until - timezone.now()).total_seconds()) + 1
        )
    actor = job.user
    if not actor.is_active:
        # Its lines are not spent on refusals: reactivation records the entry again.
        return ImportStep(done=job.position, finished=False, actor_inactive=True)
    handled = 0
    pause = float(settings.FOLLOWS_IMPORT_PAUSE_SECONDS)
    position = job.position
    while position < job.total and (limit is None or handled < limit):
        try:
            job, outcome = retry_on_deadlock(partial(_handle_line, actor, import_id, position))
        except ImportOvertaken:
            return ImportStep(done=position, finished=False)
        if outcome.retry_after:
            return ImportStep(done=job.position, finished=False, wait_seconds=outcome.retry_after)
        if outcome.actor_inactive:
            return ImportStep(done=job.position, finished=False, actor_inactive=True)
        position = job.position
        handled += 1
        if pause and outcome.followed:
            time.sleep(pause)
    return ImportStep(done=position, finished=position >= job.total)


def follows_imports_resume(*, user_id: int) -> int:
    """Record the outbox entry of every unfinished import of ``user_id`` again (its reactivation), in the change's transaction.

    :returns: how many imports go on.
    """
    unfinished = list(FollowImport.objects.filter(user_id=user_id, finished_at__isnull=True).values_list("pk", flat=True))
    for import_id in unfinished:
        outbox.record(IMPORT, subject_id=import_id)
    return len(unfinished)


# Celery applies it after commit; a refused message, a killed worker or a pause
# at the follow rate limit leaves it pending, and the drain goes on with it.
IMPORT = outbox.register("social.follows_import", apply=_apply_imports, stage=2)


def imports_drift(*, repair: bool) -> int:
    """The table's reconcile of import jobs: record again the entry of each unfinished import of an
    active account that has no pending ``social.follows_import`` entry, unless ``repair`` is False.

    :returns: how many unfinished imports had no pending entry.
    """
    pending = OutboxEntry.objects.filter(kind=IMPORT.name, applied_at__isnull=True).values_list("subject_id", flat=True)
    stalled = list(
        FollowImport.objects.filter(finished_at__isnull=True, user__is_active=True)
        .exclude(pk__in=list(pending))
        .values_list("pk", flat=True)
    )
    if repair:
        with transaction.atomic():
            for import_id in stalled:
                outbox.record(IMPORT, subject_id=import_id)
    return len(stalled)

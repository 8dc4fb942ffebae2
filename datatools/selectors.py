"""Reads of the demo: whether the Redis mirror is current for the database, and a warm-up's progress."""

from __future__ import annotations

from dataclasses import dataclass

import redis

from core.models import OutboxEntry
from core.redis import mirror_ready
from feed.models import Note
from users.models import User

from . import redis_keys


def database_fingerprint() -> str:
    """What identifies the data a bulk load wrote: the first account's id and creation time to the
    microsecond (``"empty"`` without accounts); changed by a re-import or another database file,
    not by writes that reach the mirror through the outbox.
    """
    first = User.objects.order_by("pk").values_list("pk", "date_joined").first()
    if first is None:
        return "empty"
    pk, joined = first
    return f"{pk}:{joined.isoformat()}"


@dataclass(frozen=True)
class MirrorState:
    """What a restart finds: ``sentinel`` (the mirror was built), ``watermark_matches`` (built from
    this database), ``pending_entries`` (outbox entries not applied to it yet)."""

    sentinel: bool
    watermark_matches: bool
    pending_entries: int

    @property
    def needs_rebuild(self) -> bool:
        """The mirror must be built again from the database (missing, or built from other data)."""
        return not (self.sentinel and self.watermark_matches)

    @property
    def current(self) -> bool:
        """Nothing to do: built from this database, every outbox entry applied."""
        return not self.needs_rebuild and self.pending_entries == 0

    def reason(self) -> str:
        """Why a warm-up is needed, in words ("" when the mirror is current)."""
        if not self.sentinel:
            return "the Redis mirror is not built"
        if not self.watermark_matches:
            return "the Redis mirror was built from other data"
        if self.pending_entries:
            return f"{self.pending_entries} outbox entries are not applied to the Redis mirror yet"
        return ""


def mirror_state(client: redis.Redis) -> MirrorState:
    """Read the sentinel, the watermark and the outbox's pending entries.

    :raises: ``REDIS_ERRORS`` when Redis is unreachable.
    """
    stored = client.get(redis_keys.watermark_key())
    watermark = _text(stored) if stored is not None else None
    return MirrorState(
        sentinel=mirror_ready(client),
        watermark_matches=watermark == database_fingerprint(),
        pending_entries=OutboxEntry.objects.filter(applied_at__isnull=True).count(),
    )


def warmup_reason(state: MirrorState, *, replay_notes: bool) -> str:
    """Why a warm-up is needed, in words ("" when it is not): with ``replay_notes``, no note in the
    database yet (the demo replays them); else the mirror's ``state``."""
    if replay_notes and not Note.objects.exists():
        return "the notes are not replayed yet"
    return state.reason()


@dataclass(frozen=True)
class WarmupProgress:
    """A warm-up's ``stage`` (``"failed"`` when it stopped on an error, in ``error``), with ``done``
    of ``total`` units (accounts or readers) of that stage."""

    stage: str
    done: int = 0
    total: int = 0
    error: str = ""

    @property
    def percent(self) -> int:
        """How far the stage is, 0-100."""
        return min(100, self.done * 100 // self.total) if self.total > 0 else 0


def warmup_progress(client: redis.Redis) -> WarmupProgress | None:
    """The progress of the warm-up running now, or of one that failed; None when there is none.

    :raises: ``REDIS_ERRORS`` when Redis is unreachable.
    """
    fields = {_text(key): _text(value) for key, value in client.hgetall(redis_keys.warmup_key()).items()}
    if "stage" not in fields:
        return None
    return WarmupProgress(
        stage=fields["stage"],
        done=int(fields.get("done", 0)),
        total=int(fields.get("total", 0)),
        error=fields.get("error", ""),
    )


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value

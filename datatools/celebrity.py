"""Give one account N followers quickly (tests, benchmarks, demos): ``celebrity_make``.

Fans are real accounts (``fan<celebrity id>_<n>``) and ``Follow`` rows, inserted in re-runnable
batches with no signals or outbox rows; the account's mirror is then rebuilt (``rebuild_user``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import connection
from django.utils import timezone

from social.models import Follow
from social.rebuild import rebuild_user
from users.models import User

# Rows per INSERT; 5000 users of ~12 columns stay well under max_allowed_packet.
BATCH = 5000
# An unusable password (Django's "!" prefix): fan accounts cannot sign in.
UNUSABLE_PASSWORD = "!celebrity-fan"  # noqa: S105 - an unusable hash marker, not a password


@dataclass(frozen=True)
class CelebrityResult:
    """``user_id`` of the account, its ``followers`` in the database afterwards,
    and ``edges_written`` by the mirror rebuild (both directions)."""

    user_id: int
    followers: int
    edges_written: int


def fan_username(celebrity_id: int, index: int) -> str:
    """Username of fan number ``index`` (0-based) of account ``celebrity_id``."""
    return f"fan{int(celebrity_id)}_{int(index)}"


def _insert_fans(names: list[str]) -> None:
    """INSERT IGNORE the accounts ``names`` in one statement; existing usernames are skipped.

    Values are rendered once from a template ``User`` (bulk_create spends most of its time on 13
    fields per row); fan usernames need no quoting.
    """
    if connection.vendor != "mysql":
        User.objects.bulk_create(
            [User(username=name, display_name=name, password=UNUSABLE_PASSWORD) for name in names], ignore_conflicts=True
        )
        return
    template = User(username="", display_name="", password=UNUSABLE_PASSWORD)
    fields = [f for f in User._meta.concrete_fields if not f.primary_key]
    literal = connection.connection.literal
    rendered = {f.column: literal(f.get_db_prep_save(f.pre_save(template, add=True), connection)).decode() for f in fields}
    columns = ", ".join(connection.ops.quote_name(str(f.column)) for f in fields)
    per_name = {"username", "display_name"}
    values = ",".join(
        "(" + ", ".join(f"'{name}'" if f.column in per_name else rendered[f.column] for f in fields) + ")" for name in names
    )
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT IGNORE INTO {User._meta.db_table} ({columns}) VALUES {values}")


def _insert_follows(rows: list[tuple[int, int, datetime]]) -> None:
    """INSERT IGNORE ``(follower_id, followee_id, created_at)`` rows; existing pairs are skipped."""
    if connection.vendor != "mysql":
        Follow.objects.bulk_create(
            [Follow(follower_id=a, followee_id=b, created_at=at) for a, b, at in rows], ignore_conflicts=True
        )
        return
    # Every value is an int or a datetime we computed (stored as naive UTC,
    # as Django does with USE_TZ), so the statement is built directly.
    utc = [(a, b, at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")) for a, b, at in rows]
    values = ",".join(f"({int(a)},{int(b)},'{at}')" for a, b, at in utc)
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT IGNORE INTO {Follow._meta.db_table} (follower_id, followee_id, created_at) VALUES {values}")


def celebrity_make(
    *,
    username: str,
    followers: int,
    ties: int = 4,
    batch: int = BATCH,
    rebuild: bool = True,
    on_progress: Callable[[int], None] | None = None,
) -> CelebrityResult:
    """Make sure account ``username`` (created if missing) has ``followers`` fan accounts following it.

    :param followers: number of fans; fans ``0..followers-1`` are created if missing (re-runnable).
    :param ties: fans per follow second (fan ``i`` at ``start + i // ties``), to exercise tie order.
    :param batch: rows per INSERT.
    :param rebuild: rebuild the account's Redis keys afterwards.
    :param on_progress: called with the number of fans done in each batch.
    :returns: a ``CelebrityResult``.
    :raises ValueError: for a negative ``followers`` or ``ties`` < 1.
    """
    if followers < 0 or ties < 1 or batch < 1:
        raise ValueError("followers must be >= 0, ties and batch >= 1")
    celebrity, _ = User.objects.get_or_create(
        username=username, defaults={"display_name": username.title(), "password": UNUSABLE_PASSWORD}
    )
    start = timezone.now().replace(microsecond=0) - timedelta(seconds=followers // ties + 1)
    for low in range(0, followers, batch):
        indexes = range(low, min(low + batch, followers))
        names = [fan_username(celebrity.pk, i) for i in indexes]
        _insert_fans(names)
        ids = dict(User.objects.filter(username__in=names).values_list("username", "pk"))
        _insert_follows([(ids[name], celebrity.pk, start + timedelta(seconds=i // ties)) for i, name in zip(indexes, names)])
        if on_progress is not None:
            on_progress(len(names))
    edges = rebuild_user(celebrity.pk) if rebuild else 0
    count = Follow.objects.filter(followee_id=celebrity.pk).count()
    return CelebrityResult(user_id=celebrity.pk, followers=count, edges_written=edges)

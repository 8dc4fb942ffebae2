"""Every write of accounts."""

from __future__ import annotations

from datetime import timedelta

from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from core.errors import Conflict

from .account_rows import seen_written
from .models import Marker, User
from .signals import user_activity_changed

# last_seen_at is written at most this often per account (seconds), so
# browsing does not turn every page view into an UPDATE.
SEEN_RESOLUTION_SECONDS = 300


class UsernameTaken(Conflict):
    """Another account has that name, whatever its case (HTTP 409)."""


class MarkerConflict(Conflict):
    """Another write of the same marker came between this one's read and its write (HTTP 409)."""


def user_create(*, username: str, password: str, display_name: str = "") -> User:
    """Create an active account.

    :param username: parsed (``core.parsing.parse_username``); unique ignoring case.
    :returns: the saved ``User``.
    :raises UsernameTaken: the name exists in any case, also when a concurrent sign-up
        took it between the check and the insert (409).
    :raises django.core.exceptions.ValidationError: the model's own checks.
    """
    if User.objects.filter(username__iexact=username).exists():
        raise UsernameTaken("That name is taken.")
    user = User(username=username, display_name=display_name)
    user.set_password(password)
    try:
        user.full_clean()
        # The unique index (the column's collation ignores case) decides
        # between two sign-ups of one name that both passed the check above.
        with transaction.atomic():
            user.save()
    except IntegrityError:
        raise UsernameTaken("That name is taken.") from None
    except ValidationError as exc:
        if "username" in exc.message_dict:
            raise UsernameTaken("That name is taken.") from None
        raise
    return user


def user_touch_seen(*, user: User) -> bool:
    """Record that ``user`` was active now (feeds fan out only to recently seen accounts).

    :returns: True when the stored time was updated.
    """
    now = timezone.now()
    if user.last_seen_at and now - user.last_seen_at < timedelta(seconds=SEEN_RESOLUTION_SECONDS):
        return False
    User.objects.filter(pk=user.pk).update(last_seen_at=now)
    user.last_seen_at = now
    seen_written(user.pk, now)
    return True


def user_set_active(*, user: User, is_active: bool) -> bool:
    """Deactivate or reactivate ``user``: its follows stop counting in database reads at once and leave
    Redis after commit (``user_activity_changed``); reactivation restores them from the kept rows.

    :returns: True when the flag changed.
    """
    if user.is_active == is_active:
        return False
    with transaction.atomic():
        User.objects.filter(pk=user.pk).update(is_active=is_active)
        user.is_active = is_active
        # Inside the transaction: receivers record their outbox entries in it.
        user_activity_changed.send(sender=User, user_id=user.pk, is_active=is_active)
    return True


def _marker_row(*, user_id: int, timeline: str) -> Marker:
    """``user_id``'s marker of ``timeline``, created at 0 the first time."""
    marker = Marker.objects.filter(user_id=user_id, timeline=timeline).first()
    if marker is not None:
        return marker
    try:
        with transaction.atomic():
            marker = Marker.objects.create(user_id=user_id, timeline=timeline)
    except IntegrityError:
        # Two first writes at once: the other one's insert won, read its row.
        marker = Marker.objects.get(user_id=user_id, timeline=timeline)
    return marker


def marker_set(*, user_id: int, timeline: str, last_read_id: int) -> Marker:
    """Set ``user_id``'s ``timeline`` marker to ``last_read_id`` (forwards or backwards, as
    Mastodon's ``POST /api/v1/markers``) and raise its ``version`` by one.

    :param timeline: ``"home"`` or ``"notifications"`` (``users.models.MARKER_TIMELINES``).
    :returns: the marker as written.
    :raises MarkerConflict: a concurrent write changed the marker after it was read (409).
    """
    marker = _marker_row(user_id=user_id, timeline=timeline)
    # Optimistic locking, as Mastodon's lock_version: the write applies only to the version read.
    written = Marker.objects.filter(pk=marker.pk, version=marker.version).update(
        last_read_id=last_read_id, version=F("version") + 1, updated_at=timezone.now()
    )
    if not written:
        raise MarkerConflict("Conflict during update, please try again")
    marker.refresh_from_db()
    return marker


def markers_set(*, user_id: int, positions: dict[str, int]) -> dict[str, Marker]:
    """Set several of ``user_id``'s markers (``{timeline: last_read_id}``) all or none, as
    Mastodon's ``POST /api/v1/markers``: a conflict on one leaves every other as it was.

    :returns: ``{timeline: marker as written}``.
    :raises MarkerConflict: a concurrent write changed one of them (409); nothing is written.
    """
    with transaction.atomic():
        return {
            timeline: marker_set(user_id=user_id, timeline=timeline, last_read_id=position)
            for timeline, position in positions.items()
        }


def marker_advance(*, user_id: int, timeline: str, last_read_id: int) -> int:
    """Move ``user_id``'s ``timeline`` marker forwards to ``last_read_id`` (a page showed it); a
    marker already there or further stays as it is.

    :returns: the ``last_read_id`` the marker held before (0: never written).
    """
    found = _marker_position(user_id=user_id, timeline=timeline)
    if found is None:
        marker = _marker_row(user_id=user_id, timeline=timeline)
        found = (marker.pk, marker.last_read_id)
    marker_id, read_before = found
    if read_before < last_read_id:
        # One conditional UPDATE: two pages read at once never move the marker backwards.
        Marker.objects.filter(pk=marker_id, last_read_id__lt=last_read_id).update(
            last_read_id=last_read_id, version=F("version") + 1, updated_at=timezone.now()
        )
    return int(read_before)


def _marker_position(*, user_id: int, timeline: str) -> tuple[int, int] | None:
    """``(id, last_read_id)`` of ``user_id``'s ``timeline`` marker (None: never written), in raw SQL:
    every home page load reads it, and the ORM's building of the query costs more than the query."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, last_read_id FROM {Marker._meta.db_table} WHERE user_id = %s AND timeline = %s", [user_id, timeline]
        )
        row = cursor.fetchone()
    return None if row is None else (int(row[0]), int(row[1]))

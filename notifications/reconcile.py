"""Reconcile of the unread counters: each counter that exists is compared with the database's count."""

from __future__ import annotations

from collections.abc import Callable

from django.db.models import Count, Max

from core.cluster import pipeline
from core.redis import get_redis
from users.models import User

from . import redis_keys
from .models import Notification


def unread_reconcile(*, batch_users: int = 2000, on_progress: Callable[[int, int], None] | None = None) -> int:
    """Set every existing unread counter that differs from the database (a missing one is counted
    at its next read), ``batch_users`` account ids at a time; safe to interrupt and re-run.

    :param on_progress: called with ``(ids walked, counters repaired)`` after each batch.
    :returns: how many counters were repaired.
    :raises: ``REDIS_ERRORS``.
    """
    client = get_redis()
    top = User.objects.aggregate(top=Max("pk"))["top"] or 0
    repaired = 0
    for low in range(0, top, batch_users):
        high = min(low + batch_users, top)
        ids = list(User.objects.filter(pk__gt=low, pk__lte=high).order_by("pk").values_list("pk", flat=True))
        if not ids:
            continue
        pipe = pipeline(client)
        for user_id in ids:
            pipe.get(redis_keys.unread_key(user_id))
        counters = dict(zip(ids, pipe.execute()))
        truth = dict(
            Notification.objects.filter(recipient_id__gt=low, recipient_id__lte=high, read_at__isnull=True)
            .values("recipient_id")
            .annotate(n=Count("pk"))
            .values_list("recipient_id", "n")
        )
        fix = pipeline(client)
        fixes = 0
        for user_id, value in counters.items():
            if value is not None and int(value) != truth.get(user_id, 0):
                fix.set(redis_keys.unread_key(user_id), truth.get(user_id, 0), ex=redis_keys.UNREAD_TTL_SECONDS)
                fixes += 1
        if fixes:
            fix.execute()
        repaired += fixes
        if on_progress is not None:
            on_progress(high - low, fixes)
    return repaired

"""The accounts' outbox kind: ``users.account_version``, recorded in every transaction that writes an
account's row (``users.receivers``: saves, deletions, ``UserQuerySet.update``) and applied inline
after commit: the account's version token changes (deleted: goes), so no process uses a row it
kept from before (``users.account_rows``). Design: docs/architecture.md#the-signed-in-account.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from core import outbox
from core.models import OutboxEntry

from .account_rows import versions_change
from .models import User

ACCOUNT_VERSION_KIND = "users.account_version"


def _apply_account_version(entries: Sequence[OutboxEntry]) -> None:
    user_ids = sorted({entry.subject_id for entry in entries})
    # The database says which accounts still exist: a deleted one's token goes with its other keys.
    existing = set(User.objects.filter(pk__in=user_ids).values_list("pk", flat=True))
    versions_change(
        user_ids=[user_id for user_id in user_ids if user_id in existing],
        gone=[user_id for user_id in user_ids if user_id not in existing],
    )


ACCOUNT_VERSION = outbox.register(ACCOUNT_VERSION_KIND, apply=_apply_account_version, inline=True)


def account_written(user_ids: Iterable[int]) -> None:
    """Record ``users.account_version`` for each of ``user_ids`` in the current transaction (their
    rows were written in it).

    :raises django.db.DatabaseError: as ``core.outbox.record``.
    """
    outbox.record_many(ACCOUNT_VERSION, [(user_id, None) for user_id in sorted(set(user_ids))])

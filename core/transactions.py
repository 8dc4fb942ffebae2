"""Transactions that may simply run again: MariaDB's deadlock victim and lock wait timeout."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import OperationalError, transaction

# MariaDB errors after which the whole transaction may simply run again:
# 1213 deadlock (InnoDB picked us as the victim), 1205 lock wait timeout.
# A follow racing an unfollow of the same pair takes gap and insert-intention
# locks on the unique index in opposite orders, so deadlocks are expected
# under contention, and InnoDB expects the client to re-issue the transaction.
RETRYABLE_DATABASE_ERRORS = (1213, 1205)
WRITE_ATTEMPTS = 5

Result = TypeVar("Result")


def is_retryable(exc: BaseException) -> bool:
    """Whether ``exc`` is a deadlock or lock wait timeout (the transaction may run again)."""
    return isinstance(exc, OperationalError) and bool(exc.args) and exc.args[0] in RETRYABLE_DATABASE_ERRORS


def retry_on_deadlock(write: Callable[[], Result]) -> Result:
    """Run the transaction ``write``; after a deadlock or lock timeout run it again (up to
    WRITE_ATTEMPTS times, with a short random back-off). Inside an outer transaction the error
    propagates, since only the outermost transaction can be retried.

    :raises OperationalError: when every attempt failed, or for any other database error.
    """
    attempt = 0
    while True:
        try:
            return write()
        except OperationalError as exc:
            attempt += 1
            if not is_retryable(exc) or attempt == WRITE_ATTEMPTS or transaction.get_connection().in_atomic_block:
                raise
            time.sleep(random.uniform(0, 0.005 * 2**attempt))  # noqa: S311 - retry jitter, not a secret

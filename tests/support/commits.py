"""After-commit work in tests, run as a request would run it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from django.test import TestCase


@contextlib.contextmanager
def run_on_commit() -> Iterator[list[Any]]:
    """Inside a test's transaction, the ``on_commit`` callbacks registered in the block run at its
    end (as pytest-django's ``django_capture_on_commit_callbacks(execute=True)``); outside one
    (a transactional test) they ran at commit already and the block adds nothing.

    :returns: (as the block's value) the list of the callbacks captured.
    """
    with TestCase.captureOnCommitCallbacks(execute=True) as callbacks:
        yield callbacks

"""Which reads may go to the database replica: page reads, and nothing a write trusts.

One context variable, read by ``core.routers.ReplicaRouter``: outside any context reads go to the
primary; ``page_reads()`` (GET and HEAD pages, ``ReplicaReadsMiddleware``) lets them use the
replica; ``primary_reads()`` sends them back, for whatever writes what it reads. A signed cookie
keeps an actor's reads on the primary after its writes. Design:
docs/architecture.md#redis-cluster-and-a-read-replica.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.conf import settings
from django.http import HttpRequest, HttpResponse

REPLICA_ALIAS = "replica"

_PRIMARY, _PAGE, _PINNED = "primary", "page", "pinned"
_reads: ContextVar[str] = ContextVar("followfeed_database_reads", default=_PRIMARY)

# The signed cookie of read-your-writes: the unix time (seconds) of the actor's last write.
WROTE_AT_COOKIE = "ff_wrote_at"
_WROTE_AT_SALT = "core.replica.wrote_at"
SAFE_METHODS = ("GET", "HEAD", "OPTIONS", "TRACE")
PAGE_READ_METHODS = ("GET", "HEAD")


def replica_configured() -> bool:
    """Whether ``DATABASES`` has the ``replica`` alias (``DATABASE_REPLICA_URL`` is set)."""
    return REPLICA_ALIAS in settings.DATABASES


def reads_may_use_replica() -> bool:
    """Whether the current context lets reads go to the replica (inside ``page_reads()`` and not
    inside ``primary_reads()``); the router also checks for an atomic block and the alias."""
    return _reads.get() == _PAGE


@contextmanager
def page_reads() -> Iterator[None]:
    """Let the reads of this block go to the replica (a page that only shows what it reads).

    Inside ``primary_reads()`` it changes nothing.
    """
    token = _reads.set(_PAGE) if _reads.get() == _PRIMARY else None
    try:
        yield
    finally:
        if token is not None:
            _reads.reset(token)


@contextmanager
def primary_reads() -> Iterator[None]:
    """Send every read of this block to the primary, also inside ``page_reads()`` (for code that writes
    what it reads); usable as a decorator, each call entering afresh.
    """
    token = _reads.set(_PINNED)
    try:
        yield
    finally:
        _reads.reset(token)


def wrote_recently(request: HttpRequest) -> bool:
    """Whether this browser's signed-in user wrote within ``REPLICA_READ_YOUR_WRITES_SECONDS``.

    A missing, tampered or unreadable cookie counts as no recent write.
    """
    value = request.get_signed_cookie(WROTE_AT_COOKIE, default=None, salt=_WROTE_AT_SALT)
    if value is None:
        return False
    try:
        wrote_at = float(value)
    except ValueError:
        return False
    return time.time() - wrote_at < float(settings.REPLICA_READ_YOUR_WRITES_SECONDS)


def remember_write(response: HttpResponse) -> None:
    """Set the read-your-writes cookie on ``response``: this browser's next page reads use the
    primary for ``REPLICA_READ_YOUR_WRITES_SECONDS``."""
    seconds = float(settings.REPLICA_READ_YOUR_WRITES_SECONDS)
    response.set_signed_cookie(
        WROTE_AT_COOKIE,
        f"{time.time():.3f}",
        salt=_WROTE_AT_SALT,
        # Whole seconds, rounded up; the time inside the cookie decides.
        max_age=max(1, int(-(-seconds // 1))),
        httponly=True,
        samesite="Lax",
        secure=bool(settings.SESSION_COOKIE_SECURE),
    )


class ReplicaReadsMiddleware:
    """Page reads of GET and HEAD requests may use the replica, unless the actor wrote recently.

    Placed after ``AuthenticationMiddleware``; the context ends when the view returns (a
    streaming body reads the primary).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method in PAGE_READ_METHODS and replica_configured() and not wrote_recently(request):
            with page_reads():
                return self.get_response(request)
        response = self.get_response(request)
        # After the view: a sign-in is signed in by now, a sign-out no longer is.
        user = getattr(request, "user", None)
        if request.method not in SAFE_METHODS and user is not None and user.is_authenticated:
            remember_write(response)
        return response

"""The notifications' rows of the table of derived state (``core.derived``)."""

from __future__ import annotations

from core.derived import Change, Unaffected, declare, kinds

NO_LINE = Unaffected("it notifies no one and hides no line")

declare(
    "notification rows, groups and unread counters",
    app="notifications",
    reconcile="notifications.services.unread_reconcile",
    cells={
        Change.FOLLOW: kinds("notifications.follow"),
        Change.UNFOLLOW: NO_LINE,
        Change.REQUEST_MADE: kinds("notifications.request"),
        Change.REQUEST_APPROVED: kinds("notifications.approved", "notifications.follow"),
        Change.REQUEST_REJECTED: NO_LINE,
        Change.REQUEST_WITHDRAWN: NO_LINE,
        Change.FOLLOWER_REMOVED: NO_LINE,
        Change.BLOCK: NO_LINE,
        Change.UNBLOCK: NO_LINE,
        Change.MUTE: NO_LINE,
        Change.UNMUTE: NO_LINE,
        Change.PRIVACY_ON: NO_LINE,
        Change.PRIVACY_OFF: kinds("notifications.approved", "notifications.follow"),
        Change.DEACTIVATION: NO_LINE,
        Change.REACTIVATION: NO_LINE,
        Change.DELETION: kinds("notifications.purge"),
    },
)

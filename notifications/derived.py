"""The notifications' rows of the table of derived state (``core.derived``)."""

from __future__ import annotations

from core.derived import Cell, Change, ReadTime, Unaffected, declare, kinds

RECONCILE = "notifications.services.notifications_drift"
GROUPS_PAGE = ReadTime("notifications.selectors.groups_page")
HISTORY = Unaffected("a follow line is history: it stays after the follow ends")
PAIR = kinds("notifications.pair")

# The cells rows and the groups and counters over them share: the changes that add or remove rows.
ROW_CHANGES: dict[Change, Cell] = {
    Change.FOLLOW: kinds("notifications.follow"),
    Change.UNFOLLOW: HISTORY,
    Change.REQUEST_MADE: kinds("notifications.request"),
    Change.REQUEST_APPROVED: kinds("notifications.pair", "notifications.approved", "notifications.follow"),
    Change.REQUEST_REJECTED: PAIR,
    Change.REQUEST_WITHDRAWN: PAIR,
    Change.FOLLOWER_REMOVED: HISTORY,
    Change.PRIVACY_OFF: kinds("notifications.pair", "notifications.follow"),
}

declare(
    "notification rows",
    app="notifications",
    reconcile=RECONCILE,
    cells={
        **ROW_CHANGES,
        Change.BLOCK: PAIR,
        Change.UNBLOCK: Unaffected("the rows a block removed do not come back; later events notify again"),
        Change.MUTE: Unaffected("a mute stops new notifications (each job reads the mutes) and keeps the lines there are"),
        Change.UNMUTE: Unaffected("later events notify again (each job reads the mutes)"),
        Change.PRIVACY_ON: Unaffected("what was notified stands; later follows are requests"),
        Change.DEACTIVATION: Unaffected("the rows are kept for a reactivation; groups and counters hide them"),
        Change.REACTIVATION: Unaffected("the rows were kept"),
        Change.DELETION: Unaffected("the rows cascade with the account"),
    },
)

declare(
    "notification groups and unread counters",
    app="notifications",
    reconcile=RECONCILE,
    cells={
        **ROW_CHANGES,
        Change.BLOCK: (PAIR, GROUPS_PAGE),
        Change.UNBLOCK: Unaffected("derived from rows, which an unblock does not change"),
        Change.MUTE: Unaffected("a mute changes no row"),
        Change.UNMUTE: Unaffected("a mute changes no row"),
        Change.PRIVACY_ON: Unaffected("no row changes"),
        Change.DEACTIVATION: (kinds("notifications.actor"), GROUPS_PAGE),
        Change.REACTIVATION: kinds("notifications.actor"),
        Change.DELETION: (kinds("notifications.refresh", "notifications.purge"), GROUPS_PAGE),
    },
)

"""The home feed's rows of the table of derived state (``core.derived``)."""

from __future__ import annotations

from core.derived import Change, ReadTime, Unaffected, declare, kinds

FEED_PAIR = kinds("feed.pair")
# A page drops the notes of authors the reader does not follow in the database now.
FOLLOWED_NOW = ReadTime("social.visibility.hidden_authors")
ACCESS = ReadTime("social.visibility.access")
NO_FOLLOW = Unaffected("no note changes hands: the follow is not made yet")

declare(
    "inboxes and author outboxes",
    app="feed",
    reconcile="feed.reconcile.inboxes_drift",
    cells={
        Change.FOLLOW: FEED_PAIR,
        Change.UNFOLLOW: (FEED_PAIR, FOLLOWED_NOW),
        Change.REQUEST_MADE: NO_FOLLOW,
        Change.REQUEST_APPROVED: FEED_PAIR,
        Change.REQUEST_REJECTED: NO_FOLLOW,
        Change.REQUEST_WITHDRAWN: NO_FOLLOW,
        Change.FOLLOWER_REMOVED: (FEED_PAIR, FOLLOWED_NOW),
        Change.BLOCK: (FEED_PAIR, FOLLOWED_NOW, ACCESS),
        Change.UNBLOCK: Unaffected("an unblock restores no follow, so no note comes back"),
        Change.MUTE: FEED_PAIR,
        Change.UNMUTE: FEED_PAIR,
        Change.PRIVACY_ON: (Unaffected("followers stay followers and keep the notes they had"), ACCESS),
        Change.PRIVACY_OFF: FEED_PAIR,
        Change.DEACTIVATION: kinds("feed.author"),
        Change.REACTIVATION: kinds("feed.author"),
        Change.DELETION: (kinds("feed.purge", "feed.pair"), FOLLOWED_NOW),
    },
)

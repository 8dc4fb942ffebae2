"""The home feed's and the lists' rows of the table of derived state (``core.derived``)."""

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

LISTS = kinds("feed.lists")
# A list page skips muted accounts itself, as the home feed's reads do.
MUTES_AT_READ = Unaffected("the list keys hold members, not mutes: a page skips whom the mute set says the reader mutes now")
NO_MEMBER = Unaffected("no account joins or leaves a list: members are added only by the list's owner")

declare(
    "lists and list timelines",
    app="feed",
    reconcile="feed.reconcile.lists_drift",
    cells={
        Change.FOLLOW: NO_MEMBER,
        Change.UNFOLLOW: (LISTS, FOLLOWED_NOW),
        Change.REQUEST_MADE: NO_FOLLOW,
        Change.REQUEST_APPROVED: NO_MEMBER,
        Change.REQUEST_REJECTED: NO_FOLLOW,
        Change.REQUEST_WITHDRAWN: NO_FOLLOW,
        Change.FOLLOWER_REMOVED: (LISTS, FOLLOWED_NOW),
        Change.BLOCK: (LISTS, FOLLOWED_NOW, ACCESS),
        Change.UNBLOCK: Unaffected("an unblock restores no follow, so no member comes back"),
        Change.MUTE: MUTES_AT_READ,
        Change.UNMUTE: MUTES_AT_READ,
        Change.PRIVACY_ON: (Unaffected("followers stay followers, and members are followed"), ACCESS),
        Change.PRIVACY_OFF: NO_MEMBER,
        Change.DEACTIVATION: LISTS,
        Change.REACTIVATION: LISTS,
        Change.DELETION: (LISTS, FOLLOWED_NOW),
    },
)

"""The follow graph's rows of the table of derived state (``core.derived``)."""

from __future__ import annotations

from core.derived import Change, ReadTime, Unaffected, declare, kinds

NO_EDGE = Unaffected("it makes or removes no follow")
PAIR = kinds("social.pair")

declare(
    "follow mirror and counts",
    app="social",
    reconcile="social.reconcile.graph_drift",
    cells={
        Change.FOLLOW: PAIR,
        Change.UNFOLLOW: PAIR,
        Change.REQUEST_MADE: NO_EDGE,
        Change.REQUEST_APPROVED: PAIR,
        Change.REQUEST_REJECTED: NO_EDGE,
        Change.REQUEST_WITHDRAWN: NO_EDGE,
        Change.FOLLOWER_REMOVED: PAIR,
        Change.BLOCK: PAIR,
        Change.UNBLOCK: Unaffected("an unblock restores no follow"),
        Change.MUTE: Unaffected("a mute keeps the follow"),
        Change.UNMUTE: Unaffected("a mute keeps the follow"),
        Change.PRIVACY_ON: Unaffected("followers stay followers"),
        Change.PRIVACY_OFF: kinds("social.privacy_open", "social.pair"),
        Change.DEACTIVATION: kinds("social.user"),
        Change.REACTIVATION: kinds("social.user"),
        Change.DELETION: kinds("social.user"),
    },
)

CONTROL = kinds("social.control")
NO_CONTROL = Unaffected("it makes or ends no block or mute")

declare(
    "block and mute sets",
    app="social",
    reconcile="social.reconcile.controls_drift",
    cells={
        Change.FOLLOW: NO_CONTROL,
        Change.UNFOLLOW: NO_CONTROL,
        Change.REQUEST_MADE: NO_CONTROL,
        Change.REQUEST_APPROVED: NO_CONTROL,
        Change.REQUEST_REJECTED: NO_CONTROL,
        Change.REQUEST_WITHDRAWN: NO_CONTROL,
        Change.FOLLOWER_REMOVED: NO_CONTROL,
        Change.BLOCK: CONTROL,
        Change.UNBLOCK: CONTROL,
        Change.MUTE: CONTROL,
        Change.UNMUTE: CONTROL,
        Change.PRIVACY_ON: NO_CONTROL,
        Change.PRIVACY_OFF: NO_CONTROL,
        Change.DEACTIVATION: Unaffected("blocks and mutes stay in force while an account is away"),
        Change.REACTIVATION: Unaffected("blocks and mutes stayed in force while it was away"),
        Change.DELETION: kinds("social.user"),
    },
)

SUGGEST = kinds("social.suggest")

declare(
    "who to follow and its reasons",
    app="social",
    reconcile="social.suggestions.suggestions_refresh",
    cells={
        Change.FOLLOW: SUGGEST,
        Change.UNFOLLOW: ReadTime("social.selectors.suggestions_for"),
        Change.REQUEST_MADE: SUGGEST,
        Change.REQUEST_APPROVED: SUGGEST,
        Change.REQUEST_REJECTED: ReadTime("social.selectors.suggestions_for"),
        Change.REQUEST_WITHDRAWN: ReadTime("social.selectors.suggestions_for"),
        Change.FOLLOWER_REMOVED: ReadTime("social.selectors.suggestions_for"),
        Change.BLOCK: ReadTime("social.selectors.suggestions_for"),
        Change.UNBLOCK: ReadTime("social.selectors.suggestions_for"),
        Change.MUTE: ReadTime("social.selectors.suggestions_for"),
        Change.UNMUTE: ReadTime("social.selectors.suggestions_for"),
        Change.PRIVACY_ON: ReadTime("social.selectors.suggestions_for"),
        Change.PRIVACY_OFF: ReadTime("social.selectors.suggestions_for"),
        Change.DEACTIVATION: ReadTime("social.selectors.suggestions_for"),
        Change.REACTIVATION: ReadTime("social.selectors.suggestions_for"),
        Change.DELETION: kinds("social.user"),
    },
)

declare(
    "directory rankings",
    app="social",
    reconcile="social.selectors.users_most_followed",
    cells={change: ReadTime("social.selectors.users_most_followed") for change in Change},
)

declare(
    "import jobs",
    app="social",
    reconcile="social.transfer.follows_import_run",
    cells={
        **{change: Unaffected("an import counts only the follows it made itself") for change in Change},
        Change.DELETION: Unaffected("the job goes with the importing account; a listed account deleted is skipped"),
    },
)

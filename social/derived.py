"""The follow graph's rows of the table of derived state (``core.derived``)."""

from __future__ import annotations

from core.derived import Cell, Change, Expires, ReadTime, Unaffected, declare, kinds

from .selectors import MOST_FOLLOWED_CACHE_SECONDS

NO_EDGE = Unaffected("it makes or removes no follow")
PAIR = kinds("social.pair")

# The follow mirror's cells; the profile samples kept follow the mirror's writes (below).
MIRROR_CELLS: dict[Change, Cell] = {
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
}

declare("follow mirror and counts", app="social", reconcile="social.reconcile.graph_drift", cells=MIRROR_CELLS)

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
        Change.UNMUTE: (CONTROL, ReadTime("social.visibility.muted_ids")),
        Change.PRIVACY_ON: NO_CONTROL,
        Change.PRIVACY_OFF: NO_CONTROL,
        Change.DEACTIVATION: Unaffected("blocks and mutes stay in force while an account is away"),
        Change.REACTIVATION: Unaffected("blocks and mutes stayed in force while it was away"),
        Change.DELETION: kinds("social.control", "social.user"),
    },
)

SUGGEST = kinds("social.suggest")
LINKS = ReadTime("social.selectors.suggestions_for")

declare(
    "who to follow and its reasons",
    app="social",
    reconcile="social.suggestions.suggestions_drift",
    cells={
        Change.FOLLOW: (SUGGEST, LINKS),
        Change.UNFOLLOW: (SUGGEST, LINKS),
        Change.REQUEST_MADE: SUGGEST,
        Change.REQUEST_APPROVED: (SUGGEST, LINKS),
        Change.REQUEST_REJECTED: SUGGEST,
        Change.REQUEST_WITHDRAWN: SUGGEST,
        Change.FOLLOWER_REMOVED: (SUGGEST, LINKS),
        Change.BLOCK: (SUGGEST, LINKS),
        Change.UNBLOCK: SUGGEST,
        Change.MUTE: SUGGEST,
        Change.UNMUTE: SUGGEST,
        Change.PRIVACY_ON: LINKS,
        Change.PRIVACY_OFF: kinds("social.privacy_open", "social.suggest"),
        Change.DEACTIVATION: (kinds("social.suggest_account"), LINKS),
        Change.REACTIVATION: kinds("social.suggest_account"),
        Change.DELETION: (SUGGEST, LINKS),
    },
)

RANKED = ReadTime("social.selectors.users_most_followed")
COUNTED = Expires(MOST_FOLLOWED_CACHE_SECONDS, "one follow moves a count by one; the ranking is one cached list for everyone")
ONLY_FOLLOWS = Unaffected("a ranking counts follow rows only")

declare(
    "directory rankings",
    app="social",
    reconcile="social.suggestions.rankings_drift",
    cells={
        Change.FOLLOW: COUNTED,
        Change.UNFOLLOW: COUNTED,
        Change.REQUEST_MADE: ONLY_FOLLOWS,
        Change.REQUEST_APPROVED: COUNTED,
        Change.REQUEST_REJECTED: ONLY_FOLLOWS,
        Change.REQUEST_WITHDRAWN: ONLY_FOLLOWS,
        Change.FOLLOWER_REMOVED: COUNTED,
        Change.BLOCK: (COUNTED, ReadTime("social.visibility.without_hidden")),
        Change.UNBLOCK: ReadTime("social.visibility.without_hidden"),
        Change.MUTE: ONLY_FOLLOWS,
        Change.UNMUTE: ONLY_FOLLOWS,
        Change.PRIVACY_ON: ONLY_FOLLOWS,
        Change.PRIVACY_OFF: COUNTED,
        Change.DEACTIVATION: (kinds("social.rankings"), RANKED),
        Change.REACTIVATION: kinds("social.rankings"),
        Change.DELETION: (kinds("social.rankings"), RANKED),
    },
)

HANDLED = ReadTime("social.transfer.follows_import_run")

declare(
    "import jobs",
    app="social",
    reconcile="social.transfer.imports_drift",
    cells={
        **dict.fromkeys(Change, HANDLED),
        Change.MUTE: Unaffected("a mute does not stop a follow"),
        Change.UNMUTE: Unaffected("a mute does not stop a follow"),
        Change.REACTIVATION: (kinds("social.follows_import"), HANDLED),
        Change.DELETION: (
            HANDLED,
            Unaffected("an importer's jobs go with its account; a listed account deleted is skipped when its line comes"),
        ),
    },
)

declare(
    "profile samples kept",
    app="social",
    reconcile="social.reconcile.profile_samples_drift",
    cells={
        # Every mirror write unlinks both accounts' graph version tokens, which the kept sample's
        # key holds (``social.mirror.queue_graph_version_change``): the mirror's cells ...
        **MIRROR_CELLS,
        # ... but the viewer's blocked accounts are in the key's digest too, and what leaves the
        # mirror unaffected is said in the samples' terms.
        Change.BLOCK: kinds("social.pair", "social.control"),
        Change.UNBLOCK: CONTROL,
        Change.MUTE: Unaffected("samples leave out blocked accounts, not muted ones"),
        Change.UNMUTE: Unaffected("samples leave out blocked accounts, not muted ones"),
        Change.PRIVACY_ON: Unaffected("followers stay followers; the page decides who sees the samples"),
    },
)

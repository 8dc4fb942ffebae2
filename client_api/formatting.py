"""Mastodon's JSON shapes (Account, Relationship, Status, Notification, Application) built from
followfeed's models, and the ``Link`` header of a list. Ids are strings, as Mastodon sends them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import cache
from html import escape
from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest
from django.urls import reverse

from core.templatetags.rows import Kept
from feed.models import List, Note
from feed.paging import FeedAuthor, FeedNote
from notifications.models import Notification
from social.selectors import Counts, follow_counts, follow_counts_many
from users.models import Marker, User

from .selectors import AuthorFacts, Relation, StatusFacts, status_facts

# Mastodon's notification types for followfeed's kinds (a request approved is Mastodon's "follow"
# from the side of the one who asked, which Mastodon does not notify: shown as "follow").
NOTIFICATION_TYPES = {"follow": "follow", "follow_request": "follow_request", "request_approved": "follow"}
MISSING_AVATAR = "/static/img/missing.png"


_MARKER = 987654321987


@cache
def _route(name: str) -> tuple[str, str]:
    """The path of route ``name`` around its one argument, ``(prefix, suffix)``: reversed once per
    process, as the site's ``path_of`` filter does (a page of 40 statuses would reverse 80 times)."""
    path = reverse(name, args=[_MARKER])
    prefix, _, suffix = path.partition(str(_MARKER))
    return prefix, suffix


def _origin(request: HttpRequest) -> str:
    """``scheme://host`` of ``request``, worked out once per request."""
    found = request.__dict__.get("_client_api_origin")
    if found is None:
        found = request.__dict__["_client_api_origin"] = request.build_absolute_uri("/")[:-1]
    return str(found)


def url_of(request: HttpRequest, name: str, argument: object) -> str:
    """The absolute URL of route ``name`` with its one argument (an id, or a username: ASCII
    letters, digits and ``_``, nothing to escape)."""
    prefix, suffix = _route(name)
    return f"{_origin(request)}{prefix}{argument}{suffix}"


def iso(moment: datetime | None) -> str | None:
    """``moment`` as Mastodon writes times (ISO 8601, UTC, milliseconds, ``Z``)."""
    if moment is None:
        return None
    # The fields, not strftime: a page of 40 statuses writes 80 of them.
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T"
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}.{moment.microsecond // 1000:03d}Z"
    )


def iso_day(moment: datetime | None) -> str | None:
    """The day of ``moment`` as Mastodon writes an account's ``created_at`` (midnight UTC)."""
    return None if moment is None else f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T00:00:00.000Z"


def html_text(text: str) -> str:
    """Plain ``text`` as Mastodon's HTML content: escaped, a paragraph, line breaks kept."""
    return "<p>" + escape(text).replace("\n", "<br />") + "</p>" if text else ""


def account_json(
    request: HttpRequest,
    user: User | FeedAuthor,
    *,
    statuses_count: int | None = None,
    counts: Counts | None = None,
    facts: AuthorFacts | None = None,
) -> dict[str, Any]:
    """Mastodon's Account for ``user`` (follow counts from the graph's mirror unless given;
    ``facts``: its ``status_facts``, for an author a timeline carries with its names only)."""
    counts = counts if counts is not None else follow_counts(user_id=user.pk)
    if facts is not None:
        bio, locked, statuses_count = facts.bio, facts.locked, facts.statuses_count
        created = None if facts.joined_day is None else f"{facts.joined_day}T00:00:00.000Z"
    else:
        # What was loaded, never a deferred read (a FeedAuthor carries its names only).
        fields = {} if isinstance(user, FeedAuthor) else user.__dict__
        bio, locked = fields.get("bio") or "", bool(fields.get("approve_followers", False))
        created = iso_day(fields.get("date_joined"))
    display_name = user.display_name if isinstance(user, FeedAuthor) else user.__dict__.get("display_name")
    if statuses_count is None:
        found = status_facts(author_ids=[user.pk], note_ids=()).authors.get(user.pk)
        statuses_count = found.statuses_count if found is not None else 0
    origin = _origin(request)
    key = (origin, user.pk, user.username, display_name or "", bio, locked, created)
    shape = _account_shapes.get(key, lambda: _account_shape(*key)).copy()
    # Empty lists of its own: a caller may add to them.
    shape.update(
        followers_count=counts.followers,
        following_count=counts.following,
        statuses_count=statuses_count,
        emojis=[],
        roles=[],
        fields=[],
    )
    return shape


# The parts of Accounts and Statuses that only their content decides, per process, keyed by that
# content (so never stale): a page of 40 statuses would build each one again.
_account_shapes: Kept[dict[str, Any]] = Kept(20_000)
_status_parts: Kept[tuple[str, str | None, str]] = Kept(20_000)


def _account_shape(
    origin: str, user_id: int, username: str, display_name: str, bio: str, locked: bool, created: str | None
) -> dict[str, Any]:
    """An Account of these fields, its counts and lists left for ``account_json`` to fill."""
    prefix, suffix = _route("feed:profile")
    profile = f"{origin}{prefix}{username}{suffix}"
    avatar = origin + MISSING_AVATAR
    return {
        "id": str(user_id),
        "username": username,
        "acct": username,
        "display_name": display_name,
        "locked": locked,
        "bot": False,
        "discoverable": True,
        "indexable": False,
        "group": False,
        "created_at": created,
        "note": html_text(bio),
        "url": profile,
        "uri": profile,
        "avatar": avatar,
        "avatar_static": avatar,
        "header": avatar,
        "header_static": avatar,
        "followers_count": 0,
        "following_count": 0,
        "statuses_count": 0,
        "last_status_at": None,
        "hide_collections": False,
        "noindex": False,
        "emojis": None,
        "roles": None,
        "fields": None,
    }


def credential_account_json(request: HttpRequest, user: User, *, follow_requests_count: int) -> dict[str, Any]:
    """Mastodon's CredentialAccount: the Account with ``source`` (what the owner set)."""
    shape = account_json(request, user)
    shape["source"] = {
        "privacy": "private" if user.approve_followers else "public",
        "sensitive": False,
        "language": None,
        "note": user.bio,
        "fields": [],
        "follow_requests_count": follow_requests_count,
        "hide_collections": False,
        "discoverable": True,
        "indexable": False,
        "attribution_domains": [],
        "quote_policy": "public",
    }
    shape["role"] = {"id": "-99", "name": "", "permissions": "0", "color": "", "highlighted": False}
    return shape


def relationship_json(relation: Relation) -> dict[str, Any]:
    """Mastodon's Relationship, every field (those followfeed has no counterpart for: false)."""
    return {
        "id": str(relation.user_id),
        "following": relation.following,
        "showing_reblogs": relation.following,
        "notifying": False,
        "languages": None,
        "followed_by": relation.followed_by,
        "blocking": relation.blocking,
        "blocked_by": relation.blocked_by,
        "muting": relation.muting,
        "muting_notifications": relation.muting,
        "requested": relation.requested,
        "requested_by": relation.requested_by,
        "domain_blocking": False,
        "endorsed": False,
        "note": "",
    }


def status_json(
    request: HttpRequest, note: Note | FeedNote, *, account: dict[str, Any] | None = None, settings: tuple[str, str] | None = None
) -> dict[str, Any]:
    """Mastodon's Status for ``note`` (``account``: its author's Account, when already built;
    ``settings``: its ``(visibility, spoiler_text)`` when ``note`` does not carry them)."""
    visibility, spoiler = settings or (getattr(note, "visibility", "public"), getattr(note, "spoiler_text", ""))
    url, created, content = _status_parts.get(
        (_origin(request), note.pk, note.body, note.created_at),
        lambda: (url_of(request, "feed:note_detail", note.pk), iso(note.created_at), html_text(note.body)),
    )
    author = note.author
    return {
        "id": str(note.pk),
        "uri": url,
        "url": url,
        "created_at": created,
        "edited_at": None,
        "account": account if account is not None else account_json(request, author),
        "content": content,
        "visibility": visibility,
        "sensitive": bool(spoiler),
        "spoiler_text": spoiler,
        "media_attachments": [],
        "application": None,
        "mentions": [],
        "tags": [],
        "emojis": [],
        "reblogs_count": 0,
        "favourites_count": 0,
        "replies_count": 0,
        "quotes_count": 0,
        "in_reply_to_id": None,
        "in_reply_to_account_id": None,
        "reblog": None,
        "poll": None,
        "card": None,
        "language": None,
        "text": None,
        "favourited": False,
        "reblogged": False,
        "muted": False,
        "bookmarked": False,
        "pinned": False,
        "filtered": [],
    }


def accounts_json(request: HttpRequest, users: Sequence[User]) -> list[dict[str, Any]]:
    """Accounts for ``users`` (in order), their counts read together."""
    ids = [user.pk for user in users]
    counts = {user_id: facts.statuses_count for user_id, facts in status_facts(author_ids=ids, note_ids=()).authors.items()}
    follows = follow_counts_many(user_ids=ids)
    return [account_json(request, user, statuses_count=counts.get(user.pk, 0), counts=follows.get(user.pk)) for user in users]


def statuses_json_of(
    request: HttpRequest, notes: Sequence[Note | FeedNote], known: StatusFacts | None = None
) -> list[dict[str, Any]]:
    """Statuses for ``notes`` as every timeline answers them, with the ``status_facts`` they need
    (the settings only of the notes that do not carry them, the home timeline's cached ones):
    ``known``, those already read, and what it lacks read here (no query when it lacks nothing)."""
    authors = {note.author_id for note in notes}
    unset = [note.pk for note in notes if not note.visibility]
    if known is not None:
        authors.difference_update(known.authors)
        unset = [note_id for note_id in unset if note_id not in known.settings]
    facts = status_facts(author_ids=sorted(authors), note_ids=unset) if authors or unset else StatusFacts({}, {})
    if known is not None:
        facts = StatusFacts.joined([known, facts])
    return statuses_json(request, notes, facts)


def statuses_json(request: HttpRequest, notes: Sequence[Note | FeedNote], facts: StatusFacts) -> list[dict[str, Any]]:
    """Statuses for ``notes``, each author's Account built once (``facts``: ``status_facts`` of
    the notes' authors and of those that are not models)."""
    accounts: dict[int, dict[str, Any]] = {}
    follows = follow_counts_many(user_ids=sorted({note.author_id for note in notes}))
    shapes = []
    for note in notes:
        if note.author_id not in accounts:
            accounts[note.author_id] = account_json(
                request, note.author, counts=follows.get(note.author_id), facts=facts.authors.get(note.author_id)
            )
        shapes.append(status_json(request, note, account=accounts[note.author_id], settings=facts.settings.get(note.pk)))
    return shapes


def notification_json(request: HttpRequest, notification: Notification) -> dict[str, Any]:
    """Mastodon's Notification for one of followfeed's (no status: followfeed's are about accounts)."""
    kind = NOTIFICATION_TYPES.get(notification.kind, notification.kind)
    return {
        "id": str(notification.pk),
        "type": kind,
        "group_key": f"ungrouped-{notification.pk}",
        "created_at": iso(notification.created_at),
        "account": account_json(request, notification.actor),
        "status": None,
    }


def link_header(request: HttpRequest, *, newest: str | None, oldest: str | None, more: bool) -> str:
    """Mastodon's ``Link`` header for a list whose items run from id ``newest`` to ``oldest``:
    ``next`` (older, ``max_id``) first when there may be more, then ``prev`` (newer, ``min_id``)."""
    if newest is None or oldest is None:
        return ""
    base = request.build_absolute_uri(request.path)
    kept = [
        (key, value) for key, values in request.GET.lists() if key not in ("max_id", "min_id", "since_id") for value in values
    ]
    parts = []
    if more:
        parts.append(f'<{base}?{urlencode([*kept, ("max_id", oldest)])}>; rel="next"')
    parts.append(f'<{base}?{urlencode([*kept, ("min_id", newest)])}>; rel="prev"')
    return ", ".join(parts)


def marker_json(marker: Marker) -> dict[str, Any]:
    """Mastodon's Marker: ``last_read_id`` (a string), ``version``, ``updated_at``."""
    return {"last_read_id": str(marker.last_read_id), "version": marker.version, "updated_at": iso(marker.updated_at)}


def list_json(list_: List) -> dict[str, Any]:
    """Mastodon's List: ``id`` (a string), ``title``, ``replies_policy`` and ``exclusive``."""
    return {"id": str(list_.pk), "title": list_.title, "replies_policy": list_.replies_policy, "exclusive": list_.exclusive}

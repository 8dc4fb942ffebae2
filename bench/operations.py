"""The measured operations, each three ways on the same accounts in the same run.

Ways:

``redis``      followfeed as deployed: the selectors and services with Redis up.
``database``   followfeed's own fallback, the follow graph read from MariaDB
               only: the same selectors with the circuit breaker held open
               (``database_only``), exactly what a page does while Redis is
               down. Writes still go to the database and the outbox.
``offset``     (followers page at depth only) the plain Django way most sites
               use: the same rows with ``ORDER BY ... LIMIT 50 OFFSET n``.
``actstream``  django-activity-stream 2.0 on the same follows (its ``Follow``
               rows) and notes (one "posted" ``Action`` per note), through
               its public API (``actstream.actions``, ``Follow.objects``,
               ``user_stream``) with its default generic-relation fetching.

Each operation cycles through prepared arguments (accounts and pairs
chosen once, deterministically, from the real graph), so every way answers
the same questions. Writes are undone: a follow is followed by its
unfollow, published notes are deleted afterwards.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType

from core.outbox import drain as outbox_drain
from core.paging import Cursor
from core.redis import redis_failed, redis_reset_breaker
from feed import selectors as feed_selectors
from feed import services as feed_services
from feed.models import Note
from social import selectors, services
from social.models import Follow

from . import timing

User = get_user_model()
PUBLISH_PREFIX = "bench publish"


@contextlib.contextmanager
def database_only() -> Iterator[None]:
    """Hold the circuit breaker open: every followfeed read uses the database path.

    The breaker is closed again afterwards and the outbox entries written
    meanwhile (mirror writes skipped while it was open) are applied.
    """
    logging.getLogger("core.redis").disabled = True
    redis_failed(RuntimeError("benchmark: database-only path"))
    try:
        yield
    finally:
        redis_reset_breaker()
        logging.getLogger("core.redis").disabled = False
        outbox_drain()


@dataclass
class Accounts:
    """The accounts the operations use, chosen from the imported graph."""

    followed: int  # the imported account with the most followers
    heavy: list[int]  # the two imported accounts that follow the most
    star: int  # single-key account with Scale.star_followers
    celebrity: int  # sharded account with Scale.celebrity_followers
    reader: int  # whose home feed is read (heavy[0])
    sample: list[int] = field(default_factory=list)  # random imported accounts
    edges: list[tuple[int, int]] = field(default_factory=list)  # existing follows among them
    non_edges: list[tuple[int, int]] = field(default_factory=list)  # pairs that do not follow


def pick_pairs(sample: list[int], rng: random.Random, count: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """``count`` existing follows (the first followee of sampled accounts) and ``count`` non-follows."""
    edges: list[tuple[int, int]] = []
    for user_id in sample:
        followee = Follow.objects.filter(follower_id=user_id).values_list("followee_id", flat=True).first()
        if followee is not None:
            edges.append((user_id, int(followee)))
        if len(edges) >= count:
            break
    non_edges: list[tuple[int, int]] = []
    while len(non_edges) < count:
        a, b = rng.sample(sample, 2)
        if not Follow.objects.filter(follower_id=a, followee_id=b).exists():
            non_edges.append((a, b))
    return edges, non_edges


@dataclass
class Way:
    """One way of doing an operation: ``call(i)`` does it once (i cycles the arguments)."""

    call: Callable[[int], Any]
    units_per_call: float = 1.0
    database_only: bool = False
    max_calls: int = timing.MAX_CALLS
    min_calls: int = timing.MIN_CALLS


@dataclass
class Operation:
    """An operation measured several ways; ``key`` names it in the JSON, ``title`` in the table."""

    key: str
    title: str
    ways: dict[str, Way]
    note: str = ""
    unit: str = "call"


def _cycle(items: list[Any]) -> Callable[[int], Any]:
    return lambda index: items[index % len(items)]


def short(count: int) -> str:
    """``20000`` -> ``20k``, ``1500`` -> ``1.5k``, ``800`` -> ``800``."""
    if count < 1000:
        return str(count)
    return f"{count / 1000:g}k"


def follow_graph_operations(
    accounts: Accounts,
    users: dict[int, Any],
    *,
    depth_cursor: Cursor,
    celebrity_depth_cursor: Cursor,
    depth: int,
    star_followers: int,
    celebrity_followers: int,
) -> list[Operation]:
    """The follow-graph operations (everything but the feed)."""
    from actstream import actions
    from actstream.models import Follow as StreamFollow

    user_type = ContentType.objects.get_for_model(User)
    pair = _cycle(accounts.edges + accounts.non_edges)
    account = _cycle(accounts.sample)
    writes = _cycle(accounts.non_edges)
    a, b = accounts.heavy
    star, celebrity = accounts.star, accounts.celebrity
    page = 50
    one_key = f"{short(star_followers)} followers"
    sharded = f"{short(celebrity_followers)} followers, sharded"

    def follow_unfollow(index: int) -> None:
        follower, followee = writes(index)
        services.follow_create(actor=users[follower], followee_id=followee)
        services.follow_delete(actor=users[follower], followee_id=followee)

    def stream_follow_unfollow(index: int) -> None:
        follower, followee = writes(index)
        actions.follow(users[follower], users[followee], send_action=False)
        actions.unfollow(users[follower], users[followee])

    def stream_is_following(index: int) -> bool:
        follower, followee = pair(index)
        return bool(actions.is_following(users[follower], users[followee]))

    def stream_counts(index: int) -> tuple[int, int]:
        user = users[account(index)]
        return StreamFollow.objects.followers_qs(user).count(), StreamFollow.objects.filter(user=user).count()

    def stream_followers(user_id: int, offset: int) -> list[Any]:
        rows = StreamFollow.objects.followers_qs(users[user_id]).order_by("-started", "-id")
        return [row.user for row in rows[offset : offset + page]]

    def offset_followers(user_id: int, offset: int) -> list[Any]:
        rows = selectors.active_follows().filter(followee_id=user_id).select_related("follower")
        return [row.follower for row in rows.order_by("-created_at", "-follower_id")[offset : offset + page]]

    def offset_follower_ids(user_id: int, offset: int) -> list[Any]:
        rows = selectors.active_follows().filter(followee_id=user_id).order_by("-created_at", "-follower_id")
        return list(rows.values_list("follower_id", "created_at")[offset : offset + page + 1])

    def stream_common(_: int) -> tuple[int, list[Any]]:
        mine = StreamFollow.objects.filter(user_id=a, content_type=user_type).values("object_id")
        ids = sorted(
            int(i)
            for i in StreamFollow.objects.filter(user_id=b, content_type=user_type, object_id__in=mine).values_list(
                "object_id", flat=True
            )
        )
        return len(ids), list(User.objects.filter(pk__in=ids[:12]))

    def stream_familiar(_: int) -> tuple[int, list[Any]]:
        mine = StreamFollow.objects.filter(user_id=a, content_type=user_type).values("object_id")
        ids = sorted(
            StreamFollow.objects.filter(content_type=user_type, object_id=str(accounts.followed), user_id__in=mine).values_list(
                "user_id", flat=True
            )
        )
        return len(ids), list(User.objects.filter(pk__in=ids[:3]))

    def counts(index: int) -> Any:
        return selectors.follow_counts(user_id=account(index))

    def is_following(index: int) -> bool:
        follower, followee = pair(index)
        return selectors.is_following(follower_id=follower, followee_id=followee)

    def followers_rows(user_id: int, cursor: Any) -> Any:
        # What the followers page and the JSON list read: the page's ids and the rows they print.
        return selectors.follow_list(kind="followers", user_id=user_id, cursor=cursor, limit=page, viewer_id=None, counts=False)

    def both(call: Callable[[int], Any], **options: Any) -> dict[str, Way]:
        return {"redis": Way(call, **options), "database": Way(call, database_only=True, **options)}

    return [
        Operation(
            "follow_unfollow",
            "follow + unfollow",
            {
                **both(follow_unfollow, max_calls=300),
                "actstream": Way(stream_follow_unfollow, max_calls=300),
            },
            note="request path: row, outbox entry and (Redis way) mirror write after commit; feed backfill goes to Celery",
        ),
        Operation(
            "is_following",
            "is-following",
            {**both(is_following), "actstream": Way(stream_is_following)},
        ),
        Operation(
            "counts",
            "follower + following counts",
            {**both(counts), "actstream": Way(stream_counts)},
        ),
        Operation(
            "followers_page_1_ids",
            f"followers page 1, ids only ({one_key})",
            both(lambda _: selectors.followers_items(user_id=star, cursor=None, limit=page + 1)),
            note="the Redis (or database) part of the page: ids and follow times, no user rows",
        ),
        Operation(
            "followers_page_1",
            f"followers page 1 ({one_key})",
            {
                **both(lambda _: followers_rows(star, None)),
                "actstream": Way(lambda _: stream_followers(star, 0)),
            },
        ),
        Operation(
            "followers_page_depth",
            f"followers page at depth {depth:,} ({one_key})",
            {
                **both(lambda _: followers_rows(star, depth_cursor)),
                "offset": Way(lambda _: offset_followers(star, depth), max_calls=300),
                "actstream": Way(lambda _: stream_followers(star, depth), max_calls=300),
            },
            note="followfeed: cursor (keyset) on both paths; offset and actstream: LIMIT 50 OFFSET depth",
        ),
        Operation(
            "followers_page_depth_ids",
            f"followers page at depth {depth:,}, ids only ({one_key})",
            {
                **both(lambda _: selectors.followers_items(user_id=star, cursor=depth_cursor, limit=page + 1)),
                "offset": Way(lambda _: offset_follower_ids(star, depth), max_calls=300),
            },
            note="the Redis (or database) part of the page: ids and follow times, no user rows",
        ),
        Operation(
            "followers_page_1_sharded",
            f"followers page 1 ({sharded})",
            {
                **both(lambda _: followers_rows(celebrity, None)),
                "actstream": Way(lambda _: stream_followers(celebrity, 0)),
            },
        ),
        Operation(
            "followers_page_1_sharded_ids",
            f"followers page 1, ids only ({sharded})",
            both(lambda _: selectors.followers_items(user_id=celebrity, cursor=None, limit=page + 1)),
            note="the Redis (or database) part of the page: ids and follow times, no user rows",
        ),
        Operation(
            "followers_page_depth_sharded",
            f"followers page at depth {depth:,} ({sharded})",
            {
                **both(lambda _: followers_rows(celebrity, celebrity_depth_cursor)),
                "offset": Way(lambda _: offset_followers(celebrity, depth), max_calls=300),
                "actstream": Way(lambda _: stream_followers(celebrity, depth), max_calls=300),
            },
        ),
        Operation(
            "followers_page_depth_sharded_ids",
            f"followers page at depth {depth:,}, ids only ({sharded})",
            {
                **both(lambda _: selectors.followers_items(user_id=celebrity, cursor=celebrity_depth_cursor, limit=page + 1)),
                "offset": Way(lambda _: offset_follower_ids(celebrity, depth), max_calls=300),
            },
            note="the Redis (or database) part of the page: ids and follow times, no user rows",
        ),
        Operation(
            "common_follows_ids",
            "common follows of two heavy accounts, ids only",
            both(lambda _: selectors.common_following_ids(user_id=a, other_id=b)),
            note="every id both follow (SINTER, or one SQL semi-join), no user rows",
        ),
        Operation(
            "common_follows",
            "common follows of two heavy accounts",
            {
                **both(lambda _: selectors.common_following(user_id=a, other_id=b)),
                "actstream": Way(stream_common, max_calls=500),
            },
            note="count and the first 12 accounts both follow",
        ),
        Operation(
            "familiar_followers",
            "familiar followers",
            {
                **both(lambda _: selectors.familiar_followers(viewer_id=a, user_id=accounts.followed)),
                "actstream": Way(stream_familiar, max_calls=500),
            },
            note="followers of the most-followed account whom the heaviest account follows: count and 3 of them",
        ),
    ]


def walk_followers(user_id: int, depth: int) -> Cursor:
    """The cursor after the first ``depth`` followers of ``user_id`` (walked in pages of 1000)."""
    cursor: Cursor | None = None
    done = 0
    while done < depth:
        items = selectors.followers_items(user_id=user_id, cursor=cursor, limit=min(1000, depth - done))
        if not items:
            raise SystemExit(f"user {user_id} has fewer than {depth} followers")
        done += len(items)
        member, score = items[-1]
        cursor = Cursor(score=score, member=member)
    assert cursor is not None
    return cursor


def walk_home(reader_id: int, pages: int, limit: int) -> Cursor | None:
    """The cursor of home-feed page ``pages + 1`` of ``reader_id`` (walked from the top)."""
    cursor: Cursor | None = None
    for _ in range(pages):
        cursor = feed_selectors.home_timeline(user_id=reader_id, cursor=cursor, limit=limit).next_cursor
        if cursor is None:
            raise SystemExit(f"the home feed of {reader_id} ends before page {pages + 1}")
    return cursor


def feed_operations(
    accounts: Accounts,
    users: dict[int, Any],
    *,
    page20_cursor: Cursor | None,
    stream_page20_offset: int,
    limit: int,
    celebrity_followers: int,
) -> list[Operation]:
    """Home feed page 1 and page 20 and the publish request, three ways."""
    from actstream.models import Action
    from actstream.signals import action

    reader = accounts.reader
    celebrity = users[accounts.celebrity]

    def home(cursor: Cursor | None) -> Callable[[int], Any]:
        def read(_: int) -> Any:
            page = feed_selectors.home_timeline(user_id=reader, cursor=cursor, limit=limit)
            return [note.author.username for note in page.notes]

        return read

    def stream_home(offset: int) -> Callable[[int], Any]:
        def read(_: int) -> Any:
            rows = Action.objects.user(users[reader])[offset : offset + limit]
            return [(row.actor, row.action_object) for row in rows]

        return read

    def publish(index: int) -> Note:
        return feed_services.note_create(author=celebrity, body=f"{PUBLISH_PREFIX} {index}")

    def database_publish(index: int) -> Note:
        return Note.objects.create(author=celebrity, body=f"{PUBLISH_PREFIX} {index}")

    def stream_publish(index: int) -> None:
        note = Note.objects.create(author=celebrity, body=f"{PUBLISH_PREFIX} {index}")
        action.send(celebrity, verb="posted", action_object=note)

    return [
        Operation(
            "home_feed_page_1",
            f"home feed page 1 ({limit} notes)",
            {
                "redis": Way(home(None)),
                "database": Way(home(None), database_only=True),
                "actstream": Way(stream_home(0), max_calls=500),
            },
        ),
        Operation(
            "home_feed_page_20",
            f"home feed page 20 ({limit} notes)",
            {
                "redis": Way(home(page20_cursor)),
                "database": Way(home(page20_cursor), database_only=True),
                "actstream": Way(stream_home(stream_page20_offset), max_calls=500),
            },
            note="followfeed: cursor; actstream: OFFSET",
        ),
        Operation(
            "publish",
            f"publish a note (request path, {short(celebrity_followers)} followers)",
            {
                "redis": Way(publish, max_calls=200),
                "database": Way(database_publish, max_calls=200),
                "actstream": Way(stream_publish, max_calls=200),
            },
            note="followfeed: note row + fan-out task queued; database only and actstream: a row, delivery happens at read time",
        ),
    ]

"""The benchmark's data: the real graph in MariaDB and Redis, big accounts, django-activity-stream's copy, notes.

Everything here is idempotent: a re-run finds what the last run left and
only fills in what is missing, so only the first run pays for the import.

- The graph: ``datatools.importer.graph_import`` of the dataset (users
  ``u<node>``), unless the database already holds exactly the expected
  number of edges between ``u`` accounts; then the Redis mirror is rebuilt
  (``social.rebuild.rebuild_all``) when its sentinel key is missing.
- Big accounts on top (Slashdot's largest has 2,552 followers): a *star*
  with ``STAR_FOLLOWERS`` (single-key layout) and a *celebrity* with
  ``CELEBRITY_FOLLOWERS`` (above ``FOLLOWERS_SHARD_THRESHOLD``, so its
  followers live in shard keys), made by ``datatools.celebrity.celebrity_make``.
- django-activity-stream: its ``Follow`` table gets the same edges by one
  ``INSERT ... SELECT`` from ``social_follow`` (its ``object_id`` is a
  string column, as the library defines it); its ``Action`` table gets one
  "posted" action per benchmark note.
- The home feed: ``Scale.feed_notes`` notes by the accounts the reader
  follows (publish times 37 s apart) among ``Scale.background_notes`` notes
  by random accounts over ten days (so the database paths search a real
  notes table), one activity-stream action per note, and the reader's inbox
  rebuilt from them (``feed.rebuild.inbox_rebuild``). Every account is
  marked as seen now, so fan-out delivers to it (``FEED_ACTIVE_DAYS``).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.utils import timezone

from core import redis_keys as core_keys
from core.outbox import drain as outbox_drain
from core.redis import get_redis
from datatools.celebrity import celebrity_make
from datatools.importer import (
    ImportStats,
    graph_import,
    read_edge_columns,
    unique_edges,
)
from feed import redis_keys as feed_keys
from feed.models import Note
from feed.rebuild import inbox_rebuild
from social.models import Follow
from social.rebuild import rebuild_all

User = get_user_model()

STAR = "bench_star"
CELEBRITY = "bench_celebrity"
NOTE_PREFIX = "bench note"


@dataclass
class Scale:
    """How big the benchmark's data is: dataset rows read (None: all), big accounts, notes."""

    dataset: str = "soc-Slashdot0902.txt.gz"
    limit: int | None = None
    star_followers: int = 20_000
    celebrity_followers: int = 100_000
    feed_notes: int = 1000
    background_notes: int = 50_000
    depth: int = 10_000


@dataclass
class Setup:
    """What ``ensure_all`` found or did, with timings (seconds) for the steps that ran."""

    edges: int = 0
    users: int = 0
    imported: bool = False
    import_stats: dict[str, Any] = field(default_factory=dict)
    steps: dict[str, float] = field(default_factory=dict)


def _timed(setup: Setup, name: str, started: float) -> None:
    setup.steps[name] = round(time.perf_counter() - started, 2)


def expected_edges(scale: Scale) -> int:
    """Follows the dataset slice holds once self-loops and repeats are dropped."""
    from datatools.datasets import dataset_path

    sources, targets = read_edge_columns(dataset_path(scale.dataset), scale.limit)
    return len(unique_edges(sources, targets, ImportStats()))


def graph_edge_count() -> int:
    """Follows between imported accounts (``u<node>``); big accounts' fans are not counted."""
    follow = connection.ops.quote_name(Follow._meta.db_table)
    users = connection.ops.quote_name(User._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {follow} f JOIN {users} a ON a.id = f.follower_id WHERE a.username LIKE %s", ["u%"])
        return int(cursor.fetchone()[0])


def ensure_graph(scale: Scale, setup: Setup) -> None:
    """Import the dataset unless the database already holds it; rebuild the mirror when needed."""
    from datatools.datasets import dataset_path

    started = time.perf_counter()
    expected = expected_edges(scale)
    have = graph_edge_count()
    if have > expected:
        raise SystemExit(
            f"database {connection.settings_dict['NAME']} holds {have} graph edges, more than the "
            f"{expected} of this dataset slice: run with --fresh to start over"
        )
    if have < expected:
        stats = graph_import(dataset_path(scale.dataset), limit=scale.limit)
        setup.imported = True
        setup.import_stats = {**stats.__dict__, "seconds": round(time.perf_counter() - started, 2)}
        _timed(setup, "import", started)
    setup.edges = expected
    setup.users = User.objects.filter(username__startswith="u").count()
    started = time.perf_counter()
    outbox_drain()  # anything an interrupted run left pending
    if setup.imported or not get_redis().exists(core_keys.sentinel_key()):
        rebuild_all()
        _timed(setup, "rebuild", started)


def ensure_big_account(username: str, followers: int, setup: Setup) -> int:
    """Make ``username`` have exactly ``followers`` fan accounts; returns its user id."""
    user = User.objects.filter(username=username).first()
    if (
        user is not None
        and Follow.objects.filter(followee_id=user.pk).count() == followers
        and _mirror_followers(user.pk) == followers
    ):
        return int(user.pk)
    started = time.perf_counter()
    result = celebrity_make(username=username, followers=followers)
    _timed(setup, f"make {username}", started)
    return int(result.user_id)


def _mirror_followers(user_id: int) -> int:
    from social.selectors import follow_counts

    return follow_counts(user_id=user_id).followers


def touch_all_users(setup: Setup) -> None:
    """Mark every account as seen now, so fan-out delivers to all of them (``FEED_ACTIVE_DAYS``)."""
    started = time.perf_counter()
    cutoff = timezone.now() - timedelta(days=1)
    User.objects.filter(last_seen_at__isnull=True).update(last_seen_at=timezone.now())
    User.objects.filter(last_seen_at__lt=cutoff).update(last_seen_at=timezone.now())
    _timed(setup, "mark accounts seen", started)


def ensure_actstream_follows(setup: Setup) -> None:
    """Give django-activity-stream's ``Follow`` the same edges as ``social_follow`` (bulk, one statement)."""
    from actstream.models import Follow as StreamFollow

    if StreamFollow.objects.count() == Follow.objects.count():
        return
    started = time.perf_counter()
    user_type = ContentType.objects.get_for_model(User)
    target = connection.ops.quote_name(StreamFollow._meta.db_table)
    source = connection.ops.quote_name(Follow._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {target}")
        cursor.execute(
            f"INSERT INTO {target} (user_id, content_type_id, object_id, actor_only, flag, started) "
            f"SELECT follower_id, %s, followee_id, TRUE, '', created_at FROM {source}",
            [user_type.pk],
        )
    _timed(setup, "load actstream follows", started)


def most_following(count: int) -> list[int]:
    """Ids of the ``count`` imported accounts that follow the most accounts, most first."""
    from django.db.models import Count

    rows = (
        Follow.objects.filter(follower__username__startswith="u")
        .values("follower_id")
        .annotate(n=Count("id"))
        .order_by("-n", "follower_id")[:count]
    )
    return [int(row["follower_id"]) for row in rows]


def most_followed(count: int) -> list[int]:
    """Ids of the ``count`` imported accounts with the most followers, most first."""
    from django.db.models import Count

    rows = (
        Follow.objects.filter(followee__username__startswith="u")
        .values("followee_id")
        .annotate(n=Count("id"))
        .order_by("-n", "followee_id")[:count]
    )
    return [int(row["followee_id"]) for row in rows]


def _bulk_notes(rows: list[Note]) -> None:
    """Insert notes and one activity-stream "posted" action per note."""
    from actstream.models import Action

    Note.objects.bulk_create(rows, batch_size=5000)
    bodies = [row.body for row in rows]
    created = list(Note.objects.filter(body__in=bodies).values_list("pk", "author_id", "created_at"))
    user_type = ContentType.objects.get_for_model(User)
    note_type = ContentType.objects.get_for_model(Note)
    Action.objects.bulk_create(
        [
            Action(
                actor_content_type=user_type,
                actor_object_id=str(author_id),
                verb="posted",
                action_object_content_type=note_type,
                action_object_object_id=str(pk),
                timestamp=created_at,
                public=True,
            )
            for pk, author_id, created_at in created
        ],
        batch_size=5000,
    )


def ensure_feed(reader_id: int, scale: Scale, setup: Setup) -> None:
    """Notes by the accounts ``reader_id`` follows among notes by everyone, their activity-stream
    actions, and the reader's inbox rebuilt from them."""
    client = get_redis()
    now = timezone.now().replace(microsecond=0)
    rng = random.Random(11)
    for kind, count in (("feed", scale.feed_notes), ("background", scale.background_notes)):
        prefix = f"{NOTE_PREFIX} {kind} "
        have = Note.objects.filter(body__startswith=prefix).count()
        if have >= count:
            continue
        started = time.perf_counter()
        if kind == "feed":
            authors = sorted(Follow.objects.filter(follower_id=reader_id).values_list("followee_id", flat=True))
            when = [now - timedelta(seconds=37 * index + 60) for index in range(count)]
        else:
            authors = list(User.objects.filter(username__startswith="u").values_list("pk", flat=True))
            when = [now - timedelta(seconds=rng.randrange(60, 10 * 86400)) for _ in range(count)]
        for start in range(have, count, 10_000):
            _bulk_notes(
                [
                    Note(author_id=rng.choice(authors), body=f"{prefix}{index}", created_at=when[index], fanned_out_at=now)
                    for index in range(start, min(start + 10_000, count))
                ]
            )
        _timed(setup, f"publish {kind} notes", started)
    inbox = feed_keys.inbox_key(reader_id)
    wanted = min(scale.feed_notes, feed_keys.inbox_max_len())
    if not client.exists(feed_keys.inbox_synced_key(reader_id)) or client.zcard(inbox) < wanted:
        started = time.perf_counter()
        inbox_rebuild(user_id=reader_id)
        _timed(setup, "rebuild reader inbox", started)


def remove_bench_notes(prefix: str) -> int:
    """Delete benchmark notes whose body starts with ``prefix`` (publish runs), and their actions."""
    from actstream.models import Action

    ids = list(Note.objects.filter(body__startswith=prefix).values_list("pk", flat=True))
    if ids:
        Action.objects.filter(
            action_object_content_type=ContentType.objects.get_for_model(Note),
            action_object_object_id__in=[str(i) for i in ids],
        ).delete()
        Note.objects.filter(pk__in=ids).delete()
    return len(ids)


def dataset_file(scale: Scale) -> Path:
    """Local path of the dataset (``datatools.datasets.dataset_path``)."""
    from datatools.datasets import dataset_path

    return dataset_path(scale.dataset)


def describe_servers() -> dict[str, Any]:
    """Versions and the settings that matter for the figures (Redis encodings, InnoDB buffer pool)."""
    client = get_redis()
    info = client.info("server")
    config = {
        key: value
        for name in ("zset-max-listpack-entries", "zset-max-listpack-value", "set-max-intset-entries", "set-max-listpack-entries")
        for key, value in client.config_get(name).items()
    }
    with connection.cursor() as cursor:
        cursor.execute("SELECT VERSION(), @@innodb_buffer_pool_size")
        version, pool = cursor.fetchone()
    return {
        "redis_version": info.get("redis_version"),
        "redis_config": config,
        "mariadb_version": version,
        "innodb_buffer_pool_bytes": int(pool),
        "redis_key_prefix": settings.REDIS_KEY_PREFIX,
        "followers_shards": int(settings.FOLLOWERS_SHARDS),
        "followers_shard_threshold": int(settings.FOLLOWERS_SHARD_THRESHOLD),
        "database": connection.settings_dict["NAME"],
    }

"""The data of the HTTP-under-load benchmark, made in a child process of ``bench/http_load.py``.

Run by the harness (never by hand, though it is safe to) as::

    DJANGO_SETTINGS_MODULE=bench.http_settings DATABASE_URL=... REDIS_URL=... \\
        .venv/bin/python bench/http_setup.py --plan PLAN.json [--limit EDGES] [--notes N]

It runs in its own process because the harness may be imported by
``bench/run.py``, whose process is already set up with other settings and
another database. Everything here is idempotent and runs against the
benchmark's own database and the private redis-server the harness started
(empty at every run):

1. creates the database if missing (``bench.db.ensure_database``), migrates
   it, and collects the static files into ``BENCH_STATIC_ROOT``;
2. undoes what the last run's write mix left: every follow created after
   ``BENCH_WRITES_AFTER`` (the import dates its follows in February 2009)
   and every note whose body starts with ``WRITE_NOTE_PREFIX``, by plain
   SQL, and marks every pending outbox entry applied; all of it is
   superseded by the rebuilds below (steps 5 and 7);
3. imports the graph (``datatools.importer.graph_import``) unless the
   database already holds exactly the dataset slice's follows;
4. publishes the Higgs replay (``manage.py simulate_activity --if-empty``)
   once;
5. rebuilds the follow mirror (``social.rebuild.rebuild_all``), unless the
   private Redis loaded a snapshot taken at the end of an earlier setup of
   the very same database state (``--snapshot``: follows, notes and
   accounts by count, id sum and highest id; see ``snapshot_usable``);
6. picks the accounts: the *reader* (the account following the most; the
   home feed's and the profile viewer's), the *followed* account (the most
   followers; its lists are paged), the profiles the reader opens (the most
   followed accounts) and groups of *writers* with the accounts each one
   toggles a follow of (ones it does not follow in the graph); opens a
   database session for the reader and each writer (Django's session
   machinery, as a sign-in does) and makes a CSRF secret;
7. rebuilds the pull set and every author's outbox, and the inboxes of the
   reader, the writers and every follower of a writer, marked seen now (so
   they are maintained and a writer's note fans out to all its followers,
   as to an active audience); other accounts' inboxes are not kept, as for
   readers who have not visited. After a rebuild, Redis is saved (SAVE) as
   the snapshot the next run starts from.

The plan it writes (JSON) is read by ``bench/http_load.py``::

    {"database": str, "settings": str,
     "graph": {"dataset": str, "limit": int | null, "edges": int, "users": int, "imported": bool},
     "notes": int, "inboxes": int (maintained), "redis": str (rebuilt, or the snapshot kept),
     "undone": {"follows": int, "notes": int, "outbox": int}, "csrf_token": str,
     "reader": Account, "followed": Account, "profiles": [username, ...],
     "writer_groups": {group: [[Writer, ...] per load-generator thread]},
     "follow_page_size": int, "steps_s": {step: seconds}}

    Account = {"id": int, "username": str, "followers": int, "following": int, "session": str | null}
    Writer = Account + {"targets": [user id, ...]}
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# The import dates follows from 2009-02-01, one second per edge: anything
# later was written by a benchmark run.
BENCH_WRITES_AFTER = datetime(2015, 1, 1, tzinfo=UTC)
WRITE_NOTE_PREFIX = "http bench note"
WRITER_GROUPS = ("preflight", "warmup_followfeed", "followfeed", "warmup_database_only", "database_only")
# Writers ranked this far down the most-followed list: accounts with an
# audience of their own (their notes fan out to real followers), not the top.
WRITERS_FROM_RANK = 200
TARGET_POOL = 1000
# A snapshot older than this is not reused (inboxes' synced markers expire after FEED_ACTIVE_DAYS).
SNAPSHOT_MAX_AGE_S = 3 * 86_400


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", required=True, help="where to write the plan (JSON)")
    parser.add_argument("--dataset", default="soc-Slashdot0902.txt.gz", help="graph in FOLLOWFEED_DATA_DIR")
    parser.add_argument("--limit", type=int, default=None, help="import only the first EDGES rows (the quick run's slice)")
    parser.add_argument("--notes", type=int, default=20_000, help="notes of the Higgs replay (first run only)")
    parser.add_argument("--threads", type=int, default=2, help="load-generator threads (one writer list each)")
    parser.add_argument("--writers-per-thread", type=int, default=4)
    parser.add_argument("--targets-per-writer", type=int, default=100)
    parser.add_argument("--profiles", type=int, default=50, help="profiles the reader opens (the most followed)")
    parser.add_argument(
        "--snapshot", default=None, help="JSON file describing the Redis snapshot (RDB) the private server loaded"
    )
    return parser.parse_args(argv)


def _timed(steps: dict[str, float], name: str, started: float) -> None:
    steps[name] = round(time.perf_counter() - started, 2)


def undo_last_writes() -> dict[str, int]:
    """Delete the last run's write-mix follows and notes and mark pending outbox entries applied.

    Plain SQL on purpose: no mirror write or outbox entry follows, because
    the private Redis is empty and the mirror and the feeds are rebuilt
    from the database right after (``main``, steps 5 and 7 of the module docstring).

    :returns: ``{"follows": rows deleted, "notes": rows deleted, "outbox": entries marked}``.
    """
    from django.db import connection
    from django.utils import timezone as dj_timezone

    from core.models import OutboxEntry
    from feed.models import Note
    from social.models import Follow

    follow = connection.ops.quote_name(Follow._meta.db_table)
    note = connection.ops.quote_name(Note._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {follow} WHERE created_at >= %s", [BENCH_WRITES_AFTER])
        follows = cursor.rowcount
        cursor.execute(f"DELETE FROM {note} WHERE body LIKE %s", [WRITE_NOTE_PREFIX + "%"])
        notes = cursor.rowcount
        cursor.execute("DELETE FROM django_session")
    outbox = OutboxEntry.objects.filter(applied_at__isnull=True).update(applied_at=dj_timezone.now())
    return {"follows": follows, "notes": notes, "outbox": outbox}


def database_fingerprint() -> dict[str, int]:
    """What the Redis snapshot must agree with: count, id sum and highest id of the follows, notes and accounts."""
    from django.db import connection

    from feed.models import Note
    from social.models import Follow
    from users.models import User

    found: dict[str, int] = {}
    with connection.cursor() as cursor:
        for name, model in (("follows", Follow), ("notes", Note), ("users", User)):
            cursor.execute(
                f"SELECT COUNT(*), COALESCE(SUM(id), 0), COALESCE(MAX(id), 0) FROM {connection.ops.quote_name(model._meta.db_table)}"
            )
            count, total, top = cursor.fetchone()
            found.update({f"{name}_count": int(count), f"{name}_id_sum": int(total), f"{name}_max_id": int(top)})
    return found


def snapshot_usable(path: Path | None, fingerprint: dict[str, int]) -> dict[str, Any] | None:
    """The description of the snapshot at ``path`` when the private Redis loaded it and it was
    taken of this very database state (``fingerprint``) less than ``SNAPSHOT_MAX_AGE_S`` ago, else None.

    The snapshot is saved at the end of a setup, before any load, and every later write of a run
    is undone by ``undo_last_writes``: so a matching fingerprint means the mirror and the inboxes in
    the snapshot are the database's.
    """
    from core.redis import get_redis
    from core.redis_keys import sentinel_key

    if path is None or not path.exists():
        return None
    described: dict[str, Any] = json.loads(path.read_text())
    if described.get("fingerprint") != fingerprint or time.time() - float(described.get("saved_at", 0)) > SNAPSHOT_MAX_AGE_S:
        return None
    if not get_redis().exists(sentinel_key()):
        return None
    return described


def snapshot_save(path: Path, fingerprint: dict[str, int], readers: list[int]) -> float:
    """SAVE the private Redis (its RDB file is where ``path``'s directory says) and describe it in
    ``path``; returns the seconds SAVE took."""
    import redis

    started = time.perf_counter()
    # Its own client: the application's gives up after REDIS_SOCKET_TIMEOUT (1 s), shorter than a SAVE.
    redis.Redis.from_url(os.environ["REDIS_URL"], socket_timeout=600).save()
    path.write_text(json.dumps({"fingerprint": fingerprint, "saved_at": time.time(), "readers": readers}) + "\n")
    return round(time.perf_counter() - started, 2)


def account(user_id: int, *, session: bool = False) -> dict[str, Any]:
    """``Account`` of the module docstring for ``user_id``; ``session``: open a signed-in session."""
    from importlib import import_module

    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY

    from social.models import Follow
    from users.models import User

    user = User.objects.get(pk=user_id)
    key: str | None = None
    if session:
        # What django.contrib.auth.login stores, without a password check.
        store = import_module(settings.SESSION_ENGINE).SessionStore()
        store[SESSION_KEY] = str(user.pk)
        store[BACKEND_SESSION_KEY] = settings.AUTHENTICATION_BACKENDS[0]
        store[HASH_SESSION_KEY] = user.get_session_auth_hash()
        store.create()
        key = store.session_key
    return {
        "id": int(user.pk),
        "username": user.username,
        "followers": Follow.objects.filter(followee_id=user.pk).count(),
        "following": Follow.objects.filter(follower_id=user.pk).count(),
        "session": key,
    }


def mastodon_token(user_id: int) -> str:
    """An access token of the Mastodon client API for ``user_id`` (read scope), as an app would hold."""
    from datetime import timedelta

    from django.utils import timezone as dj_timezone
    from django.utils.crypto import get_random_string
    from oauth2_provider.models import AccessToken, Application

    app, _ = Application.objects.get_or_create(
        name="bench",
        defaults={
            "redirect_uris": "urn:ietf:wg:oauth:2.0:oob",
            "client_type": "confidential",
            "authorization_grant_type": "authorization-code",
            "algorithm": "",
        },
    )
    token = get_random_string(40)
    AccessToken.objects.create(
        user_id=user_id, application=app, token=token, scope="read", expires=dj_timezone.now() + timedelta(days=1)
    )
    return token


def writer_groups(
    *, reader: int, followed: int, threads: int, per_thread: int, targets: int
) -> dict[str, list[list[dict[str, Any]]]]:
    """Writers for every group of ``WRITER_GROUPS``, ``per_thread`` per load-generator thread, each
    with ``targets`` accounts it does not follow (from the ``TARGET_POOL`` most followed, in an
    order of its own), every writer signed in.

    :returns: ``{group: [[Writer, ...] per thread]}``.
    """
    from bench.data import most_followed
    from social.models import Follow

    needed = len(WRITER_GROUPS) * threads * per_thread
    ranked = [u for u in most_followed(WRITERS_FROM_RANK + needed + 2) if u not in (reader, followed)]
    chosen = ranked[WRITERS_FROM_RANK : WRITERS_FROM_RANK + needed]
    if len(chosen) < needed:
        chosen = ranked[-needed:]
    pool = most_followed(TARGET_POOL)
    groups: dict[str, list[list[dict[str, Any]]]] = {}
    index = 0
    for group in WRITER_GROUPS:
        lists: list[list[dict[str, Any]]] = []
        for _ in range(threads):
            writers = []
            for _ in range(per_thread):
                writer = chosen[index]
                index += 1
                follows = set(Follow.objects.filter(follower_id=writer).values_list("followee_id", flat=True))
                candidates = [u for u in pool if u != writer and u not in follows]
                random.Random(writer).shuffle(candidates)
                writers.append({**account(writer, session=True), "targets": candidates[:targets]})
            lists.append(writers)
        groups[group] = lists
    return groups


def feed_rebuild(readers: list[int]) -> int:
    """The pull set and every author's outbox rebuilt, ``readers`` marked seen now and their inboxes
    rebuilt (so they are maintained: fan-out delivers to them); returns how many inboxes were built.

    Only these readers, not every account: the pages read the reader's inbox, and a publish fans
    out to its writer's followers, who are all among them.
    """
    from django.utils import timezone as dj_timezone

    from feed.rebuild import inboxes_rebuild, pull_authors_rebuild, rebuild_all_outboxes
    from users.models import User

    pull_authors_rebuild()
    rebuild_all_outboxes()
    built = 0
    for start in range(0, len(readers), 2000):
        batch = readers[start : start + 2000]
        User.objects.filter(pk__in=batch).update(last_seen_at=dj_timezone.now())
        built += len(inboxes_rebuild(batch))
    return built


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from bench.db import database_name, ensure_database

    url = os.environ["DATABASE_URL"]
    ensure_database(url)
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.utils.crypto import get_random_string

    from feed.note_counts import note_counts_load

    steps: dict[str, float] = {}
    started = time.perf_counter()
    call_command("migrate", verbosity=0, interactive=False)
    _timed(steps, "migrate", started)
    started = time.perf_counter()
    call_command("collectstatic", verbosity=0, interactive=False)
    _timed(steps, "collectstatic", started)

    from bench.data import Scale, dataset_file, expected_edges, graph_edge_count, most_followed, most_following
    from core.redis import get_redis
    from datatools.importer import graph_import
    from feed.models import Note
    from social.models import Follow
    from social.rebuild import rebuild_all
    from users.models import User

    undone = undo_last_writes()
    scale = Scale(dataset=args.dataset, limit=args.limit)
    expected = expected_edges(scale)
    have = graph_edge_count()
    if have > expected:
        raise SystemExit(f"database {database_name(url)} holds {have} follows, more than the {expected} of this slice: drop it")
    imported = have < expected
    if imported:
        started = time.perf_counter()
        graph_import(dataset_file(scale), limit=args.limit)
        _timed(steps, "import", started)
    started = time.perf_counter()
    call_command("simulate_activity", notes=args.notes, if_empty=True, no_rebuild=True, no_progress=True, verbosity=0)
    note_counts_load()  # a database replayed before the note counts were kept
    _timed(steps, "notes", started)
    snapshot_path = Path(args.snapshot) if args.snapshot else None
    fingerprint = database_fingerprint()
    snapshot = snapshot_usable(snapshot_path, fingerprint)
    if snapshot is None:
        started = time.perf_counter()
        get_redis().flushdb()
        rebuild_all()
        _timed(steps, "rebuild follow mirror", started)

    started = time.perf_counter()
    reader = most_following(1)[0]
    # The most followed account other than the reader (on Slashdot one account tops both lists).
    followed = next(u for u in most_followed(2) if u != reader)
    profiles = [u for u in most_followed(args.profiles + 1) if u != reader][: args.profiles]
    usernames = dict(User.objects.filter(pk__in=profiles).values_list("pk", "username"))
    groups = writer_groups(
        reader=reader,
        followed=followed,
        threads=args.threads,
        per_thread=args.writers_per_thread,
        targets=args.targets_per_writer,
    )
    _timed(steps, "accounts and sessions", started)

    writers = sorted({w["id"] for lists in groups.values() for thread in lists for w in thread})
    readers = sorted({reader, *writers, *Follow.objects.filter(followee_id__in=writers).values_list("follower_id", flat=True)})
    if snapshot is None or snapshot.get("readers") != readers:
        started = time.perf_counter()
        inboxes = feed_rebuild(readers)
        _timed(steps, "rebuild feeds", started)
        if snapshot_path is not None:
            steps["save Redis snapshot"] = snapshot_save(snapshot_path, fingerprint, readers)
        redis_state = "rebuilt from the database" + (" and saved as a snapshot for the next run" if snapshot_path else "")
    else:
        inboxes = len(readers)
        redis_state = (
            f"the snapshot of {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(snapshot['saved_at']))}, "
            "taken after the last rebuild of this same database state"
        )

    plan: dict[str, Any] = {
        "database": database_name(url),
        "settings": os.environ.get("DJANGO_SETTINGS_MODULE"),
        "graph": {
            "dataset": args.dataset,
            "limit": args.limit,
            "edges": expected,
            "users": User.objects.count(),
            "imported": imported,
        },
        "notes": Note.objects.count(),
        "inboxes": inboxes,
        "redis": redis_state,
        "undone": undone,
        "csrf_token": get_random_string(32),
        "reader": {**account(reader, session=True), "token": mastodon_token(reader)},
        "followed": account(followed),
        "profiles": [usernames[u] for u in profiles],
        "writer_groups": groups,
        "follow_page_size": int(settings.FOLLOW_PAGE_SIZE),
        "steps_s": steps,
    }
    Path(args.plan).write_text(json.dumps(plan, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

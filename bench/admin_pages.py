"""Render the admin's heavy pages on a full graph and print SQL query counts and render times.

Run against a database holding a real graph, e.g. soc-Slashdot0902 (82k
accounts, 870k follows) in its own MariaDB database and Redis prefix:

    export DATABASE_URL=mysql://root:@127.0.0.1:3306/followfeed_bench_admin \\
           REDIS_URL=redis://127.0.0.1:6379/0 REDIS_KEY_PREFIX=benchadmin:
    .venv/bin/python manage.py migrate
    .venv/bin/python manage.py import_graph soc-Slashdot0902.txt.gz
    .venv/bin/python bench/admin_pages.py [--repeat 5]

Each page is rendered by Django's test ``Client`` as a superuser (a
``bench_admin`` account is created if missing): once to warm caches, then
``--repeat`` times. It prints the query count of the last render, the
median and max render time in ms, and the median time spent in SQL (ms). Query counts are checked against
``MAX_QUERIES``: the script exits 1 if a page goes over its bound (the
number of queries must not depend on the size of the graph), 0 otherwise.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

import django

django.setup()

from django.db import connection  # noqa: E402
from django.db.models import Count  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext, setup_test_environment  # noqa: E402

from feed.models import Note  # noqa: E402
from social.models import Follow  # noqa: E402
from users.models import User  # noqa: E402

# Upper bounds on the SQL queries of each page (sessions, auth, bounded
# counts, the page's rows, the follow panel); they must hold on any graph.
MAX_QUERIES = {
    "follow changelist": 8,
    "follow changelist, search by username": 9,
    "follow changelist, followers of the top account": 8,
    "follow changelist, filter 'a side deactivated'": 8,
    "user changelist": 8,
    "user change page, most-followed account": 14,
    "note changelist": 7,
    "note changelist, filter hidden": 7,
    "mirror health page": 8,
}


def most_followed_user_id() -> tuple[int, int]:
    """The account with the most followers and that number (one aggregate, about 0.5 s)."""
    row = Follow.objects.values("followee_id").annotate(n=Count("id")).order_by("-n").first()
    assert row is not None, "the database has no follows: import a graph first"
    return int(row["followee_id"]), int(row["n"])


def measure(client: Client, url: str, repeat: int) -> tuple[int, list[float], list[float], int]:
    """Render ``url`` ``repeat`` times after one warm-up.

    :returns: ``(queries of the last render, render times in ms, time spent
        in SQL per render in ms, status)``.
    """
    client.get(url)
    times: list[float] = []
    sql_times: list[float] = []
    queries = 0
    status = 0
    for _ in range(repeat):
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - started) * 1000)
        queries = len(captured.captured_queries)
        sql_times.append(sum(float(q["time"]) for q in captured.captured_queries) * 1000)
        status = response.status_code
    return queries, times, sql_times, status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed renders per page (default 5)")
    args = parser.parse_args(argv)

    setup_test_environment()
    admin, _ = User.objects.get_or_create(username="bench_admin", defaults={"is_staff": True, "is_superuser": True})
    client = Client()
    client.force_login(admin)
    top_id, top_followers = most_followed_user_id()
    top = User.objects.get(pk=top_id)
    follows = Follow.objects.count()
    users = User.objects.count()
    notes = Note.objects.count()
    print(
        f"graph: {users:,} accounts, {follows:,} follows, {notes:,} notes; "
        f"most-followed {top.username} (id {top_id}) with {top_followers:,} followers"
    )
    print(f"database {connection.settings_dict['NAME']} ({connection.vendor}), {args.repeat} timed renders per page\n")

    pages = {
        "follow changelist": "/admin/social/follow/",
        "follow changelist, search by username": f"/admin/social/follow/?q={top.username}",
        "follow changelist, followers of the top account": f"/admin/social/follow/?followee__id__exact={top_id}",
        "follow changelist, filter 'a side deactivated'": "/admin/social/follow/?accounts=deactivated",
        "user changelist": "/admin/users/user/",
        "user change page, most-followed account": f"/admin/users/user/{top_id}/change/",
        "note changelist": "/admin/feed/note/",
        "note changelist, filter hidden": "/admin/feed/note/?state=hidden",
        "mirror health page": "/admin/core/outboxentry/health/",
    }
    failed = False
    print(f"{'page':52} {'status':>6} {'queries':>7} {'bound':>5} {'median ms':>10} {'max ms':>8} {'SQL ms':>7}")
    for name, url in pages.items():
        queries, times, sql_times, status = measure(client, url, args.repeat)
        bound = MAX_QUERIES[name]
        over = queries > bound or status != 200
        failed |= over
        print(
            f"{name:52} {status:>6} {queries:>7} {bound:>5} {statistics.median(times):>10.1f} {max(times):>8.1f}"
            f" {statistics.median(sql_times):>7.1f}" + ("  OVER BOUND" if over else "")
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

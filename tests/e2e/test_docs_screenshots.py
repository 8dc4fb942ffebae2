"""The README's screenshots: profile, followers list and home feed at 390px and 1280px.

Not part of the default run (it imports a real graph slice): run it with

    FOLLOWFEED_SCREENSHOTS=1 .venv/bin/pytest tests/e2e/test_docs_screenshots.py

It imports the first 20,000 votes of SNAP's wiki-Vote (Leskovec, Huttenlocher,
Kleinberg, CHI 2010; "A votes for B" read as "A follows B") from
FOLLOWFEED_DATA_DIR into the test database, gives the handful of accounts that
appear on screen a display name (the dataset has only ids), publishes a dozen
notes through the real worker, and writes docs/screenshots/*.png.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from datatools.datasets import dataset_path
from datatools.importer import graph_import
from feed import services as feed_services
from feed.models import Note
from social.rebuild import rebuild_all
from tests.support.browser import DESKTOP, MOBILE, WORKER_TIMEOUT, wait_for_fan_out, wait_for_synced_inbox
from tests.support.faults import wait_until
from users.models import User

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        os.environ.get("FOLLOWFEED_SCREENSHOTS") != "1", reason="writes docs/screenshots; set FOLLOWFEED_SCREENSHOTS=1"
    ),
]

OUT = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
EDGES = 20_000
NAMES = [
    "Ada Okafor",
    "Bruno Lindqvist",
    "Chen Wei",
    "Dana Kowalski",
    "Emeka Obi",
    "Farah Haddad",
    "Gustavo Reyes",
    "Hana Sato",
    "Ines Duarte",
    "Jonas Weber",
    "Kavya Iyer",
    "Liam O'Neill",
    "Maya Cohen",
    "Nikolai Petrov",
    "Olu Adeyemi",
    "Priya Nair",
    "Quentin Roy",
    "Rosa Martins",
    "Sven Aalto",
    "Tamar Levi",
    "Uma Singh",
    "Viktor Horvat",
    "Wen Li",
    "Ximena Cruz",
    "Yusuf Demir",
    "Zoe Laurent",
]
NOTES = [
    ("Finished the rewrite of the citation guidelines. Feedback welcome before Friday.", 3),
    ("Reminder: the vote on the new admin policy closes tonight at 23:00 UTC.", 12),
    ("Spent the morning cleaning up 40 orphaned talk pages. Oddly satisfying.", 47),
    ("Does anyone have a good source for the 1911 census figures? The usual one is down.", 95),
    ("Three new reviewers joined the project this week. Say hello!", 160),
    ("Coffee, a long list of stubs, and a quiet Sunday. Perfect.", 300),
    ("Proposal: merge the two style guides into one page. Draft is on my profile.", 520),
    ("Thanks to everyone who voted. Humbled by the support.", 1440),
    ("Long thread about neutral wording in biographies. Worth a read if you edit those.", 2900),
    ("Back from a week offline. What did I miss?", 4400),
    ("New bot run finished: 12,431 broken links fixed.", 8700),
    ("First edit ever was ten years ago today.", 12000),
]


def _top(sql: str, params: list[Any]) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [int(row[0]) for row in cursor.fetchall()]


def test_write_the_readme_screenshots(stack, open_session):
    graph_import(dataset_path("wiki-Vote.txt.gz"), limit=EDGES)
    rebuild_all()
    table = "social_follow"
    # The profile: the most followed account of the slice that follows at least ten others.
    star_id = _top(
        f"""SELECT followee_id FROM {table}
            WHERE followee_id IN (SELECT follower_id FROM {table} GROUP BY follower_id HAVING COUNT(*) >= 10)
            GROUP BY followee_id ORDER BY COUNT(*) DESC, followee_id LIMIT 1""",
        [],
    )[0]
    # The viewer: not following the star yet, and both following many of the star's
    # followers (familiar followers) and many of the accounts the star follows (you both follow).
    viewer_id = _top(
        f"""SELECT v.follower_id FROM {table} v
            WHERE v.follower_id <> %s
              AND v.follower_id NOT IN (SELECT follower_id FROM {table} WHERE followee_id = %s)
              AND (v.followee_id IN (SELECT follower_id FROM {table} WHERE followee_id = %s)
                   OR v.followee_id IN (SELECT followee_id FROM {table} WHERE follower_id = %s))
            GROUP BY v.follower_id
            HAVING SUM(v.followee_id IN (SELECT followee_id FROM {table} WHERE follower_id = %s)) > 0
            ORDER BY COUNT(*) DESC, v.follower_id LIMIT 1""",
        [star_id, star_id, star_id, star_id, star_id],
    )[0]
    authors = _top(f"SELECT followee_id FROM {table} WHERE follower_id = %s ORDER BY followee_id LIMIT 8", [viewer_id])
    shown = [star_id, viewer_id, *authors]
    shown += _top(
        f"SELECT follower_id FROM {table} WHERE followee_id = %s ORDER BY created_at DESC, follower_id LIMIT 16", [star_id]
    )
    shown += _top(f"SELECT followee_id FROM {table} WHERE follower_id = %s ORDER BY followee_id LIMIT 30", [viewer_id])
    names = iter(NAMES)
    for user_id in dict.fromkeys(shown):
        name = next(names, None)
        if name is None:
            break
        User.objects.filter(pk=user_id).update(display_name=name)
    User.objects.filter(pk=star_id).update(bio="Admin since 2004. Copy-editing, citations and the occasional bot run.")
    User.objects.filter(pk=viewer_id).update(last_seen_at=timezone.now())
    star, viewer = User.objects.get(pk=star_id), User.objects.get(pk=viewer_id)

    now = timezone.now().replace(microsecond=0)
    for n, (body, minutes) in enumerate(NOTES):
        feed_services.note_create(
            author=User.objects.get(pk=authors[n % len(authors)]), body=body, created_at=now - timedelta(minutes=minutes)
        )
    feed_services.note_create(
        author=star,
        body="Working on the featured-article backlog this weekend. Ping me with nominations.",
        created_at=now - timedelta(minutes=25),
    )
    wait_for_fan_out([note.pk for note in Note.objects.all()])

    OUT.mkdir(parents=True, exist_ok=True)
    for viewport, width in ((MOBILE, 390), (DESKTOP, 1280)):
        person = open_session(viewer, viewport=viewport, label=f"viewer-{width}")
        page = person.page
        page.goto("/home")
        wait_for_synced_inbox(viewer)

        def home_filled(page: Any = page) -> bool:
            page.reload()
            return page.locator("li.note").count() >= len(NOTES)

        wait_until(home_filled, timeout=WORKER_TIMEOUT, interval=0.5, what="home feed")
        assert page.locator(".catching-up").count() == 0
        page.screenshot(path=str(OUT / f"home-{width}.png"))

        page.goto(f"/u/{star.username}/")
        assert page.locator("section.familiar").count() == 1 and page.locator("section.common").count() == 1
        page.screenshot(path=str(OUT / f"profile-{width}.png"))

        page.goto(f"/u/{star.username}/followers/")
        page.screenshot(path=str(OUT / f"followers-{width}.png"))

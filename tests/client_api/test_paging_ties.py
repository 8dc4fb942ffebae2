"""Mastodon's id paging over timelines whose notes share a millisecond (a busy site, an import):
an id stands for its note's place in the timeline, so walking ``next`` (``max_id``) or ``prev``
(``min_id``) links gives every note once, in the timeline's order; found by a break-it pass, where
the notes of one millisecond after the cursor were dropped."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import parse_qsl, urlparse

import pytest

from feed.models import now_whole_ms
from feed.selectors import home_timeline, list_timeline
from feed.services import list_create, list_members_add, note_create
from social.services import follow_create
from tests.client_api.conftest import Api, make_token
from tests.support.accounts import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def ties(oauth_app, run_commits):
    """A reader following 6 authors who published 24 notes in 3 milliseconds, with a list of all six."""
    reader = make_user("reader")
    authors = [make_user(f"author{index}") for index in range(6)]
    for author in authors:
        run_commits(lambda author=author: follow_create(actor=reader, followee_id=author.pk))
    moments = [now_whole_ms() - timedelta(seconds=seconds) for seconds in (30, 20, 10)]
    for index in range(24):
        # Ids rise while the times go round: each millisecond's notes are not adjacent ids.
        run_commits(
            lambda index=index: note_create(author=authors[index % 6], body=f"note {index}", created_at=moments[index % 3])
        )
    crew = run_commits(lambda: list_create(owner=reader, title="all six"))
    run_commits(lambda: list_members_add(list_=crew, account_ids=[author.pk for author in authors]))
    make_token(reader, oauth_app, token="reader-token")
    return reader, crew


def walk(api: Api, path: str, start: dict[str, str], rel: str) -> list[list[str]]:
    """The ids of each page from ``start``, following the ``rel`` link until a page is empty or has none."""
    pages: list[list[str]] = []
    query = dict(start)
    for _ in range(30):
        response = api.get(path, query)
        assert response.status_code == 200, response.content
        ids = [status["id"] for status in response.json()]
        if not ids:
            break
        pages.append(ids)
        link = next((part for part in response.get("Link", "").split(", ") if f'rel="{rel}"' in part), None)
        if link is None:
            break
        query = dict(parse_qsl(urlparse(link.split(">")[0].lstrip("<")).query))
    return pages


@pytest.mark.parametrize("timeline", ["home", "list"])
def test_next_links_give_every_note_once_in_the_timelines_order(ties, timeline) -> None:
    reader, crew = ties
    path = "/api/v1/timelines/home" if timeline == "home" else f"/api/v1/timelines/list/{crew.pk}"
    read = (
        home_timeline(user_id=reader.pk, cursor=None, limit=100)
        if timeline == "home"
        else list_timeline(reader_id=reader.pk, list_id=crew.pk, cursor=None, limit=100)
    )
    expected = [str(note.pk) for note in read.notes]

    pages = walk(Api("reader-token"), path, {"limit": "5"}, "next")

    assert len(expected) == 24
    assert [status for page in pages for status in page] == expected
    assert all(len(page) == 5 for page in pages[:-1])


def test_prev_links_from_the_bottom_give_every_note_once(ties) -> None:
    reader, _ = ties
    expected = [str(note.pk) for note in home_timeline(user_id=reader.pk, cursor=None, limit=100).notes]

    pages = walk(Api("reader-token"), "/api/v1/timelines/home", {"limit": "5", "min_id": "0"}, "prev")

    assert [status for page in reversed(pages) for status in page] == expected


def test_since_id_gives_the_newest_notes_before_it(ties) -> None:
    reader, _ = ties
    expected = [str(note.pk) for note in home_timeline(user_id=reader.pk, cursor=None, limit=100).notes]
    bound = expected[10]

    newest = Api("reader-token").get("/api/v1/timelines/home", {"limit": "5", "since_id": bound}).json()
    above = Api("reader-token").get("/api/v1/timelines/home", {"limit": "5", "min_id": bound}).json()

    assert [status["id"] for status in newest] == expected[:5]
    assert [status["id"] for status in above] == expected[5:10]

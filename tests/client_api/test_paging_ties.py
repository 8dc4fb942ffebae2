"""Mastodon's id paging over timelines whose notes share a millisecond (a busy site, an import):
an id stands for its note's place in the timeline, so walking ``next`` (``max_id``) or ``prev``
(``min_id``) links gives every note once, in the timeline's order; found by a break-it pass, where
the notes of one millisecond after the cursor were dropped."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import parse_qsl, urlparse

import pytest

from client_api import selectors
from feed.models import DIRECT, now_whole_ms
from feed.selectors import home_timeline, list_timeline
from feed.services import list_create, list_members_add, note_create
from social.services import follow_create
from tests.client_api.conftest import Api, make_token
from tests.support.accounts import make_user
from users.models import User

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


def partition(api: Api, bound: int, everything: list[str]) -> tuple[list[str], list[str]]:
    """The notes ``since_id=bound`` and ``max_id=bound`` give (the whole timeline fits a page)."""
    newer = [s["id"] for s in api.get("/api/v1/timelines/home", {"limit": "40", "since_id": bound}).json()]
    older = [s["id"] for s in api.get("/api/v1/timelines/home", {"limit": "40", "max_id": bound}).json()]
    assert len(everything) <= 40
    return newer, older


class TestIdsWithoutANote:
    """Found by a second break-it pass: an id no note has was placed inside a millisecond,
    where one note fell on neither side, or at a backdated note far down the timeline."""

    def test_every_id_splits_the_timeline_in_two_with_each_note_on_one_side(self, ties, run_commits) -> None:
        api = Api("reader-token")
        ids = sorted(int(s["id"]) for s in api.get("/api/v1/timelines/home", {"limit": "40"}).json())
        # A deleted account's notes go with it: their ids name no note.
        run_commits(lambda: User.objects.get(username="author5").delete())
        everything = [s["id"] for s in api.get("/api/v1/timelines/home", {"limit": "40"}).json()]

        assert len(everything) == 20
        for bound in range(ids[0] - 1, ids[-1] + 2):
            newer, older = partition(api, bound, everything)
            assert newer + older == [note_id for note_id in everything if note_id != str(bound)], bound

    def test_an_id_above_every_note_is_the_top_even_when_the_newest_id_is_backdated(self, ties, run_commits) -> None:
        author = User.objects.get(username="author0")
        backdated = run_commits(
            lambda: note_create(author=author, body="imported", created_at=now_whole_ms() - timedelta(days=1))
        )
        api = Api("reader-token")
        everything = [s["id"] for s in api.get("/api/v1/timelines/home", {"limit": "40"}).json()]

        newer, older = partition(api, backdated.pk + 5, everything)

        assert everything[-1] == str(backdated.pk)
        assert (newer, older) == ([], everything)


class TestMinIdDeepDown:
    def test_min_id_pages_from_the_bottom_of_a_timeline_deeper_than_one_scan(self, ties, monkeypatch) -> None:
        reader, _ = ties
        expected = [str(note.pk) for note in home_timeline(user_id=reader.pk, cursor=None, limit=100).notes]
        # One scan reads 4 notes (of 24): the oldest page lies five scans down.
        monkeypatch.setattr(selectors, "SCAN_BATCH", 2)
        monkeypatch.setattr(selectors, "SCAN_ROUNDS", 2)

        bottom = Api("reader-token").get("/api/v1/timelines/home", {"limit": "3", "min_id": "0"}).json()
        above = Api("reader-token").get("/api/v1/timelines/home", {"limit": "3", "min_id": expected[-1]}).json()

        assert [status["id"] for status in bottom] == expected[-3:]
        assert [status["id"] for status in above] == expected[-4:-1]

    def test_min_id_deeper_than_the_deep_scan_is_a_400_not_a_wrong_page(self, ties, monkeypatch) -> None:
        monkeypatch.setattr(selectors, "SCAN_BATCH", 2)
        monkeypatch.setattr(selectors, "DEEP_SCAN_ROUNDS", 3)

        response = Api("reader-token").get("/api/v1/timelines/home", {"limit": "3", "min_id": "0"})

        assert response.status_code == 400
        assert "max_id" in response.json()["error"]


def test_exclude_direct_fills_the_page_from_further_down(oauth_app, run_commits) -> None:
    author = make_user("author")
    make_token(author, oauth_app, token="author-token")
    public = [run_commits(lambda index=index: note_create(author=author, body=f"public {index}")).pk for index in range(6)]
    for index in range(4):
        run_commits(lambda index=index: note_create(author=author, body=f"direct {index}", visibility=DIRECT))

    pages = walk(Api("author-token"), f"/api/v1/accounts/{author.pk}/statuses", {"limit": "2", "exclude_direct": "true"}, "next")

    assert [status for page in pages for status in page] == [str(note_id) for note_id in reversed(public)]


def test_the_id_of_a_deleted_note_inside_a_millisecond_leaves_no_note_out(oauth_app, run_commits) -> None:
    reader, kept, gone = make_user("reader"), make_user("kept"), make_user("gone")
    for author in (kept, gone):
        run_commits(lambda author=author: follow_create(actor=reader, followee_id=author.pk))
    moment = now_whole_ms() - timedelta(seconds=5)
    notes = [
        run_commits(lambda author=author: note_create(author=author, body="same ms", created_at=moment))
        for author in (kept, kept, gone, kept)
    ]
    run_commits(gone.delete)
    make_token(reader, oauth_app, token="reader-token")
    everything = [str(note.pk) for note in (notes[0], notes[1], notes[3])]

    newer, older = partition(Api("reader-token"), notes[2].pk, everything)

    assert sorted(newer + older) == sorted(everything)

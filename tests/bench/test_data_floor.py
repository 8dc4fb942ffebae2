"""The HTTP benchmark's data floor (``bench/http_urls.py``): the notes it answers, in the inbox's order."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from core.redis import get_redis
from feed.rebuild import inbox_rebuild
from tests.support.accounts import signed_in
from tests.support.feed import Publisher, inbox_ids

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def bench_urls(settings: Any) -> None:
    settings.ROOT_URLCONF = "bench.http_urls"


def test_the_data_floor_answers_the_readers_twenty_newest_inbox_notes_newest_first(
    active_alice: Any, active_bob: Any, active_charlie: Any, follow: Any
) -> None:
    follow(active_alice, active_bob)
    follow(active_alice, active_charlie)
    publish = Publisher()
    start = 1_700_000_000_000
    # Published out of id order: the answer follows the inbox's times, not the ids.
    notes = [publish(active_bob if i % 2 else active_charlie, at_ms=start + (i * 7919) % 25 * 1000) for i in range(25)]
    assert inbox_rebuild(user_id=active_alice.pk).synced
    newest = sorted(notes, key=lambda note: -int(note.created_at.timestamp() * 1000))[:20]
    assert inbox_ids(get_redis(), active_alice)[:20] == [note.pk for note in newest]

    response = signed_in(active_alice).get("/bench/data-floor", secure=True)

    assert response.status_code == 200
    assert response.json() == {
        "success": True,
        "data": [
            {"id": str(note.pk), "authorId": str(note.author_id), "publishedMs": int(note.created_at.timestamp() * 1000)}
            for note in newest
        ],
    }


def test_the_data_floor_refuses_a_visitor_who_is_not_signed_in(db: Any) -> None:
    response = Client().get("/bench/data-floor", secure=True)

    assert response.status_code == 403
    assert response.json() == {"success": False}


def test_the_floor_answers_two_bytes(db: Any) -> None:
    response = Client().get("/bench/floor", secure=True)

    assert (response.status_code, response.content) == (200, b"ok")

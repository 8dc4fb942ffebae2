"""Read markers through ``GET``/``POST /api/v1/markers`` (Mastodon's shapes, scopes and 409) and
their services (the pages' moves: tests/feed/test_read_markers.py)."""

from __future__ import annotations

import json
from unittest import mock

import pytest
from django.db.models import F, QuerySet

from tests.client_api.conftest import Api, make_token
from users.models import HOME, NOTIFICATIONS, Marker
from users.selectors import marker_position
from users.services import MarkerConflict, marker_advance, marker_set

pytestmark = pytest.mark.django_db


class TestMarkersApi:
    def test_post_then_get_with_form_and_json(self, alice, api_alice) -> None:
        first = api_alice.post("/api/v1/markers", {"home[last_read_id]": "41"})
        second = api_alice.client.post(
            "/api/v1/markers",
            json.dumps({"home": {"last_read_id": "42"}, "notifications": {"last_read_id": 7}}),
            content_type="application/json",
            headers=api_alice.headers,
        )
        got = api_alice.get("/api/v1/markers?timeline[]=home&timeline[]=notifications").json()

        assert first.status_code == 200
        assert first.json()["home"]["last_read_id"] == "41" and first.json()["home"]["version"] == 1
        assert second.json()["home"]["version"] == 2
        assert got["home"]["last_read_id"] == "42" and got["home"]["version"] == 2
        assert got["notifications"] == second.json()["notifications"]
        assert got["notifications"]["last_read_id"] == "7"
        assert set(got["home"]) == {"last_read_id", "version", "updated_at"}

    def test_get_names_only_what_was_asked_and_written(self, alice, api_alice) -> None:
        api_alice.post("/api/v1/markers", {"home[last_read_id]": "5"})

        assert api_alice.get("/api/v1/markers?timeline[]=notifications").json() == {}
        assert api_alice.get("/api/v1/markers").json() == {}
        assert list(api_alice.get("/api/v1/markers?timeline[]=home").json()) == ["home"]

    def test_the_api_may_move_a_marker_backwards_as_mastodon(self, alice, api_alice) -> None:
        api_alice.post("/api/v1/markers", {"home[last_read_id]": "50"})

        api_alice.post("/api/v1/markers", {"home[last_read_id]": "10"})

        assert marker_position(user_id=alice.pk, timeline=HOME) == 10

    def test_markers_are_per_person(self, alice, bob, api_alice, api_bob) -> None:
        api_alice.post("/api/v1/markers", {"home[last_read_id]": "50"})

        assert api_bob.get("/api/v1/markers?timeline[]=home").json() == {}

    @pytest.mark.parametrize("value", ["abc", "-1", "", "1.5"])
    def test_a_bad_id_is_a_422_and_changes_nothing(self, alice, api_alice, value) -> None:
        api_alice.post("/api/v1/markers", {"home[last_read_id]": "3"})

        response = api_alice.post("/api/v1/markers", {"home[last_read_id]": value, "notifications[last_read_id]": "4"})

        assert response.status_code == 422
        assert set(response.json()) == {"error"}
        assert marker_position(user_id=alice.pk, timeline=HOME) == 3
        assert not Marker.objects.filter(user=alice, timeline=NOTIFICATIONS).exists()

    def test_no_token_is_a_401_and_scopes_are_mastodons(self, alice, oauth_app) -> None:
        make_token(alice, oauth_app, token="reader", scope="read:statuses")
        make_token(alice, oauth_app, token="notifier", scope="read:notifications")
        reader, notifier = Api("reader"), Api("notifier")

        assert Api(None).get("/api/v1/markers").status_code == 401
        assert reader.get("/api/v1/markers?timeline[]=home").status_code == 200
        assert reader.post("/api/v1/markers", {"home[last_read_id]": "3"}).status_code == 403
        assert notifier.get("/api/v1/markers").status_code == 403
        assert not Marker.objects.exists()

    def test_a_concurrent_write_is_a_409(self, alice, api_alice) -> None:
        api_alice.post("/api/v1/markers", {"home[last_read_id]": "3"})
        real_filter = QuerySet.filter

        def racing_filter(self: QuerySet, *args: object, **kwargs: object) -> QuerySet:
            # Another write lands between this one's read of the version and its UPDATE.
            if self.model is Marker and "version" in kwargs:
                Marker.objects.filter(user=alice).update(version=99)
            return real_filter(self, *args, **kwargs)

        with mock.patch.object(QuerySet, "filter", racing_filter):
            response = api_alice.post("/api/v1/markers", {"home[last_read_id]": "8"})

        assert response.status_code == 409
        assert response.json() == {"error": "Conflict during update, please try again"}
        assert marker_position(user_id=alice.pk, timeline=HOME) == 3

    def test_a_conflict_on_one_timeline_writes_neither(self, alice, api_alice) -> None:
        api_alice.post("/api/v1/markers", {"home[last_read_id]": "3", "notifications[last_read_id]": "5"})
        real_filter = QuerySet.filter

        def racing_filter(self: QuerySet, *args: object, **kwargs: object) -> QuerySet:
            # Another write lands on the notifications marker only, after home's was written.
            if self.model is Marker and "version" in kwargs:
                Marker.objects.filter(user=alice, timeline=NOTIFICATIONS).update(version=F("version") + 1)
            return real_filter(self, *args, **kwargs)

        with mock.patch.object(QuerySet, "filter", racing_filter):
            response = api_alice.post("/api/v1/markers", {"home[last_read_id]": "8", "notifications[last_read_id]": "9"})

        assert response.status_code == 409
        assert marker_position(user_id=alice.pk, timeline=HOME) == 3
        assert marker_position(user_id=alice.pk, timeline=NOTIFICATIONS) == 5
        assert Marker.objects.get(user=alice, timeline=HOME).version == 1


class TestMarkerServices:
    def test_advance_only_moves_forwards_and_returns_the_old_place(self, alice) -> None:
        assert marker_advance(user_id=alice.pk, timeline=HOME, last_read_id=20) == 0
        assert marker_advance(user_id=alice.pk, timeline=HOME, last_read_id=10) == 20
        assert marker_advance(user_id=alice.pk, timeline=HOME, last_read_id=30) == 20

        marker = Marker.objects.get(user=alice, timeline=HOME)
        assert (marker.last_read_id, marker.version) == (30, 2)

    def test_set_raises_the_version_each_time(self, alice) -> None:
        versions = [marker_set(user_id=alice.pk, timeline=NOTIFICATIONS, last_read_id=n).version for n in (5, 5, 1)]

        assert versions == [1, 2, 3]
        assert MarkerConflict.status == 409

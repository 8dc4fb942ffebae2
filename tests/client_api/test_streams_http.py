"""The streaming endpoints' answers before a stream opens: health, and bad or missing
credentials or Last-Event-ID as Mastodon's errors (the streams themselves: test_streaming.py)."""

from __future__ import annotations

import pytest
from django.test import Client

from feed.services import list_create
from tests.client_api.conftest import make_app, make_token

# Committed rows: a stream reads the database on the event loop's thread pool, not this thread.
pytestmark = pytest.mark.django_db(transaction=True)


class TestStreamingEndpoints:
    def test_health_answers_ok(self) -> None:
        response = Client().get("/api/v1/streaming/health")

        assert response.status_code == 200
        assert response.content == b"OK"

    def test_a_bad_access_token_parameter_is_a_401(self) -> None:
        response = Client().get("/api/v1/streaming/user?access_token=nope")

        assert response.status_code == 401
        assert response.json() == {"error": "The access token is invalid"}

    @pytest.mark.parametrize(
        ("headers", "status"),
        [({}, 401), ({"Authorization": "Bearer nope"}, 401), ({"Authorization": "Bearer notifier"}, 403)],
    )
    def test_no_stream_without_a_token_with_read_statuses(self, alice, headers, status) -> None:
        make_token(alice, make_app(), token="notifier", scope="read:notifications")

        response = Client().get("/api/v1/streaming/user", headers=headers)

        assert response.status_code == status
        assert set(response.json()) == {"error"}

    @pytest.mark.parametrize("value", ["abc", "-3", "1.5"])
    def test_a_bad_last_event_id_is_a_400(self, alice, value) -> None:
        make_token(alice, make_app(), token="reader")

        response = Client().get("/api/v1/streaming/user", headers={"Authorization": "Bearer reader", "Last-Event-ID": value})

        assert response.status_code == 400
        assert "Last-Event-ID" in response.json()["error"]

    @pytest.mark.parametrize("path", ["/api/v1/streaming/user", "/api/v1/streaming/list?list=1"])
    def test_a_post_is_mastodons_405_not_the_sites_csrf_page(self, alice, path) -> None:
        make_token(alice, make_app(), token="reader")

        response = Client(enforce_csrf_checks=True).post(path, headers={"Authorization": "Bearer reader"})

        assert response.status_code == 405
        assert response.json() == {"error": "Method not allowed"}

    def test_a_deactivated_accounts_token_is_a_403(self, alice) -> None:
        make_token(alice, make_app(), token="reader")
        type(alice).objects.filter(pk=alice.pk).update(is_active=False)

        response = Client().get("/api/v1/streaming/user", headers={"Authorization": "Bearer reader"})

        assert response.status_code == 403
        assert response.json() == {"error": "Your login is currently disabled"}

    def test_a_stream_asked_of_the_wsgi_server_is_a_503_not_a_held_worker(self, alice) -> None:
        make_token(alice, make_app(), token="reader")

        response = Client().get("/api/v1/streaming/user", headers={"Authorization": "Bearer reader"})

        assert response.status_code == 503
        assert response.json() == {"error": "Streaming is served by the streaming process"}


class TestListStreamEndpoint:
    @pytest.mark.parametrize("query", ["", "?list=", "?list=abc", "?list=-2"])
    def test_a_missing_or_malformed_list_is_a_400(self, alice, query) -> None:
        make_token(alice, make_app(), token="reader", scope="read")

        response = Client().get(f"/api/v1/streaming/list{query}", headers={"Authorization": "Bearer reader"})

        assert response.status_code == 400
        assert "list" in response.json()["error"]

    def test_no_credentials_is_a_401_before_a_malformed_list_is_looked_at(self) -> None:
        response = Client().get("/api/v1/streaming/list?list=abc")

        assert response.status_code == 401

    def test_another_readers_list_and_an_unknown_one_are_a_404(self, alice, bob) -> None:
        bobs = list_create(owner=bob, title="bob's")
        make_token(alice, make_app(), token="reader", scope="read")

        answers = [
            Client().get(f"/api/v1/streaming/list?list={list_id}", headers={"Authorization": "Bearer reader"})
            for list_id in (bobs.pk, bobs.pk + 1000)
        ]

        assert [answer.status_code for answer in answers] == [404, 404]
        assert answers[0].json() == {"error": "Record not found"}

    def test_a_token_without_read_lists_is_a_403(self, alice) -> None:
        own = list_create(owner=alice, title="mine")
        make_token(alice, make_app(), token="statuses", scope="read:statuses")

        response = Client().get(f"/api/v1/streaming/list?list={own.pk}", headers={"Authorization": "Bearer statuses"})

        assert response.status_code == 403

    def test_the_readers_own_list_asked_of_the_wsgi_server_is_a_503(self, alice) -> None:
        own = list_create(owner=alice, title="mine")
        make_token(alice, make_app(), token="reader", scope="read")

        response = Client().get(f"/api/v1/streaming/list?list={own.pk}", headers={"Authorization": "Bearer reader"})

        assert response.status_code == 503

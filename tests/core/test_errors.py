"""Errors become answers in one place: the envelope for the API, the site's error pages elsewhere."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from core.errors import SERVER_ERROR_MESSAGE
from tests.support.accounts import signed_in

pytestmark = pytest.mark.django_db


def in_layout(html: str) -> bool:
    """Whether a page is drawn in the site's layout (its top bar and stylesheet)."""
    return 'class="topbar"' in html and "/static/css/site.css" in html


class TestPages:
    def test_an_unknown_account_is_a_404_page_in_the_layout(self) -> None:
        response = Client().get("/u/nobody-here/")

        assert response.status_code == 404
        assert in_layout(response.content.decode())
        assert "No such account." in response.content.decode()

    def test_an_unknown_address_is_a_404_page_in_the_layout(self) -> None:
        response = Client().get("/no/such/page/")

        assert response.status_code == 404
        assert in_layout(response.content.decode())
        assert "There is no page at this address." in response.content.decode()

    def test_a_malformed_cursor_is_a_400_page_with_its_reason(self, bob: Any) -> None:
        response = Client().get("/u/bob/followers/?cursor=%%%")

        assert response.status_code == 400
        assert in_layout(response.content.decode())
        assert "Malformed cursor." in response.content.decode()

    def test_a_crash_is_a_500_page_that_shows_no_internals(self, bob: Any, monkeypatch: Any) -> None:
        def crash(**kwargs: Any) -> Any:
            raise RuntimeError("secret internal detail")

        monkeypatch.setattr("social.selectors.follow_list", crash)

        response = Client(raise_request_exception=False).get("/u/bob/followers/")

        assert response.status_code == 500
        assert SERVER_ERROR_MESSAGE in response.content.decode()
        assert "secret internal detail" not in response.content.decode()
        assert "/static/css/site.css" in response.content.decode()

    def test_a_form_without_its_csrf_token_is_a_403_page_in_the_layout(self, alice: Any, bob: Any) -> None:
        client = signed_in(alice, enforce_csrf_checks=True)

        response = client.post("/u/bob/follow/")

        assert response.status_code == 403
        assert in_layout(response.content.decode())
        assert "This form has expired" in response.content.decode()


class TestApi:
    def test_an_unknown_account_is_a_404_envelope(self) -> None:
        response = Client().get("/api/users/999999999")

        assert response.status_code == 404
        assert response.json() == {"success": False, "errorMsg": "No such user.", "data": None}

    def test_an_unknown_api_address_is_a_404_envelope(self) -> None:
        response = Client().get("/api/no/such/endpoint")

        assert response.status_code == 404
        assert response.json() == {"success": False, "errorMsg": "There is no page at this address.", "data": None}

    def test_a_crash_is_a_500_envelope_without_the_exception_text(self, bob: Any, monkeypatch: Any) -> None:
        def crash(**kwargs: Any) -> Any:
            raise RuntimeError("secret internal detail")

        monkeypatch.setattr("social.selectors.follow_counts", crash)

        response = Client(raise_request_exception=False).get(f"/api/users/{bob.pk}")

        assert response.status_code == 500
        assert response.json() == {"success": False, "errorMsg": SERVER_ERROR_MESSAGE, "data": None}

    def test_a_signed_out_write_is_a_401_envelope(self, bob: Any) -> None:
        response = Client().put(f"/api/follow/{bob.pk}/true")

        assert response.status_code == 401
        assert response.json() == {"success": False, "errorMsg": "Sign in first.", "data": None}


@pytest.mark.django_db(transaction=True)
class TestAWriteThatOutlivesItsRetries:
    def test_is_a_503_with_retry_after_and_writes_nothing(self, monkeypatch: Any) -> None:
        import threading

        from django.db import connection, connections

        from core import transactions
        from social.models import Mute
        from tests.support.accounts import UserFactory

        alice, bob = UserFactory.create(username="alice"), UserFactory.create(username="bob")
        monkeypatch.setattr(transactions, "WRITE_ATTEMPTS", 2)
        locked, release = threading.Event(), threading.Event()

        def hold_bobs_row() -> None:
            # Another request holds bob's row (a follow of bob in a long transaction).
            other = connections.create_connection("default")
            with other.cursor() as cursor:
                cursor.execute("START TRANSACTION")
                cursor.execute("SELECT id FROM users_user WHERE id = %s FOR UPDATE", [bob.pk])
                locked.set()
                release.wait(30)
                cursor.execute("ROLLBACK")
            other.close()

        holder = threading.Thread(target=hold_bobs_row)
        holder.start()
        locked.wait(10)
        try:
            with connection.cursor() as cursor:
                cursor.execute("SET SESSION innodb_lock_wait_timeout = 1")
            response = signed_in(alice).put(f"/api/mute/{bob.pk}/true")
        finally:
            release.set()
            holder.join()
            with connection.cursor() as cursor:
                cursor.execute("SET SESSION innodb_lock_wait_timeout = DEFAULT")

        assert response.status_code == 503
        assert response["Retry-After"] == "1"
        assert response.json()["errorMsg"] == "The site is busy with other changes to the same accounts; try again."
        assert not Mute.objects.exists()


class TestJsonAnswers:
    def test_what_orjson_refuses_is_written_as_django_writes_it_never_a_500(self, alice: Any) -> None:
        client = signed_in(alice, raise_request_exception=False)

        answer = client.put("/api/me/settings", data=b'{"\\ud800": 1}', content_type="application/json")

        assert answer.status_code == 400
        assert answer.json()["success"] is False and "\ud800" in answer.json()["errorMsg"]

    def test_the_values_read_back_as_django_s_own_encoder_writes_them(self) -> None:
        from datetime import UTC, datetime
        from decimal import Decimal

        from django.http import JsonResponse as DjangoJsonResponse
        from django.utils.translation import gettext_lazy

        from core.responses import JsonResponse

        data = {"text": "ünïcode ✓", "when": datetime(2026, 12, 5, 14, 3, 2, 123456, tzinfo=UTC), "price": Decimal("1.50")}
        data["lazy"] = gettext_lazy("Sign in first.")
        data["keys"] = {1: "an int key"}
        data["list"] = [1, 2.5, None, True]

        ours, django = JsonResponse(data), DjangoJsonResponse(data)

        assert json.loads(ours.content) == json.loads(django.content)
        assert ours["Content-Type"] == django["Content-Type"] == "application/json"
        assert json.loads(JsonResponse([1, "two"]).content) == [1, "two"]
        with pytest.raises(TypeError):
            JsonResponse([1], safe=True)

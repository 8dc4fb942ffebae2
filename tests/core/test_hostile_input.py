"""Hostile input gets a clear 4xx and changes nothing, with Redis up and with Redis down (issue 13).

Each class is one kind of input from the hostile run: numbers, cursors,
bodies, names, methods, answers. Every route that takes that kind of input
is tried, on the Redis path and on the database path (Redis stopped: the
application pointed at a port nobody listens on).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest
from django.test import Client

from core.paging import MAX_MILLISECONDS, MAX_SECONDS
from feed.models import Note
from social.models import Follow
from tests.support.accounts import signed_in
from tests.support.cursors import forged
from tests.support.faults import free_port

pytestmark = pytest.mark.django_db

# C23: '²', '①', '١٢' and '𝟙𝟘' pass str.isdigit() (int() crashes on some, reads others as
# numbers); the leading zeros and the trailing space are another id written differently.
HOSTILE_IDS = ["²", "①", "١٢", "𝟙𝟘", "000000000000000011", "13 ", "-1", "0", "1.5", "99999999999999999999", "abc"]


@pytest.fixture(params=["redis up", "redis down"])
def redis_state(request: Any, settings: Any) -> str:
    """Both read paths: Redis as usual, or stopped (nothing listens on its port)."""
    if request.param == "redis down":
        settings.CACHES = {
            **settings.CACHES,
            "default": {**settings.CACHES["default"], "LOCATION": f"redis://127.0.0.1:{free_port()}/0"},
        }
    return str(request.param)


def written() -> tuple[int, int, int]:
    """What a refused request must not change: follows, notes, deleted notes."""
    return Follow.objects.count(), Note.objects.count(), Note.objects.filter(deleted_at__isnull=False).count()


def url_segment(raw: str) -> str:
    return quote(raw, safe="")


class TestIds:
    """C23: every URL or body field that takes an id."""

    API_READS = (
        "/api/users/{}",
        "/api/users/{}/followers",
        "/api/users/{}/following",
        "/api/follow/or/not/{}",
        "/api/follow/common/{}",
        "/api/notes/{}",
    )

    @pytest.mark.parametrize("raw", HOSTILE_IDS)
    @pytest.mark.parametrize("route", API_READS)
    def test_api_reads_answer_400_in_the_envelope(self, route: str, raw: str, alice: Any, redis_state: str) -> None:
        response = signed_in(alice).get(route.format(url_segment(raw)))

        assert response.status_code == 400
        body = response.json()
        assert body["success"] is False and body["data"] is None
        assert body["errorMsg"] in ("User id must be a positive integer.", "Note id must be a positive integer.")

    @pytest.mark.parametrize("raw", HOSTILE_IDS)
    def test_follow_and_delete_by_a_hostile_id_write_nothing(
        self, raw: str, alice: Any, user_factory: Any, redis_state: str
    ) -> None:
        # Ids 11 and 13 exist, so "000000000000000011" or "13 " read as a number would write.
        targets = [user_factory() for _ in range(14)]
        note = Note.objects.create(author=alice, body="mine")
        client = signed_in(alice)
        before = written()

        follow = client.put(f"/api/follow/{url_segment(raw)}/true")
        delete = client.delete(f"/api/notes/{url_segment(raw)}")

        assert (follow.status_code, delete.status_code) == (400, 400)
        assert follow.json()["errorMsg"] == "User id must be a positive integer."
        assert delete.json()["errorMsg"] == "Note id must be a positive integer."
        assert written() == before
        assert Note.objects.get(pk=note.pk).deleted_at is None and targets

    @pytest.mark.parametrize("raw", HOSTILE_IDS)
    def test_note_pages_answer_404(self, raw: str, alice: Any, redis_state: str) -> None:
        note = Note.objects.create(author=alice, body="mine")
        client = signed_in(alice)

        page = client.get(f"/n/{url_segment(raw)}/")
        delete = client.post(f"/n/{url_segment(raw)}/delete/")

        assert (page.status_code, delete.status_code) == (404, 404)
        assert Note.objects.get(pk=note.pk).deleted_at is None

    def test_a_note_id_with_leading_zeros_is_not_that_note(self, alice: Any) -> None:
        note = Note.objects.create(author=alice, body="mine")

        assert Client().get(f"/n/{note.pk}/").status_code == 200
        assert Client().get(f"/n/000{note.pk}/").status_code == 404
        assert Client().get(f"/api/notes/000{note.pk}").status_code == 400

    @pytest.mark.parametrize("raw", HOSTILE_IDS)
    @pytest.mark.parametrize("changelist", ["/admin/users/user/", "/admin/social/follow/", "/admin/feed/note/"])
    def test_admin_search_never_fails_and_never_reads_another_number(
        self, changelist: str, raw: str, admin_client: Any, alice: Any
    ) -> None:
        notes = [Note.objects.create(author=alice, body=f"n{index}") for index in range(14)]

        response = admin_client.get(changelist, {"q": raw})

        assert response.status_code == 200
        shown = response.context["cl"].result_count
        # Only a plain id matches by id; these match nothing (no username starts with them).
        assert shown == 0, (raw, shown, notes[0].pk)

    def test_admin_object_pages_with_a_hostile_id_are_not_errors(self, admin_client: Any) -> None:
        for raw in HOSTILE_IDS:
            response = admin_client.get(f"/admin/users/user/{url_segment(raw)}/change/")
            assert response.status_code in (302, 404), raw


class TestCursors:
    HOSTILE = (
        forged("v1:-5:2"),
        forged("v1:99999999999999999999999:2"),
        forged(f"v1:{MAX_MILLISECONDS + 1}:2"),
        forged("v1:10:-2"),
        forged(f"v1:10:{2**64}"),
        forged("v0:10:2"),
        "not-a-cursor",
        "%00",
        "x" * 5000,
    )

    @pytest.mark.parametrize("cursor", HOSTILE)
    def test_pages_answer_400_with_the_reason(self, cursor: str, alice: Any, bob: Any, redis_state: str) -> None:
        Follow.objects.create(follower=alice, followee=bob)
        client = signed_in(alice)

        for url in ("/u/bob/followers/", "/u/alice/following/", "/home", "/u/bob/notes/"):
            response = client.get(url, {"cursor": cursor})
            assert response.status_code == 400, url
            assert "Malformed cursor." in response.content.decode(), url

    @pytest.mark.parametrize("cursor", HOSTILE)
    def test_the_api_answers_400_in_the_envelope(self, cursor: str, alice: Any, bob: Any, redis_state: str) -> None:
        client = signed_in(alice)

        for url in (f"/api/users/{bob.pk}/followers", f"/api/users/{bob.pk}/following", "/api/feed"):
            response = client.get(url, {"cursor": cursor})
            assert response.status_code == 400, url
            assert response.json() == {"success": False, "errorMsg": "Malformed cursor.", "data": None}

    def test_a_follow_cursor_beyond_year_9999_is_refused_but_the_last_second_is_read(
        self, alice: Any, bob: Any, redis_state: str
    ) -> None:
        client = signed_in(alice)

        beyond = client.get(f"/api/users/{bob.pk}/followers", {"cursor": forged(f"v1:{MAX_SECONDS + 1}:1")})
        last = client.get(f"/api/users/{bob.pk}/followers", {"cursor": forged(f"v1:{MAX_SECONDS}:1")})

        assert beyond.status_code == 400
        assert last.status_code == 200 and last.json()["data"] == {"list": [], "next_cursor": None}

    def test_feed_positions_at_the_last_millisecond_are_read(self, alice: Any, redis_state: str) -> None:
        client = signed_in(alice)

        by_cursor = client.get("/api/feed", {"cursor": forged(f"v1:{MAX_MILLISECONDS}:0")})
        by_scroll = client.get("/api/blog/of/follow", {"lastId": str(MAX_MILLISECONDS), "offset": "3"})

        assert by_cursor.status_code == 200 and by_cursor.json()["data"]["list"] == []
        assert by_scroll.status_code == 200 and by_scroll.json()["data"]["list"] == []

    @pytest.mark.parametrize(
        "last_id", [str(MAX_MILLISECONDS + 1), "1000000000000000", str(2**53 - 1), str(2**53), "-1", "²", "1e9"]
    )
    def test_scroll_last_id_outside_what_a_time_holds_is_400(self, last_id: str, alice: Any, redis_state: str) -> None:
        response = signed_in(alice).get("/api/blog/of/follow", {"lastId": last_id, "offset": "0"})

        assert response.status_code == 400
        assert response.json()["errorMsg"] == f"lastId must be a whole number from 0 to {MAX_MILLISECONDS}."

    @pytest.mark.parametrize(
        ("name", "value"), [("limit", "0"), ("limit", "101"), ("limit", "abc"), ("limit", "²"), ("offset", "-1")]
    )
    def test_limits_and_offsets_are_checked(self, name: str, value: str, alice: Any) -> None:
        params = {name: value, **({"lastId": "1000"} if name == "offset" else {})}

        response = signed_in(alice).get("/api/blog/of/follow", params)

        assert response.status_code == 400
        assert response.json()["errorMsg"].startswith(f"{name} must be a whole number from ")


class TestBodies:
    def post_json(self, client: Client, text: str | bytes) -> Any:
        return client.post("/api/notes", data=text, content_type="application/json")

    def test_json_nested_100000_deep_is_400(self, alice: Any, redis_state: str) -> None:
        before = written()

        response = self.post_json(signed_in(alice), "[" * 100_000 + "]" * 100_000)

        assert response.status_code == 400
        assert response.json()["errorMsg"] == "The request body must be at most 16 KB."
        assert written() == before

    def test_json_nested_deeper_than_20_is_400_even_when_small(self, alice: Any) -> None:
        response = self.post_json(signed_in(alice), '{"body": "hi", "x": ' + "[" * 25 + "]" * 25 + "}")

        assert response.status_code == 400
        assert response.json()["errorMsg"] == "The request body is nested more than 20 levels deep."

    @pytest.mark.parametrize(
        ("body", "message"),
        [
            ("a\x00b", "body must not contain control characters."),
            ("\u200b\u200c\u200d\ufeff", "body cannot be empty."),
            ("   \n\t ", "body cannot be empty."),
            ("bell\x07", "body must not contain control characters."),
            # Found by the breaker: letters and marks that render as nothing.
            ("\u3164\u3164", "body cannot be empty."),
            ("\u2800 \u115f\u1160", "body cannot be empty."),
            ("\u0301\u0308\u20dd", "body cannot be empty."),
        ],
    )
    def test_note_text_with_nul_or_nothing_visible_is_400_in_the_api_and_the_form(
        self, body: str, message: str, alice: Any, redis_state: str
    ) -> None:
        client = signed_in(alice)
        before = written()

        api = self.post_json(client, json.dumps({"body": body}))
        form = client.post("/notes/", {"body": body})

        assert api.status_code == 400 and api.json()["errorMsg"] == message
        assert form.status_code == 400
        assert written() == before

    @pytest.mark.parametrize(
        ("raw", "message"),
        [
            (b"\xff\xfe", "The request body must be UTF-8 text."),
            (b"{not json", "The request body is not valid JSON."),
            (b'["a list"]', "The request body must be a JSON object."),
            (b'{"body": 5}', "body must be text."),
            (b"{}", "body is required."),
        ],
    )
    def test_malformed_bodies_are_400_with_a_message_for_people(self, raw: bytes, message: str, alice: Any) -> None:
        response = self.post_json(signed_in(alice), raw)

        assert response.status_code == 400
        assert response.json()["errorMsg"] == message

    def test_a_lone_surrogate_is_400_not_an_encoding_failure(self, alice: Any, redis_state: str) -> None:
        before = written()

        response = self.post_json(signed_in(alice), '{"body": "hi \\ud800"}')

        assert response.status_code == 400
        assert response.json()["errorMsg"] == "body must be valid Unicode text (it holds a lone surrogate)."
        assert written() == before

    def test_a_body_over_what_the_server_reads_is_413_in_the_envelope(self, settings: Any, alice: Any) -> None:
        before = written()

        response = self.post_json(signed_in(alice), json.dumps({"body": "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)}))

        assert response.status_code == 413
        assert response.json() == {
            "success": False,
            "errorMsg": f"The request body is larger than the {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes this site takes.",
            "data": None,
        }
        assert written() == before

    @pytest.mark.parametrize("path", ["/u/bob/mute/", "/settings/privacy/", "/api/notifications/read"])
    def test_a_form_body_over_what_the_server_reads_is_413_also_when_the_csrf_check_reads_it(
        self, settings: Any, alice: Any, bob: Any, path: str
    ) -> None:
        from social.models import Mute

        client = signed_in(alice, enforce_csrf_checks=True)
        client.get("/settings/privacy/")  # the CSRF cookie: the check then reads the form for its token

        response = client.post(path, {"duration": "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)})

        assert response.status_code == 413
        assert "larger than" in response.content.decode()
        assert not Mute.objects.exists()

    def test_a_body_over_16_kib_is_400(self, alice: Any) -> None:
        response = self.post_json(signed_in(alice), json.dumps({"body": "x" * 17_000}))

        assert response.status_code == 400
        assert response.json()["errorMsg"] == "The request body must be at most 16 KB."


class TestNames:
    @pytest.mark.parametrize(
        ("username", "problem"),
        [
            (".", "1 to 30 characters: letters, digits"),
            ("..", "1 to 30 characters: letters, digits"),
            ("a..", "1 to 30 characters: letters, digits"),
            (".hidden", "1 to 30 characters: letters, digits"),
            ("ü15", "1 to 30 characters: letters, digits"),
            ("u 15", "1 to 30 characters: letters, digits"),
            ("u15\u200b", "1 to 30 characters: letters, digits"),
            ("admin", "That name is reserved"),
            ("API", "That name is reserved"),
            ("Alice", "That name is taken."),
        ],
    )
    def test_sign_up_refuses_names_that_cannot_be_told_apart_or_reached(self, username: str, problem: str, alice: Any) -> None:
        accounts = type(alice).objects.count()

        response = Client().post(
            "/signup/", {"username": username, "password1": "a-long-passphrase", "password2": "a-long-passphrase"}
        )

        assert response.status_code == 400
        assert any(error.startswith(problem) for error in response.context["form"].errors["username"])
        assert type(alice).objects.count() == accounts

    @pytest.mark.parametrize("path", ["/u/{}/", "/u/{}/followers/", "/u/{}/following/", "/u/{}/notes/"])
    def test_another_case_redirects_to_the_stored_spelling(self, path: str, user_factory: Any, redis_state: str) -> None:
        user_factory(username="u15")

        response = Client().get(path.format("U15"), {"cursor": ""})

        assert response.status_code == 301
        assert response["Location"] == path.format("u15") + "?cursor="

    @pytest.mark.parametrize("spelling", ["ü15", "u15 ", "u15%20", "u%C3%BC15", "u15\u200b", ".", ".."])
    def test_lookalike_spellings_are_404(self, spelling: str, user_factory: Any) -> None:
        user_factory(username="u15")

        assert Client().get(f"/u/{quote(spelling, safe='%')}/").status_code == 404

    def test_following_by_another_spelling_follows_the_account_once(self, alice: Any, bob: Any) -> None:
        client = signed_in(alice)

        response = client.post("/u/BOB/follow/")

        assert response.status_code == 302 and response["Location"] == "/u/bob/"
        assert Follow.objects.filter(follower=alice, followee=bob).count() == 1


class TestMethods:
    READ_PAGES = ("/", "/u/bob/", "/u/bob/followers/", "/u/bob/following/", "/u/bob/notes/", "/home")

    @pytest.mark.parametrize("method", ["post", "put", "delete", "patch"])
    def test_read_only_pages_answer_405(self, method: str, alice: Any, bob: Any) -> None:
        client = signed_in(alice)
        note = Note.objects.create(author=bob, body="hello")

        for url in [*self.READ_PAGES, f"/n/{note.pk}/"]:
            response = getattr(client, method)(url)
            assert response.status_code == 405, url
            assert set(response["Allow"].split(", ")) == {"GET", "HEAD"}, url

    @pytest.mark.parametrize("method", ["post", "put", "delete"])
    def test_read_only_api_routes_answer_405_in_the_envelope(self, method: str, alice: Any, bob: Any) -> None:
        response = getattr(signed_in(alice), method)(f"/api/users/{bob.pk}/followers")

        assert response.status_code == 405
        assert response.json() == {"success": False, "errorMsg": "This address does not take that method.", "data": None}
        assert response["Allow"] == "GET, HEAD"


class TestHeaders:
    """A Content-Length header that is not a number of bytes (found by the API fuzz test: a 500 in
    django-prometheus's request metrics, which parse it as an int)."""

    @pytest.mark.parametrize("length", ["9:PWUhb{09sN/", "-1", "1.5", "²", "4 4", "0x10"])
    def test_an_api_write_answers_400_in_the_envelope_and_writes_nothing(
        self, length: str, alice: Any, bob: Any, redis_state: str
    ) -> None:
        before = written()

        response = signed_in(alice).put(f"/api/follow/{bob.pk}/true", CONTENT_LENGTH=length)

        assert (response.status_code, response.json()) == (
            400,
            {"success": False, "errorMsg": "The request could not be understood.", "data": None},
        )
        assert written() == before

    def test_a_page_answers_400_and_a_number_passes(self, alice: Any, bob: Any) -> None:
        assert Client().get("/u/bob/", CONTENT_LENGTH="x").status_code == 400
        assert Client().get("/u/bob/", CONTENT_LENGTH="0").status_code == 200
        assert Client().get("/u/bob/", CONTENT_LENGTH="").status_code == 200  # as some servers send no body
        assert Client().get("/u/bob/", CONTENT_LENGTH=" 0\t").status_code == 200  # spaces around a value
        assert signed_in(alice).put(f"/api/follow/{bob.pk}/true", CONTENT_LENGTH="0").status_code == 200


class TestSignUpInput:
    def test_sign_up_answers_only_get_head_and_post(self) -> None:
        answers = {
            method: getattr(Client(), method)("/signup/").status_code
            for method in ("get", "head", "post", "put", "delete", "patch")
        }

        assert answers == {"get": 200, "head": 200, "post": 400, "put": 405, "delete": 405, "patch": 405}

    @pytest.mark.parametrize("name", ["\u202eevil", "zero\u200bwidth", "bell\x07", "line\nbreak"])
    def test_a_display_name_with_control_or_direction_characters_is_refused(self, name: str) -> None:
        from users.models import User

        response = Client().post(
            "/signup/",
            {
                "username": "newcomer",
                "display_name": name,
                "password1": "correct horse battery",
                "password2": "correct horse battery",
            },
        )

        assert response.status_code == 400
        assert "A display name cannot hold control, formatting or direction characters." in response.content.decode()
        assert not User.objects.filter(username="newcomer").exists()


class TestAdminIds:
    @pytest.mark.parametrize("raw", ["١٢", "𝟙𝟘", "011", "²"])
    def test_a_change_page_with_a_non_canonical_id_is_no_such_object(
        self, raw: str, superuser_client: Client, alice: Any, bob: Any
    ) -> None:
        follow = Follow.objects.create(follower=alice, followee=bob)
        digits = str(follow.pk)
        look_alike = {"١٢": "١٢", "𝟙𝟘": "𝟙𝟘", "011": "0" + digits, "²": "²"}[raw]

        response = superuser_client.get(f"/admin/social/follow/{url_segment(look_alike)}/change/")
        canonical = superuser_client.get(f"/admin/social/follow/{digits}/change/")

        assert response.status_code == 302 and response["Location"] == "/admin/"
        assert canonical.status_code == 200

    def test_an_action_on_a_non_canonical_id_is_400_and_deletes_nothing(
        self, superuser_client: Client, alice: Any, bob: Any
    ) -> None:
        follow = Follow.objects.create(follower=alice, followee=bob)
        arabic = "".join(chr(0x0660 + int(digit)) for digit in str(follow.pk))  # the same number in Arabic-Indic digits

        response = superuser_client.post(
            "/admin/social/follow/", {"action": "delete_selected", "_selected_action": [arabic], "post": "yes"}
        )

        assert response.status_code == 400
        assert "The selected rows are not ids of rows; nothing was done." in response.content.decode()
        assert Follow.objects.filter(pk=follow.pk).exists()


class TestAnswers:
    def test_a_bad_host_answer_carries_the_security_headers(self, settings: Any) -> None:
        settings.ALLOWED_HOSTS = ["testserver"]

        response = Client().get("/", HTTP_HOST="evil.example")

        assert response.status_code == 400
        assert "default-src 'self'" in response["Content-Security-Policy"]
        assert response["X-Frame-Options"] == "DENY"

    def test_no_400_carries_python_exception_text(self, alice: Any) -> None:
        client = signed_in(alice)
        answers = [
            client.get("/api/feed", {"limit": "x"}).json()["errorMsg"],
            client.get("/api/users/x").json()["errorMsg"],
            client.put("/api/follow/1/maybe").json()["errorMsg"],
            client.post("/api/notes", data=b"[1,", content_type="application/json").json()["errorMsg"],
        ]

        assert answers == [
            "limit must be a whole number from 1 to 100.",
            "User id must be a positive integer.",
            "The last path segment must be true or false.",
            "The request body is not valid JSON.",
        ]
        for text in answers:
            assert "invalid literal" not in text and "Expecting" not in text and "Error" not in text

    def test_a_csrf_failure_in_the_api_says_what_was_missing(self, alice: Any, bob: Any) -> None:
        client = signed_in(alice, enforce_csrf_checks=True)

        response = client.put(f"/api/follow/{bob.pk}/true")

        assert response.status_code == 403
        assert response.json()["errorMsg"] == "Request refused by the CSRF check: CSRF cookie not set."

"""The Content-Security-Policy the pages satisfy, and writes through a TLS-terminating proxy.

(The browser journeys in tests/e2e also fail on any console error, which is
where Chromium reports a CSP violation.)
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from feed.models import Note
from tests.support.accounts import signed_in

pytestmark = pytest.mark.django_db

INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.IGNORECASE)
INLINE_STYLE = re.compile(r"<style\b|\sstyle=", re.IGNORECASE)
EVENT_HANDLER = re.compile(r"\son[a-z]+=", re.IGNORECASE)


def policy(response: Any) -> dict[str, list[str]]:
    """The CSP header as ``{directive: [sources]}``."""
    directives = {}
    for part in response["Content-Security-Policy"].split(";"):
        name, *sources = part.split()
        directives[name] = sources
    return directives


class TestContentSecurityPolicy:
    def test_every_page_sends_a_policy_it_satisfies(self, alice: Any, bob: Any) -> None:
        note = Note.objects.create(author=bob, body="hello")
        client = signed_in(alice)
        pages = [
            "/",
            "/?q=bo",
            "/u/bob/",
            "/u/bob/followers/",
            "/u/bob/following/",
            "/u/bob/notes/",
            "/home",
            f"/n/{note.pk}/",
            "/nowhere/",
        ]
        signed_out = ["/signup/", "/login/"]

        responses = [client.get(url) for url in pages] + [Client().get(url) for url in signed_out]

        for url, response in zip(pages + signed_out, responses):
            html = response.content.decode()
            directives = policy(response)
            assert directives["script-src"] == ["'self'"] and directives["style-src"] == ["'self'"], url
            assert directives["object-src"] == ["'none'"] and directives["frame-ancestors"] == ["'none'"], url
            assert not INLINE_SCRIPT.search(html), (url, INLINE_SCRIPT.search(html))
            assert not INLINE_STYLE.search(html), (url, INLINE_STYLE.search(html))
            assert not EVENT_HANDLER.search(html), (url, EVENT_HANDLER.search(html))
            assert "'unsafe-inline'" not in response["Content-Security-Policy"]

    def test_the_admin_keeps_its_own_inline_parts_and_gets_no_policy(self, admin_client: Any) -> None:
        response = admin_client.get("/admin/")

        assert response.status_code == 200
        assert "Content-Security-Policy" not in response

    def test_avatars_take_their_hue_from_a_class(self, user_factory: Any) -> None:
        user = user_factory(username="hue")

        html = Client().get("/u/hue/").content.decode()

        assert f"avatar avatar-large hue-{user.pk * 137 % 360 // 10}" in html


class TestBehindATlsProxy:
    @pytest.fixture
    def proxied(self, settings: Any) -> None:
        # What config.settings.production sets from DJANGO_SECURE_PROXY_SSL_HEADER and DJANGO_CSRF_TRUSTED_ORIGINS.
        settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
        settings.CSRF_TRUSTED_ORIGINS = ["https://followfeed.example"]
        settings.ALLOWED_HOSTS = ["followfeed.example"]
        settings.SECURE_SSL_REDIRECT = True

    def client_for(self, user: Any) -> tuple[Client, str]:
        client = signed_in(user, enforce_csrf_checks=True, HTTP_HOST="followfeed.example", HTTP_X_FORWARDED_PROTO="https")
        client.get("/login/")
        return client, client.cookies["csrftoken"].value

    def test_a_write_from_the_trusted_origin_is_accepted(self, proxied: None, alice: Any) -> None:
        client, token = self.client_for(alice)

        response = client.post(
            "/api/notes", {"body": "through the proxy"}, HTTP_X_CSRFTOKEN=token, HTTP_ORIGIN="https://followfeed.example"
        )

        assert response.status_code == 201
        assert Note.objects.filter(author=alice, body="through the proxy").exists()

    def test_a_write_from_another_origin_is_refused_with_the_real_reason(self, proxied: None, alice: Any) -> None:
        client, token = self.client_for(alice)

        response = client.post("/api/notes", {"body": "forged"}, HTTP_X_CSRFTOKEN=token, HTTP_ORIGIN="https://evil.example")

        assert response.status_code == 403
        assert (
            response.json()["errorMsg"]
            == "Request refused by the CSRF check: Origin checking failed - https://evil.example does not match any trusted origins."
        )
        assert not Note.objects.filter(body="forged").exists()

    def test_plain_http_is_redirected_to_https(self, proxied: None) -> None:
        response = Client(HTTP_HOST="followfeed.example").get("/u/bob/")

        assert response.status_code == 301
        assert response["Location"] == "https://followfeed.example/u/bob/"

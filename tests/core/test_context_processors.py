"""The CSRF token of a page (``core.context_processors.csrf``): masked once per request, accepted by
the site, and never made for a page that prints no form."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from social.models import Block
from tests.support.accounts import signed_in

pytestmark = pytest.mark.django_db

TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def test_every_form_of_a_page_carries_the_same_token_which_the_site_accepts(alice: Any, bob: Any) -> None:
    client = signed_in(alice, enforce_csrf_checks=True)
    html = client.get(f"/u/{bob.username}/").content.decode()

    tokens = TOKEN.findall(html)

    assert len(tokens) >= 3  # sign out, follow, block at least
    assert len(set(tokens)) == 1
    assert client.post(f"/u/{bob.username}/block/", {"csrfmiddlewaretoken": tokens[0]}).status_code == 302
    assert Block.objects.filter(blocker=alice, blocked=bob).exists()


def test_each_request_masks_its_own_token(alice: Any, bob: Any) -> None:
    client = signed_in(alice)

    first = TOKEN.findall(client.get(f"/u/{bob.username}/").content.decode())
    second = TOKEN.findall(client.get(f"/u/{bob.username}/").content.decode())

    assert first[0] != second[0]


def test_a_page_without_a_form_makes_no_token(alice: Any) -> None:
    response = Client().get(f"/u/{alice.username}/followers/")

    assert "csrfmiddlewaretoken" not in response.content.decode()
    assert "csrftoken" not in response.cookies

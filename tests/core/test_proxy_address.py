"""The client address behind proxies (``core.limits.client_address``): the holes a security trial found.

Behind the README's production proxy (one, appending to X-Forwarded-For),
the address a limit counts is the rightmost entry of the header: the one the
proxy wrote. What the client writes on the left changes nothing.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.test import Client, RequestFactory

from core.limits import client_address
from users.models import User

PASSWORD = "correct horse battery"
PROXY = "10.0.0.1"
README = Path(__file__).resolve().parents[2] / "README.md"


def address(settings: Any, *, count: int, header: str = "", **meta: Any) -> str:
    settings.TRUSTED_PROXY_COUNT = count
    settings.CLIENT_ADDRESS_HEADER = header
    return client_address(RequestFactory().get("/", **meta))


class TestClientAddress:
    def test_a_spoofed_leftmost_address_is_ignored(self, settings: Any) -> None:
        got = address(settings, count=1, REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="6.6.6.6, 198.51.100.7")

        assert got == "198.51.100.7"

    def test_two_proxies_take_the_second_from_the_right(self, settings: Any) -> None:
        got = address(settings, count=2, REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="6.6.6.6, 198.51.100.7, 10.0.0.2")

        assert got == "198.51.100.7"

    def test_fewer_entries_than_proxies_take_the_leftmost(self, settings: Any) -> None:
        assert address(settings, count=2, REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="198.51.100.7") == "198.51.100.7"

    def test_no_header_is_the_peer_address(self, settings: Any) -> None:
        assert address(settings, count=1, REMOTE_ADDR="198.51.100.9") == "198.51.100.9"
        assert address(settings, count=1, REMOTE_ADDR="198.51.100.9", HTTP_X_FORWARDED_FOR=" , ") == "198.51.100.9"

    def test_the_header_named_alone_is_read_from_the_right(self, settings: Any) -> None:
        # The trial's setting: CLIENT_ADDRESS_HEADER=HTTP_X_FORWARDED_FOR and no proxy count.
        got = address(
            settings, count=0, header="HTTP_X_FORWARDED_FOR", REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="6.6.6.6, 198.51.100.7"
        )

        assert got == "198.51.100.7"

    def test_without_proxies_the_header_is_not_read(self, settings: Any) -> None:
        assert address(settings, count=0, REMOTE_ADDR="198.51.100.9", HTTP_X_FORWARDED_FOR="6.6.6.6") == "198.51.100.9"


@pytest.mark.django_db
class TestSignUpsBehindTheProxy:
    def test_eight_sign_ups_with_spoofed_leftmost_addresses_meet_the_limit(self, settings: Any) -> None:
        settings.SIGNUP_RATE = "5/h"
        settings.TRUSTED_PROXY_COUNT = 1

        statuses = [
            Client(REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR=f"203.0.113.{index}, 198.51.100.7")
            .post("/signup/", {"username": f"spoof{index}", "password1": PASSWORD, "password2": PASSWORD})
            .status_code
            for index in range(8)
        ]

        assert statuses == [302] * 5 + [429] * 3
        assert User.objects.filter(username__startswith="spoof").count() == 5

    def test_the_site_is_not_one_address(self, settings: Any) -> None:
        settings.SIGNUP_RATE = "5/h"
        settings.TRUSTED_PROXY_COUNT = 1

        statuses = [
            Client(REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR=f"198.51.100.{index}")
            .post("/signup/", {"username": f"real{index}", "password1": PASSWORD, "password2": PASSWORD})
            .status_code
            for index in range(8)
        ]

        assert statuses == [302] * 8


@pytest.mark.django_db
class TestSignInLockBehindTheProxy:
    def test_one_clients_failures_do_not_lock_everyone(self, settings: Any, user_factory: Any) -> None:
        settings.LOGIN_FAILURE_ADDRESS_RATE = "30/15m"
        settings.LOGIN_FAILURE_ACCOUNT_RATE = "10/15m"
        settings.TRUSTED_PROXY_COUNT = 1
        user_factory(username="dora", password=PASSWORD)
        guesser = Client(REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="203.0.113.66")

        failures = [
            guesser.post("/login/", {"username": f"made{index}", "password": "wrong password"}).status_code for index in range(31)
        ]
        locked = guesser.post("/login/", {"username": "made99", "password": "wrong password"})
        dora = Client(REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="198.51.100.20").post(
            "/login/", {"username": "dora", "password": PASSWORD}
        )

        assert failures[:30] == [200] * 30
        assert locked.status_code == 429
        assert dora.status_code == 302


class TestTheReadmesProductionLines:
    def test_they_set_the_proxy_count(self) -> None:
        text = README.read_text()
        section = text[text.index("## Processes in production") :]  # its first sh block
        block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)

        assert block is not None
        assert re.search(r"^export TRUSTED_PROXY_COUNT=1(\s|$)", block.group(1), re.MULTILINE)

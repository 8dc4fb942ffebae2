"""``users.backends.AccountBackend``: Django's ModelBackend with the per-request account read in
raw SQL; sessions signed in through ModelBackend keep working; a failed sign-in hashes once."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import authenticate, hashers
from django.contrib.auth.signals import user_login_failed
from django.test import Client

from users.backends import AccountBackend

pytestmark = pytest.mark.django_db

PASSWORD = "a long enough password"


@pytest.fixture
def member(user_factory: Any) -> Any:
    user = user_factory(username="member")
    user.set_password(PASSWORD)
    user.save()
    return user


def signed_in_through(user: Any, backend: str) -> Client:
    client = Client()
    client.force_login(user, backend=backend)
    return client


def whoami(client: Client) -> str:
    """The username the site's header shows to ``client`` ("" signed out)."""
    html = client.get("/home").content.decode()
    if 'class="nav-me"' not in html:
        return ""
    return html.split('class="nav-me" title="Your profile, @')[1].split('"')[0]


class TestSessions:
    @pytest.mark.parametrize("backend", ["users.backends.AccountBackend", "django.contrib.auth.backends.ModelBackend"])
    def test_a_session_of_either_backend_is_signed_in(self, member: Any, backend: str) -> None:
        assert whoami(signed_in_through(member, backend)) == "member"

    def test_the_sign_in_form_names_the_account_backend(self, member: Any) -> None:
        client = Client()
        answer = client.post("/login/", {"username": "member", "password": PASSWORD})

        assert answer.status_code == 302
        assert client.session["_auth_user_backend"] == "users.backends.AccountBackend"
        assert whoami(client) == "member"

    def test_deactivation_and_a_password_change_sign_the_session_out(self, member: Any, user_factory: Any) -> None:
        client = signed_in_through(member, "users.backends.AccountBackend")
        member.is_active = False
        member.save(update_fields=["is_active"])
        assert whoami(client) == ""

        other = user_factory(username="other")
        client = signed_in_through(other, "users.backends.AccountBackend")
        other.set_password("another long password")
        other.save()
        assert whoami(client) == ""

    def test_get_user_reads_every_field_and_refuses_the_inactive(self, member: Any, user_factory: Any) -> None:
        found = AccountBackend().get_user(member.pk)
        assert found is not None and found.pk == member.pk
        assert found.get_deferred_fields() == set()
        assert found.check_password(PASSWORD)
        assert AccountBackend().get_user(user_factory(is_active=False).pk) is None
        assert AccountBackend().get_user(10**9) is None


class TestFailedSignIn:
    @pytest.mark.parametrize("username", ["member", "nobody"])
    def test_a_failure_hashes_once_and_is_reported_once(self, member: Any, username: str, monkeypatch: Any) -> None:
        hashed: list[str] = []
        failures: list[Any] = []
        make, check = hashers.make_password, hashers.check_password

        def counting_make(*args: Any, **kwargs: Any) -> str:
            hashed.append("make")
            return make(*args, **kwargs)

        def counting_check(*args: Any, **kwargs: Any) -> bool:
            hashed.append("check")
            return check(*args, **kwargs)

        monkeypatch.setattr("django.contrib.auth.base_user.make_password", counting_make)
        monkeypatch.setattr("django.contrib.auth.base_user.check_password", counting_check)

        def failed(**kwargs: Any) -> None:
            failures.append(kwargs)

        user_login_failed.connect(failed)
        try:
            assert authenticate(username=username, password="wrong password") is None
        finally:
            user_login_failed.disconnect(failed)

        assert len(hashed) == 1
        assert len(failures) == 1

    def test_the_right_password_signs_in(self, member: Any) -> None:
        found = authenticate(username="member", password=PASSWORD)
        assert found is not None and found.pk == member.pk
        assert found.backend == "users.backends.AccountBackend"

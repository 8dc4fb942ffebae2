"""Journeys of accounts: sign up, sign out, sign in (with a wrong password first)."""

from __future__ import annotations

import re

import pytest

from tests.support.browser import MOBILE, unlabelled_controls
from users.models import User

pytestmark = pytest.mark.django_db(transaction=True)


class TestSignUpAndSignIn:
    def test_a_new_person_signs_up_signs_out_and_signs_back_in(self, open_session, shot):
        person = open_session(viewport=MOBILE, label="newcomer")
        page = person.page

        page.goto("/signup/")
        assert unlabelled_controls(page) == []
        page.get_by_label("Username").fill("zoe")
        page.get_by_label("Display name").fill("Zoë Ramos")
        page.get_by_label("Password", exact=True).fill("a long passphrase 42")
        page.get_by_label("Password confirmation").fill("a long passphrase 42")
        shot(person, "signup-filled")
        page.get_by_role("button", name="Create account").click()

        page.wait_for_url(re.compile(r"/home$"))
        assert page.locator("nav[aria-label=Main]").get_by_text("@zoe").is_visible()
        assert "Find people to follow" in page.locator("main").inner_text()
        shot(person, "home-empty")
        assert User.objects.get(username="zoe").display_name == "Zoë Ramos"

        page.get_by_role("button", name="Sign out").click()
        page.wait_for_url(re.compile(r"/$"))
        page.get_by_role("link", name="Sign in").first.click()
        page.get_by_label("Username").fill("zoe")
        page.get_by_label("Password").fill("not the password")
        page.get_by_role("button", name="Sign in").click()

        error = page.get_by_role("alert")
        assert "correct username and password" in error.inner_text()
        shot(person, "signin-error")
        page.get_by_label("Password").fill("a long passphrase 42")
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(re.compile(r"/home$"))
        assert page.get_by_role("button", name="Sign out").is_visible()

    def test_a_sign_up_with_mismatched_passwords_shows_the_error_and_creates_nothing(self, open_session, shot):
        person = open_session(label="typo")
        page = person.page

        page.goto("/signup/")
        page.get_by_label("Username").fill("yuri")
        page.get_by_label("Password", exact=True).fill("a long passphrase 42")
        page.get_by_label("Password confirmation").fill("a long passphrase 43")
        page.get_by_role("button", name="Create account").click()

        assert "didn’t match" in page.locator("main").inner_text() or "didn't match" in page.locator("main").inner_text()
        assert page.url.endswith("/signup/")
        shot(person, "signup-error")
        assert not User.objects.filter(username="yuri").exists()

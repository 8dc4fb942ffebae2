"""Every page fits a 390px phone and uses the room of a 1280px desktop; forms are labelled."""

from __future__ import annotations

import pytest

from feed import services as feed_services
from social import services as social_services
from tests.support.accounts import make_user
from tests.support.browser import DESKTOP, MOBILE, unlabelled_controls

pytestmark = pytest.mark.django_db(transaction=True)

PAGES = [
    "/",
    "/?q=b",
    "/login/",
    "/signup/",
    "/home",
    "/u/bob/",
    "/u/bob/followers/",
    "/u/alexandra_featherstonehaugh/following/",
    "/u/bob/notes/",
    "/lists/",
]


def overflow(page) -> int:
    """How many CSS pixels the page is wider than the viewport (0 when nothing scrolls sideways)."""
    return int(page.evaluate("document.documentElement.scrollWidth - window.innerWidth"))


@pytest.fixture
def small_world(stack):
    alice = make_user("alexandra_featherstonehaugh", display_name="Alexandra Featherstonehaugh")  # a long name in the top bar
    bob = make_user("bob", display_name="Bartholomew Featherstonehaugh-Cholmondeley", bio="A name that does not fit a phone " * 3)
    social_services.follow_create(actor=alice, followee_id=bob.pk)
    social_services.follow_create(actor=bob, followee_id=alice.pk)
    feed_services.note_create(author=bob, body="https://example.org/" + "averyveryverylongpathwithoutanyspaces" * 4)
    return alice, bob


class TestResponsive:
    @pytest.mark.parametrize("viewport", [MOBILE, DESKTOP], ids=["390px", "1280px"])
    def test_no_page_scrolls_sideways_and_every_control_is_labelled(self, open_session, small_world, viewport):
        alice, _ = small_world
        page = open_session(alice, viewport=viewport).page

        problems = {}
        for path in PAGES:
            page.goto(path)
            if overflow(page) > 0 or unlabelled_controls(page):
                problems[path] = (overflow(page), unlabelled_controls(page))

        assert problems == {}

    def test_the_profile_puts_connections_beside_notes_on_desktop_and_first_on_a_phone(self, open_session, small_world, shot):
        alice, _ = small_world
        person = open_session(alice, viewport=DESKTOP)
        page = person.page
        page.goto("/u/bob/")

        main, aside = page.locator(".profile-main").bounding_box(), page.locator(".profile-aside").bounding_box()
        assert aside["x"] > main["x"] + main["width"] - 1 and abs(aside["y"] - main["y"]) < 2
        page.set_viewport_size(MOBILE)
        main, aside = page.locator(".profile-main").bounding_box(), page.locator(".profile-aside").bounding_box()
        assert aside["y"] + aside["height"] <= main["y"] + 1 and abs(aside["x"] - main["x"]) < 2
        shot(person, "profile-390px")

    def test_buttons_and_links_are_big_enough_to_tap(self, open_session, small_world):
        alice, _ = small_world
        page = open_session(alice, viewport=MOBILE).page
        page.goto("/u/bob/")

        small = page.evaluate(
            """() => Array.from(document.querySelectorAll('button, .button, .pager a, .tabs a, .counts a'))
                .filter(el => el.offsetParent !== null)
                .map(el => [el.textContent.trim(), el.getBoundingClientRect().height])
                .filter(([, h]) => h < 36)"""
        )

        assert small == []

"""Journeys of the follow graph: find a person, follow them (with and without JavaScript),
page through their lists, see "you both follow" and "followed by people you follow"."""

from __future__ import annotations

import gzip
import re
from pathlib import Path
from typing import Any

import pytest

from datatools.importer import graph_import, username_for
from social.models import Follow
from social.rebuild import rebuild_user
from tests.support.accounts import UserFactory
from tests.support.browser import MOBILE, count_of, follow_state, people_on_page, unlabelled_controls
from tests.support.graph import follow
from users.models import User

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def popular(tmp_path: Path) -> Any:
    """An account with 1,299 followers, imported as a graph (bulk path) and mirrored: ``u0``."""
    edges = tmp_path / "star.txt.gz"
    with gzip.open(edges, "wt") as handle:
        handle.write("# 1,299 accounts follow node 0\n")
        handle.writelines(f"{n}\t0\n" for n in range(1, 1300))
    graph_import(edges)
    hub = User.objects.get(username=username_for(0))
    hub.display_name = "Ada Okafor"
    hub.bio = "Maps, trains and the occasional long walk."
    hub.save(update_fields=["display_name", "bio"])
    rebuild_user(hub.pk)
    return hub


class TestFindSomeone:
    def test_a_reader_searches_an_account_and_opens_its_profile(self, open_session, shot):
        reader = UserFactory.create(username="alice")
        UserFactory.create(username="bob", display_name="Bob Stone")
        UserFactory.create(username="bobby", display_name="Bobby Tables")
        UserFactory.create(username="carol")
        person = open_session(reader, viewport=MOBILE)
        page = person.page

        page.goto("/")
        assert unlabelled_controls(page) == []
        page.get_by_label("Search by username").fill("bo")
        page.get_by_role("button", name="Search").click()

        results = page.locator(".search-results .person a")
        assert results.all_inner_texts() == ["Bob Stone", "Bobby Tables"]
        shot(person, "search-results")
        results.first.click()
        page.wait_for_url(re.compile(r"/u/bob/$"))
        assert page.get_by_role("heading", level=1).inner_text().startswith("Bob Stone")
        assert follow_state(page) == ("Follow", "false")
        shot(person, "profile")

    def test_a_search_without_results_says_what_to_do(self, open_session):
        person = open_session(UserFactory.create(username="alice"))

        person.page.goto("/?q=zzz")

        assert "Try a shorter prefix" in person.page.locator(".search-results").inner_text()


class TestFollowButton:
    def test_with_javascript_the_button_and_count_change_in_place(self, open_session, shot, popular):
        reader = UserFactory.create(username="alice")
        person = open_session(reader)
        page = person.page
        page.goto(f"/u/{popular.username}/")
        assert count_of(page, "followers-count") == ("1.2k", "1,299")
        assert follow_state(page) == ("Follow", "false")
        shot(person, "before")
        page.evaluate("window.__sameDocument = 'yes'")
        navigations = person.navigations

        page.get_by_role("button", name="Follow").click()
        page.wait_for_selector("button.follow-button[aria-pressed=true]")

        assert follow_state(page) == ("Following", "true")
        assert count_of(page, "followers-count") == ("1.3k", "1,300")
        assert page.evaluate("window.__sameDocument") == "yes"
        assert person.navigations == navigations
        assert Follow.objects.filter(follower=reader, followee=popular).exists()
        shot(person, "following")

        page.get_by_role("button", name="Following").click()
        page.wait_for_selector("button.follow-button[aria-pressed=false]")

        assert count_of(page, "followers-count") == ("1.2k", "1,299")
        assert page.evaluate("window.__sameDocument") == "yes" and person.navigations == navigations
        assert not Follow.objects.filter(follower=reader, followee=popular).exists()
        page.reload()
        assert follow_state(page) == ("Follow", "false")
        assert count_of(page, "followers-count") == ("1.2k", "1,299")

    def test_with_javascript_off_the_form_posts_and_the_page_reloads(self, open_session, shot, popular):
        reader = UserFactory.create(username="erin")
        person = open_session(reader, js=False)
        page = person.page
        page.goto(f"/u/{popular.username}/")
        navigations = person.navigations

        with page.expect_navigation():
            page.get_by_role("button", name="Follow").click()

        assert person.navigations > navigations
        assert page.url.endswith(f"/u/{popular.username}/")
        assert follow_state(page) == ("Following", "true")
        assert count_of(page, "followers-count") == ("1.3k", "1,300")
        shot(person, "after-reload")
        with page.expect_navigation():
            page.get_by_role("button", name="Following").click()
        assert follow_state(page) == ("Follow", "false")
        assert count_of(page, "followers-count") == ("1.2k", "1,299")

    def test_following_someone_who_follows_you_shows_mutual_without_reload(self, open_session):
        reader, author = UserFactory.create(username="alice"), UserFactory.create(username="bob")
        follow(author, reader)
        page = open_session(reader).page
        page.goto("/u/bob/")
        assert page.locator(".badge", has_text="Follows you").is_visible()
        assert not page.locator(".badge-mutual").is_visible()

        page.get_by_role("button", name="Follow").click()

        page.wait_for_selector(".badge-mutual", state="visible")
        assert count_of(page, "followers-count") == ("1", "1")
        assert page.locator(".count-label").first.inner_text() == "follower"

    def test_the_follow_button_is_reachable_by_keyboard_and_shows_focus(self, open_session):
        reader, author = UserFactory.create(username="alice"), UserFactory.create(username="bob")
        page = open_session(reader).page
        page.goto("/u/bob/")

        for _ in range(20):
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.classList.contains('follow-button')"):
                break
        outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
        page.keyboard.press("Enter")
        page.wait_for_selector("button.follow-button[aria-pressed=true]")

        assert outline != "none"
        assert Follow.objects.filter(follower=reader, followee=author).exists()


class TestLists:
    def test_followers_and_following_page_with_older_to_the_end(self, open_session, shot, settings):
        settings.FOLLOW_PAGE_SIZE = 4
        hub = UserFactory.create(username="hub", display_name="Hub Central")
        fans = [UserFactory.create(username=f"fan{n}") for n in range(10)]
        idols = [UserFactory.create(username=f"idol{n}") for n in range(6)]
        for fan in fans:
            follow(fan, hub)
        for idol in idols:
            follow(hub, idol)
        person = open_session(UserFactory.create(username="alice"), viewport=MOBILE)
        page = person.page
        page.goto("/u/hub/")

        page.get_by_role("link", name=re.compile(r"followers$")).click()
        page.wait_for_url(re.compile(r"/u/hub/followers/$"))
        shot(person, "followers-first-page")
        seen, pages = people_on_page(page), 1
        while page.locator("a[rel=next]").count():
            page.locator("a[rel=next]").click()
            page.wait_for_load_state()
            seen += people_on_page(page)
            pages += 1
            assert page.get_by_role("link", name="Newest").is_visible()
        shot(person, "followers-last-page")

        assert pages == 3
        assert sorted(seen) == sorted(fan.username for fan in fans)
        assert len(seen) == len(set(seen))
        assert page.locator(".tabs [aria-current=page]").inner_text().startswith("Followers")

        page.get_by_role("link", name=re.compile(r"^Following")).click()
        following = people_on_page(page)
        page.locator("a[rel=next]").click()
        following += people_on_page(page)

        assert sorted(following) == sorted(idol.username for idol in idols)
        assert page.locator("a[rel=next]").count() == 0
        assert page.locator(".follow-list time").first.inner_text() == "just now"

    def test_an_empty_list_says_what_to_do(self, open_session, shot):
        loner = UserFactory.create(username="loner")
        person = open_session(loner)

        person.page.goto("/u/loner/following/")

        assert "Find people in the directory" in person.page.locator(".empty").inner_text()
        shot(person, "empty-following")


class TestSocialContext:
    def test_you_both_follow_and_followed_by_people_you_follow(self, open_session, shot):
        alice, bob, charlie, dave, erin = (
            UserFactory.create(username=name, display_name=name.title()) for name in ["alice", "bob", "charlie", "dave", "erin"]
        )
        for a, b in [
            (alice, bob),
            (alice, dave),
            (alice, erin),
            (charlie, dave),
            (charlie, erin),
            (bob, charlie),
            (dave, charlie),
        ]:
            follow(a, b)
        person = open_session(alice)
        page = person.page

        page.goto("/u/charlie/")

        familiar = page.locator("section.familiar")
        common = page.locator("section.common")
        assert familiar.get_by_role("heading").inner_text() == "Followed by 2 people you follow"
        assert familiar.locator(".person a").all_inner_texts() == ["Bob", "Dave"]
        assert common.get_by_role("heading").inner_text() == "You both follow (2)"
        assert common.locator(".person a").all_inner_texts() == ["Dave", "Erin"]
        assert page.locator("section.mutual .person a").all_inner_texts() == ["Dave"]
        shot(person, "charlie-desktop")
        page.set_viewport_size(MOBILE)
        shot(person, "charlie-mobile")

        common.get_by_role("link", name="Erin").click()
        page.wait_for_url(re.compile(r"/u/erin/$"))
        assert follow_state(page) == ("Following", "true")

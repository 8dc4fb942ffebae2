"""Journeys of the home feed: publish, fan-out by the real worker, load more, unfollow.

Tasks go to the worker process (the live server is not eager), so each
journey waits for what the worker does (a note in the follower's Redis inbox,
its ``fanned_out_at``), never for a fixed time.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from feed import services as feed_services
from feed.models import Note
from social import services as social_services
from tests.support.accounts import make_user
from tests.support.browser import (
    MOBILE,
    WORKER_TIMEOUT,
    inbox_id_set,
    note_ids,
    wait_for_fan_out,
    wait_for_synced_inbox,
    wait_until,
)
from tests.support.streaming import StreamingServer

pytestmark = pytest.mark.django_db(transaction=True)


class TestPublish:
    def test_a_note_reaches_a_followers_home_feed_through_the_worker(self, stack, open_session, shot):
        author = make_user("bob", display_name="Bob Stone")
        reader = make_user("alice", display_name="Alice Ng")
        social_services.follow_create(actor=reader, followee_id=author.pk)
        writer = open_session(author, label="bob")
        follower = open_session(reader, label="alice", viewport=MOBILE)
        follower.page.goto("/home")
        wait_for_synced_inbox(reader)

        writer.page.goto("/home")
        writer.page.get_by_label("What's new?").fill("Trains run on time today. Mostly.")
        writer.page.get_by_role("button", name="Publish").click()
        writer.page.wait_for_url(re.compile(r"/n/\d+/$"))
        assert "Published" in writer.page.locator(".messages").inner_text()
        shot(writer, "published")
        note = Note.objects.get(author=author)

        wait_until(lambda: note.pk in inbox_id_set(reader), timeout=WORKER_TIMEOUT, what="the note in alice's inbox")
        wait_for_fan_out([note.pk])
        follower.page.reload()

        assert note_ids(follower.page)[0] == note.pk
        first = follower.page.locator("li.note").first
        assert "Trains run on time today. Mostly." in first.inner_text()
        assert "Bob Stone" in first.inner_text()
        assert first.locator("time").inner_text() in {"just now"} | {f"{s} s ago" for s in range(10, 60)}
        assert follower.page.locator(".catching-up").count() == 0
        shot(follower, "home-with-note")


class TestLoadMore:
    def test_load_more_reaches_the_end_with_every_note_once(self, stack, open_session, shot, settings):
        settings.FEED_PAGE_SIZE = 5
        reader = make_user("alice")
        authors = [make_user("bob"), make_user("carol")]
        for author in authors:
            social_services.follow_create(actor=reader, followee_id=author.pk)
        base = timezone.now().replace(microsecond=0) - timedelta(hours=3)
        published = []
        for n in range(23):
            # Pairs of notes share a millisecond: the cursor must break ties.
            at = base + timedelta(minutes=7 * (n // 2))
            published.append(feed_services.note_create(author=authors[n % 2], body=f"note number {n}", created_at=at).pk)
        wait_for_fan_out(published)
        wait_until(lambda: set(published) <= inbox_id_set(reader), timeout=WORKER_TIMEOUT, what="23 notes in the inbox")
        with_js = open_session(reader, label="alice-js")
        page = with_js.page
        page.goto("/home")
        navigations = with_js.navigations

        clicks = 0
        while page.locator("a.load-more").count():
            shown = page.locator("li.note").count()
            page.locator("a.load-more").click()

            # Polled from here: a string predicate would be eval'd in the page, which its CSP forbids.
            def next_page_shown(shown: int = shown) -> bool:
                return page.locator("li.note").count() > shown or not page.locator("a.load-more").count()

            wait_until(
                next_page_shown,
                timeout=10,
                what="the next page of notes",
            )
            clicks += 1
        shot(with_js, "end-of-feed")

        ids = note_ids(page)
        assert clicks == 4  # 5 + 5 + 5 + 5 + 3
        assert len(ids) == len(set(ids)) == 23
        assert set(ids) == set(published)
        # The feed's order: publish time descending, ties by note id ascending (feed.paging).
        published_ms = dict(Note.objects.filter(pk__in=ids).values_list("pk", "created_at"))
        assert ids == sorted(ids, key=lambda pk: (-published_ms[pk].timestamp(), pk))
        assert page.locator(".end-of-feed").is_visible()
        assert with_js.navigations == navigations  # appended in place

        without_js = open_session(reader, js=False, label="alice-nojs", viewport=MOBILE)
        without_js.page.goto("/home")
        pages_ids = note_ids(without_js.page)
        while without_js.page.locator("a.load-more").count():
            without_js.page.locator("a.load-more").click()
            without_js.page.wait_for_load_state()
            pages_ids += note_ids(without_js.page)

        assert pages_ids == ids
        shot(without_js, "last-page-without-js")


class TestUnfollow:
    def test_unfollowing_removes_that_authors_notes_from_the_feed(self, stack, open_session, shot):
        reader = make_user("alice")
        bob, carol = make_user("bob", display_name="Bob"), make_user("carol", display_name="Carol")
        for author in (bob, carol):
            social_services.follow_create(actor=reader, followee_id=author.pk)
        bobs = [feed_services.note_create(author=bob, body=f"bob says {n}").pk for n in range(3)]
        carols = [feed_services.note_create(author=carol, body=f"carol says {n}").pk for n in range(2)]
        wait_for_fan_out(bobs + carols)
        wait_until(lambda: set(bobs + carols) <= inbox_id_set(reader), timeout=WORKER_TIMEOUT, what="notes in the inbox")
        person = open_session(reader)
        page = person.page
        page.goto("/home")
        assert set(note_ids(page)) == set(bobs + carols)

        page.goto("/u/bob/")
        page.get_by_role("button", name="Following").click()
        page.wait_for_selector("button.follow-button[aria-pressed=false]")
        wait_until(lambda: not (set(bobs) & inbox_id_set(reader)), timeout=WORKER_TIMEOUT, what="bob's notes to leave the inbox")
        page.goto("/home")

        assert set(note_ids(page)) == set(carols)
        assert "bob says" not in page.locator("main").inner_text()
        shot(person, "home-after-unfollow")


class TestLiveUpdates:
    def test_a_note_appears_without_a_reload_and_the_divider_marks_what_is_new(self, stack, open_session, shot, settings):
        author = make_user("bob", display_name="Bob Stone")
        reader = make_user("alice", display_name="Alice Ng")
        social_services.follow_create(actor=reader, followee_id=author.pk)
        read = feed_services.note_create(author=author, body="Read before")
        wait_for_fan_out([read.pk])
        streaming = StreamingServer(extra_env={"DJANGO_SECRET_KEY": settings.SECRET_KEY})
        streaming.start()
        settings.STREAMING_API_URL = f"ws://127.0.0.1:{streaming.port}"
        policy = settings.CONTENT_SECURITY_POLICY
        directives = {**policy["DIRECTIVES"], "connect-src": ["'self'", f"http://127.0.0.1:{streaming.port}"]}
        settings.CONTENT_SECURITY_POLICY = {**policy, "DIRECTIVES": directives}
        try:
            follower = open_session(reader, label="alice")
            follower.page.goto("/home")
            wait_for_synced_inbox(reader)
            assert note_ids(follower.page) == [read.pk]

            live = feed_services.note_create(author=author, body="Arrived while the page was open")
            button = follower.page.get_by_role("button", name="1 new note")
            button.wait_for(timeout=WORKER_TIMEOUT * 1000)
            shot(follower, "one-new-note")
            button.click()
            follower.page.wait_for_selector("#last-read")
            shot(follower, "new-since-you-last-read")

            assert note_ids(follower.page) == [live.pk, read.pk]
            order = follower.page.locator("ol.notes > li").evaluate_all("items => items.map(item => item.id)")
            assert order == [f"note-{live.pk}", "last-read", f"note-{read.pk}"]
        finally:
            streaming.stop()


class TestLists:
    def test_make_a_list_add_two_accounts_and_read_its_timeline(self, stack, open_session, shot):
        reader = make_user("alice")
        authors = [make_user(name, display_name=name.title()) for name in ("bob", "carol", "dave")]
        for author in authors:
            social_services.follow_create(actor=reader, followee_id=author.pk)
        notes = {
            author.username: feed_services.note_create(author=author, body=f"{author.username} writes").pk for author in authors
        }
        wait_for_fan_out(list(notes.values()))
        person = open_session(reader)
        page = person.page

        page.goto("/lists/")
        page.get_by_label("Title").fill("Close friends")
        page.get_by_role("button", name="Create list").click()
        page.wait_for_selector("h1:has-text('Close friends')")
        for username in ("bob", "carol"):
            page.get_by_label("Add an account you follow").fill(username)
            page.get_by_role("button", name="Add", exact=True).click()
            page.wait_for_selector(f"section[aria-label=Members] >> text=@{username}")
        page.reload()
        shot(person, "list-timeline")

        assert set(note_ids(page)) == {notes["bob"], notes["carol"]}
        members = page.locator("section[aria-label=Members] .handle").all_inner_texts()
        assert sorted(members) == ["@bob", "@carol"]
        page.goto("/lists/")
        assert page.get_by_role("link", name="Close friends").count() == 1

"""Rows rendered by the Jinja2 row partials (core.templatetags.rows): the markup the pages showed,
every value escaped, the viewer's forms with a CSRF token the site accepts."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from django.template import Context, Template
from django.test import Client

from core.templatetags import rows
from feed.paging import FeedAuthor, FeedNote
from social import services
from social.models import Mute
from tests.support.accounts import signed_in

pytestmark = pytest.mark.django_db

AT = datetime(2024, 3, 4, 12, 5, 9, tzinfo=UTC)


def a_note(*, body: str = "hello", display_name: str = "Bob", spoiler_text: str = "") -> FeedNote:
    author = FeedAuthor(id=7, username="bob", display_name=display_name)
    return FeedNote(42, 7, author, body, AT, 1709553909000, spoiler_text)


def render(source: str, **context: object) -> str:
    return Template("{% load rows %}" + source).render(Context(context))


class TestNoteRows:
    def test_a_note_row_links_the_author_and_the_note_with_its_time(self):
        html = render("{% note_rows notes %}", notes=[a_note()])

        assert '<li class="note" id="note-42" data-note-id="42" data-published-ms="1709553909000">' in html
        assert '<a href="/u/bob/"><strong>Bob</strong></a>' in html
        assert '<span class="muted">@bob</span>' in html
        assert (
            '<a class="muted" href="/n/42/"><time class="relative" datetime="2024-03-04T12:05:09+00:00" '
            'title="2024-03-04 12:05:09 UTC">Mar 4, 2024</time></a>'
        ) in html
        assert '<p class="note-body">hello</p>' in html

    def test_every_value_is_escaped_and_line_breaks_kept(self):
        note = a_note(body="<b>bold</b>\nnext & last", display_name='<script>"x"</script>')

        html = render("{% note_rows notes %}", notes=[note])

        assert '<p class="note-body">&lt;b&gt;bold&lt;/b&gt;<br>next &amp; last</p>' in html
        assert "<script>" not in html and "&lt;script&gt;" in html

    def test_a_content_warning_folds_the_body(self):
        html = render("{% note_row note %}", note=a_note(spoiler_text="spoilers <here>"))

        assert (
            '<details class="note-warning"><summary>spoilers &lt;here&gt;</summary><p class="note-body">hello</p></details>'
            in html
        )

    def test_the_django_partial_prints_the_same_row(self):
        note = a_note()

        included = render('{% include "feed/_note.html" %}', note=note)

        assert included.strip() == render("{% note_rows notes %}", notes=[note]).strip()


class TestUserRows:
    def test_an_account_row_shows_its_avatar_name_and_handle(self, user_factory):
        user = user_factory(username="dave", display_name="Dave <D>")

        html = render("{% user_rows users %}", users=[user])

        assert html == (
            f'<li><span class="avatar hue-{user.pk * 137 % 360 // 10}" aria-hidden="true">D</span><span class="person">'
            '<a href="/u/dave/">Dave &lt;D&gt;</a> <span class="muted">@dave</span></span></li>'
        )

    def test_a_row_is_rendered_once_per_process_and_again_for_new_names(self, user_factory, monkeypatch):
        erin, dave = user_factory(username="erin"), user_factory(username="dave", display_name="Dave")
        rendered: list[int] = []
        render_row = rows._render_row

        def counted(name: str, context: dict[str, Any]) -> str:
            rendered.append(context["u"].pk)
            return render_row(name, context)

        monkeypatch.setattr(rows, "_user_rows", rows.Kept(100))
        monkeypatch.setattr(rows, "_render_row", counted)
        first = render("{% user_rows users %}", users=[erin, dave])
        again = render("{% user_rows users %}", users=[dave, erin])
        dave.display_name = "Dave Two"
        renamed = render("{% user_rows users %}", users=[dave])

        assert rendered == [erin.pk, dave.pk, dave.pk]
        assert first.index("@erin") < first.index("@dave") and again.index("@dave") < again.index("@erin")
        assert ">Dave Two</a>" in renamed


class TestFollowRows:
    @pytest.fixture
    def followers(self, alice, bob, charlie, django_capture_on_commit_callbacks):
        """bob and charlie follow alice."""
        with django_capture_on_commit_callbacks(execute=True):
            for follower in (bob, charlie):
                services.follow_create(actor=follower, followee_id=alice.pk)

    def test_signed_out_the_rows_carry_no_forms(self, alice, followers):
        html = Client().get("/u/alice/followers/").content.decode()

        assert html.count('class="person"') == 2
        rows = html.split('class="people follow-list"')[1].split("</ol>")[0]
        assert "<form" not in rows and "<button" not in rows
        assert 'id="row-action"' not in html

    def test_the_owner_can_remove_each_follower(self, alice, followers):
        html = signed_in(alice).get("/u/alice/followers/").content.decode()

        assert 'formaction="/u/bob/remove-follower/" name="back" value="followers"' in html
        assert 'formaction="/u/charlie/remove-follower/" name="back" value="followers"' in html
        assert html.count('form="row-action"') == 6  # remove, mute and block on each row

    def test_a_row_button_posts_a_token_the_site_accepts(self, alice, bob, charlie, followers):
        """A row's button posts the page's one form (its token) to the button's own action, with the
        button's name and value, as a browser does."""
        client = signed_in(bob, enforce_csrf_checks=True)
        html = client.get("/u/alice/followers/").content.decode()
        form = re.search(
            r'<form id="row-action" method="post" hidden><input type="hidden" name="csrfmiddlewaretoken" value="([^"]+)"></form>',
            html,
        )
        assert form is not None
        row = html.split('<span class="muted">@charlie</span>')[1].split("</li>")[0]
        button = re.search(
            r'<button type="submit" form="row-action" formaction="(/u/charlie/mute/)" name="duration" value="forever"', row
        )
        assert button is not None
        assert "<form" not in row  # no token in a row: the rows are cached, the token is the page's

        response = client.post(button.group(1), {"csrfmiddlewaretoken": form.group(1), "duration": "forever"})

        assert response.status_code == 302
        assert Mute.objects.filter(muter=bob, muted=charlie).exists()
        assert "More for @bob" not in html  # no actions on the viewer's own row


class TestAccountFragments:
    """An account's part of a row is rendered once per process and reused, keyed by every value it
    prints: a rename shows on the next render, in each page that prints it."""

    def test_a_rename_shows_in_the_next_user_rows_and_note_rows(self, user_factory):
        user = user_factory(username="erin", display_name="Erin")
        first = render("{% user_rows users %}", users=[user])
        note = a_note()

        user.username, user.display_name = "erin2", "Erin <Two>"
        user.save()
        renamed = FeedNote(42, 7, FeedAuthor(id=7, username="bob2", display_name=""), "hello", AT, 1709553909000)

        assert '<a href="/u/erin/">Erin</a> <span class="muted">@erin</span>' in first
        again = render("{% user_rows users %}", users=[user])
        assert '<a href="/u/erin2/">Erin &lt;Two&gt;</a> <span class="muted">@erin2</span>' in again
        assert ">E</span>" in again  # the avatar's letter
        assert '<a href="/u/bob/"><strong>Bob</strong></a>' in render("{% note_rows notes %}", notes=[note])
        shown = render("{% note_rows notes %}", notes=[renamed])
        assert '<a href="/u/bob2/"><strong>bob2</strong></a>\n    <span class="muted">@bob2</span>' in shown

    def test_a_rename_shows_on_the_next_followers_profile_and_home_page(self, alice, bob, django_capture_on_commit_callbacks):
        from tests.support.feed import Publisher

        with django_capture_on_commit_callbacks(execute=True):
            services.follow_create(actor=bob, followee_id=alice.pk)
            services.follow_create(actor=alice, followee_id=bob.pk)
        Publisher()(bob, "from bob")
        client = signed_in(alice)
        pages = ["/u/alice/followers/", "/u/alice/", "/home"]
        before = [client.get(path).content.decode() for path in pages]

        bob.username, bob.display_name = "robert", "Robert"
        with django_capture_on_commit_callbacks(execute=True):  # the rename commits, as a request's would
            bob.save()
        after = [client.get(path).content.decode() for path in pages]

        assert all("@bob<" in html for html in before)
        for path, html in zip(pages, after, strict=True):
            assert "@robert<" in html and "@bob<" not in html, path
            assert ">Robert</" in html, path


class TestCachedRows:
    """Rows are kept per process by every value they print: a change of any of them renders a new
    row, and a row rendered for one viewer never shows another viewer's buttons."""

    def test_a_note_row_changes_with_its_body_warning_author_and_age(self):
        first = render("{% note_rows notes %}", notes=[a_note()])
        assert render("{% note_rows notes %}", notes=[a_note()]) == first  # kept

        assert "edited" in render("{% note_rows notes %}", notes=[a_note(body="edited")])
        assert "<summary>spoiler</summary>" in render("{% note_rows notes %}", notes=[a_note(spoiler_text="spoiler")])
        assert "<strong>Robert</strong>" in render("{% note_rows notes %}", notes=[a_note(display_name="Robert")])
        recent = FeedNote(43, 7, FeedAuthor(id=7, username="bob", display_name="Bob"), "hi", datetime.now(UTC), 1)
        assert ">just now</time>" in render("{% note_rows notes %}", notes=[recent])

    def test_the_new_divider_stands_after_the_count_it_is_given(self):
        notes = [FeedNote(n, 7, FeedAuthor(id=7, username="bob", display_name=""), f"note {n}", AT, n) for n in (1, 2, 3)]

        html = render("{% note_rows notes new_count=2 %}", notes=notes)

        assert html.index('id="note-2"') < html.index('id="last-read"') < html.index('id="note-3"')
        assert 'id="last-read"' not in render("{% note_rows notes %}", notes=notes)

    def test_the_owners_buttons_never_reach_another_viewer(self, alice, bob, charlie, django_capture_on_commit_callbacks):
        with django_capture_on_commit_callbacks(execute=True):
            for follower in (bob, charlie):
                services.follow_create(actor=follower, followee_id=alice.pk)
        owner = signed_in(alice).get("/u/alice/followers/").content.decode()

        other = signed_in(bob).get("/u/alice/followers/").content.decode()
        signed_out = Client().get("/u/alice/followers/").content.decode()

        assert owner.count(">Remove</button>") == 2
        assert ">Remove</button>" not in other and ">Remove</button>" not in signed_out
        assert "More for @charlie" in other and "More for @bob" not in other  # no menu on the viewer's own row
        assert "More for @" not in signed_out


class TestCachedHeader:
    def test_each_reader_gets_its_own_header_count_and_token(self, alice, bob, django_capture_on_commit_callbacks):
        """The header is kept by what it prints (reader, page, unread count); the sign-out form's
        token is the request's own."""
        alice_client, bob_client = signed_in(alice), signed_in(bob)
        first = alice_client.get("/home").content.decode()
        with django_capture_on_commit_callbacks(execute=True):
            services.follow_create(actor=bob, followee_id=alice.pk)  # a notification for alice

        again = alice_client.get("/home").content.decode()
        bobs = bob_client.get("/home").content.decode()

        def token(html: str) -> str:
            found = re.search(
                r'action="/logout/" class="inline"><input type="hidden" name="csrfmiddlewaretoken" value="([^"]+)">', html
            )
            assert found is not None
            return found.group(1)

        assert 'title="Your profile, @alice"' in first and 'id="unread-count"' not in first
        assert '<span class="badge badge-unread" id="unread-count">1</span>' in again
        assert 'title="Your profile, @bob"' in bobs and "@alice" not in bobs.split("</header>")[0]
        assert len({token(first), token(again), token(bobs)}) == 3


class TestLineEnds:
    def test_every_kind_of_line_end_is_a_break_as_django_prints_it(self):
        note = a_note(body="one\r\ntwo\rthree\nfour 'q'")

        html = render("{% note_rows notes %}", notes=[note])

        assert '<p class="note-body">one<br>two<br>three<br>four &#x27;q&#x27;</p>' in html
        assert html.strip() == render('{% include "feed/_note.html" %}', note=note).strip()


def header(html: str) -> str:
    return html.split('<header class="topbar">')[1].split("</header>", maxsplit=1)[0]


class TestSiteHeader:
    def test_signed_out_it_offers_sign_in_and_sign_up_and_marks_the_page(self):
        html = header(Client().get("/signup/").content.decode())

        assert '<a href="/login/">Sign in</a>' in html
        assert '<a href="/signup/" class="button button-small" aria-current="page">Sign up</a>' in html
        assert "Home" not in html and "<form" not in html

    def test_signed_in_it_links_the_reader_marks_home_and_signs_out_with_a_token(self, alice):
        client = signed_in(alice, enforce_csrf_checks=True)
        html = header(client.get("/home").content.decode())

        assert '<a href="/home" aria-current="page">Home</a>' in html
        assert '<a href="/lists/">Lists</a>' in html
        assert '<a href="/u/alice/" class="nav-me" title="Your profile, @alice">@alice</a>' in html
        token = re.search(
            r'<form method="post" action="/logout/" class="inline"><input type="hidden" '
            r'name="csrfmiddlewaretoken" value="([^"]+)">',
            html,
        )
        assert token is not None
        assert client.post("/logout/", {"csrfmiddlewaretoken": token.group(1)}).status_code == 302
        assert client.get("/home").status_code == 302

    def test_only_the_readers_own_profile_marks_the_profile_link(self, alice, bob):
        client = signed_in(alice)

        assert 'class="nav-me" title="Your profile, @alice" aria-current="page"' in header(
            client.get("/u/alice/").content.decode()
        )
        assert 'aria-current="page"' not in header(client.get("/u/bob/").content.decode())

    def test_the_unread_badge_shows_the_count_of_the_next_request(self, alice, bob, django_capture_on_commit_callbacks):
        client = signed_in(alice)
        assert "badge-unread" not in header(client.get("/home").content.decode())
        with django_capture_on_commit_callbacks(execute=True):
            services.follow_create(actor=bob, followee_id=alice.pk)

        html = header(client.get("/home").content.decode())

        assert '<span class="badge badge-unread" id="unread-count">1</span>' in html

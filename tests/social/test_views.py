"""Server-rendered pages: profile, lists, follow button; owner / member / outsider."""

import re

import pytest
from django.test import Client

from core.cluster import is_cluster
from social import services
from social.models import Follow
from tests.support.accounts import signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def graph(alice, bob, charlie, user_factory, django_capture_on_commit_callbacks):
    dave = user_factory(username="dave")
    with django_capture_on_commit_callbacks(execute=True):
        for actor, target in [(alice, bob), (bob, alice), (alice, dave), (charlie, dave), (charlie, bob), (dave, charlie)]:
            services.follow_create(actor=actor, followee_id=target.pk)
    return alice, bob, charlie, dave


class TestProfile:
    def test_shows_counts_badges_and_both_follow(self, graph):
        _alice, _bob, charlie, _dave = graph

        html = signed_in(charlie).get("/u/alice/").content.decode()

        assert re.search(r'id="followers-count"[^>]*>1<', html)
        assert re.search(r'id="following-count"[^>]*>2<', html)
        assert "You both follow (2)" in html  # bob and dave
        assert 'aria-pressed="false"' in html
        assert "Follows you" not in html

    def test_mutual_badge_and_familiar_followers(self, graph):
        alice, bob, _charlie, _dave = graph

        html = signed_in(bob).get("/u/alice/").content.decode()
        familiar = signed_in(alice).get("/u/charlie/").content.decode()

        assert "Follows you" in html and "Mutual" in html
        assert 'aria-pressed="true"' in html
        assert "Followed by 1 person you follow" in familiar  # dave follows charlie

    def test_a_profile_reads_the_accounts_of_its_three_lists_from_the_account_cache(
        self, graph, django_assert_num_queries, redis_client
    ):
        _alice, _bob, charlie, _dave = graph
        client = signed_in(charlie)
        client.get("/u/alice/")  # the first view fills the account cache

        # the account with the viewer's standing (whether it follows the account too), the notes;
        # the accounts of friends, "you both follow" and "followed by people you follow" come with
        # the graph's script (one query before, three before that); the session and the signed-in
        # account's token are read from Redis (its row kept since the first view). On a cluster the
        # graph's reads are separate and those accounts are one query.
        with django_assert_num_queries(3 if is_cluster(redis_client) else 2):
            html = client.get("/u/alice/").content.decode()

        assert "You both follow (2)" in html and "Followed by 1 person you follow" in html
        assert html.count('href="/u/bob/"') == 3  # a friend of alice's, followed by both, followed by charlie

    def test_signed_out_sees_counts_and_a_sign_in_link(self, graph):
        html = Client().get("/u/alice/").content.decode()

        assert "Sign in</a> to follow" in html
        assert "You both follow" not in html

    def test_unknown_or_deactivated_profile_is_404(self, user_factory):
        gone = user_factory(is_active=False)

        assert Client().get("/u/nobody-here/").status_code == 404
        assert Client().get(f"/u/{gone.username}/").status_code == 404


class TestFollowButton:
    def test_post_follows_and_redirects_back(self, alice, bob, django_capture_on_commit_callbacks):
        with django_capture_on_commit_callbacks(execute=True):
            response = signed_in(alice).post("/u/bob/follow/")

        assert response.status_code == 302
        assert response["Location"] == "/u/bob/"
        assert Follow.objects.filter(follower=alice, followee=bob).exists()

    def test_json_toggle_for_the_script(self, alice, bob, django_capture_on_commit_callbacks):
        with django_capture_on_commit_callbacks(execute=True):
            response = signed_in(alice).post("/u/bob/follow/", HTTP_ACCEPT="application/json")

        assert response.status_code == 200
        assert response.json()["success"] is True and response.json()["following"] is True

    def test_signed_out_is_sent_to_sign_in(self, bob):
        response = Client().post("/u/bob/follow/")

        assert response.status_code == 302
        assert response["Location"].startswith("/login/")
        assert not Follow.objects.exists()

    def test_missing_csrf_is_403(self, alice, bob):
        client = signed_in(alice, enforce_csrf_checks=True)

        response = client.post("/u/bob/follow/")

        assert response.status_code == 403
        assert not Follow.objects.exists()

    def test_self_follow_shows_an_error_and_writes_nothing(self, alice):
        response = signed_in(alice).post("/u/alice/follow/")

        assert response.status_code == 400
        assert "You cannot follow yourself." in response.content.decode()
        assert '<a href="/u/alice/">Back to @alice</a>' in response.content.decode()
        assert not Follow.objects.exists()

    def test_the_forms_find_the_account_whatever_the_case_of_its_name(self, alice, bob, django_capture_on_commit_callbacks):
        with django_capture_on_commit_callbacks(execute=True):
            followed = signed_in(alice).post("/u/BOB/follow/")
            muted = signed_in(alice).post("/u/Bob/mute/", {"duration": "1d"})

        assert (followed.status_code, muted.status_code) == (302, 302)
        assert Follow.objects.filter(follower=alice, followee=bob).exists()

    def test_get_is_405(self, alice, bob):
        assert signed_in(alice).get("/u/bob/follow/").status_code == 405


class TestLists:
    def test_followers_page_paginates_with_older_link(self, bob, user_factory, settings, django_capture_on_commit_callbacks):
        settings.FOLLOW_PAGE_SIZE = 2
        fans = [user_factory() for _ in range(3)]
        with django_capture_on_commit_callbacks(execute=True):
            for fan in fans:
                services.follow_create(actor=fan, followee_id=bob.pk)

        first = Client().get("/u/bob/followers/").content.decode()
        found = re.search(r'href="\?cursor=([^"]+)"', first)
        assert found is not None
        cursor = found.group(1)
        second = Client().get(f"/u/bob/followers/?cursor={cursor}").content.decode()

        names = lambda html: re.findall(r'<a href="/u/(user\d+)/">', html)  # noqa: E731
        assert len(names(first)) == 2 and len(names(second)) == 1
        assert set(names(first)) | set(names(second)) == {f.username for f in fans}
        assert "Older" not in second

    def test_bad_cursor_is_400(self, bob):
        assert Client().get("/u/bob/followers/?cursor=%%%").status_code == 400

    def test_followers_page_query_count_is_bounded(
        self, bob, user_factory, django_assert_num_queries, django_capture_on_commit_callbacks, redis_client
    ):
        with django_capture_on_commit_callbacks(execute=True):
            for _ in range(30):
                services.follow_create(actor=user_factory(), followee_id=bob.pk)
        client = Client()

        # Profile user, users of the page: the list itself comes from Redis. On one server the page
        # fills the account cache and checks the filled accounts are still active after the fill;
        # on a cluster the rows come from the database and nothing is filled.
        with django_assert_num_queries(2 if is_cluster(redis_client) else 3):
            response = client.get("/u/bob/followers/")

        assert response.status_code == 200


class TestExactCounts:
    def test_lists_show_the_exact_total_beside_the_compact_tabs(self, bob, user_factory, django_capture_on_commit_callbacks):
        with django_capture_on_commit_callbacks(execute=True):
            for _ in range(3):
                services.follow_create(actor=user_factory(), followee_id=bob.pk)

        followers = Client().get("/u/bob/followers/").content.decode()
        following = Client().get("/u/bob/following/").content.decode()

        assert re.search(r'class="muted list-total">3 followers<', followers)
        assert re.search(r'class="muted list-total">Following 0 accounts<', following)

"""The Lists pages: index and create, a list's timeline and members, rename and delete, and the
"add to list" control on profiles; another reader's list is not found, bad input changes nothing."""

from __future__ import annotations

import pytest

from feed import services
from feed.models import List, ListMember
from tests.support.accounts import signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def crew(active_alice, active_bob, follow, run_commits):
    """alice follows bob; her list "crew" holds him."""
    follow(active_alice, active_bob)
    created = run_commits(lambda: services.list_create(owner=active_alice, title="crew"))
    run_commits(lambda: services.list_members_add(list_=created, account_ids=[active_bob.pk]))
    return created


class TestListPages:
    def test_create_add_read_rename_and_delete(self, active_alice, active_bob, follow, publish, run_commits):
        follow(active_alice, active_bob)
        client = signed_in(active_alice)

        created = run_commits(lambda: client.post("/lists/", {"title": "ham burglars"}))
        found = List.objects.get(owner=active_alice)
        assert created.status_code == 302 and created["Location"] == f"/lists/{found.pk}/"

        run_commits(lambda: client.post(f"/lists/{found.pk}/members/", {"username": active_bob.username}))
        note = publish(active_bob, "stolen ham")
        page = client.get(f"/lists/{found.pk}/")

        assert page.status_code == 200
        assert "stolen ham" in page.content.decode()
        assert f"@{active_bob.username}" in page.content.decode()
        assert [n.pk for n in page.context["page"].notes] == [note.pk]

        run_commits(lambda: client.post(f"/lists/{found.pk}/edit/", {"title": "fry kids", "exclusive": "on"}))
        found.refresh_from_db()
        assert (found.title, found.exclusive) == ("fry kids", True)
        assert "fry kids" in client.get("/lists/").content.decode()

        run_commits(lambda: client.post(f"/lists/{found.pk}/delete/"))
        assert not List.objects.exists()

    def test_remove_a_member(self, active_alice, active_bob, crew, run_commits):
        client = signed_in(active_alice)

        run_commits(lambda: client.post(f"/lists/{crew.pk}/members/remove/", {"username": active_bob.username}))

        assert not ListMember.objects.exists()

    def test_another_readers_list_is_not_found_and_unchanged(self, active_bob, active_charlie, crew):
        client = signed_in(active_charlie)

        assert client.get(f"/lists/{crew.pk}/").status_code == 404
        assert client.post(f"/lists/{crew.pk}/edit/", {"title": "mine"}).status_code == 404
        assert client.post(f"/lists/{crew.pk}/delete/").status_code == 404
        assert client.post(f"/lists/{crew.pk}/members/remove/", {"username": active_bob.username}).status_code == 404
        assert List.objects.get().title == "crew"
        assert ListMember.objects.count() == 1

    def test_bad_input_is_a_4xx_and_changes_nothing(self, active_alice, active_charlie, crew):
        client = signed_in(active_alice)

        assert client.post("/lists/", {"title": ""}).status_code == 400
        assert client.post(f"/lists/{crew.pk}/edit/", {"title": " "}).status_code == 400
        assert client.post(f"/lists/{crew.pk}/members/", {"username": active_charlie.username}).status_code == 422
        assert client.post(f"/lists/{crew.pk}/members/", {"username": "no such one"}).status_code == 404
        assert client.get("/lists/abc/").status_code == 404
        assert list(List.objects.values_list("title", flat=True)) == ["crew"]
        assert ListMember.objects.count() == 1

    def test_signed_out_is_sent_to_sign_in(self, crew, client):
        assert client.get("/lists/").status_code == 302
        assert client.post("/lists/", {"title": "x"}).status_code == 302
        assert List.objects.count() == 1


class TestTheProfilesControl:
    def test_a_followed_account_offers_each_list_and_adds_to_it(self, active_alice, active_charlie, follow, crew, run_commits):
        follow(active_alice, active_charlie)
        client = signed_in(active_alice)

        page = client.get(f"/u/{active_charlie.username}/").content.decode()

        assert "Add to list “crew”" in page
        response = run_commits(
            lambda: client.post(f"/lists/{crew.pk}/members/", {"username": active_charlie.username, "next": "profile"})
        )
        assert response["Location"] == f"/u/{active_charlie.username}/"
        assert ListMember.objects.filter(list=crew, account=active_charlie).exists()

    def test_an_account_not_followed_offers_none(self, active_alice, active_charlie, crew):
        page = signed_in(active_alice).get(f"/u/{active_charlie.username}/").content.decode()

        assert "Add to list" not in page

    def test_a_list_that_holds_the_account_offers_removal_not_adding(self, active_alice, active_bob, crew, run_commits):
        client = signed_in(active_alice)

        page = client.get(f"/u/{active_bob.username}/").content.decode()

        assert "Add to list “crew”" not in page
        assert "Remove from list “crew”" in page
        response = run_commits(
            lambda: client.post(f"/lists/{crew.pk}/members/remove/", {"username": active_bob.username, "next": "profile"})
        )
        assert response["Location"] == f"/u/{active_bob.username}/"
        assert not ListMember.objects.filter(list=crew, account=active_bob).exists()
        assert "Add to list “crew”" in client.get(f"/u/{active_bob.username}/").content.decode()

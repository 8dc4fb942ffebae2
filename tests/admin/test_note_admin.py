"""The note admin: moderators hide and unhide, superusers delete; notes leave feeds either way.

The hide and delete paths are the feed services, so a hidden or deleted
note leaves the author's outbox, every inbox and the home timeline after
commit; unhiding delivers it again. A deactivated author's notes leave
feeds too, and come back on reactivation.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, DELETION, LogEntry

from feed import redis_keys as feed_keys
from feed import services as feed_services
from feed.models import Note
from feed.selectors import home_timeline
from tests.support.accounts import make_user
from tests.support.feed import inbox_ids

pytestmark = pytest.mark.django_db


@pytest.fixture
def reader_and_notes(follow: Any, django_capture_on_commit_callbacks: Any) -> dict[str, Any]:
    """Reader R (active) follows authors A and B; A published a1, a2 and B published b1."""
    reader, a, b = make_user("reader"), make_user("author_a"), make_user("author_b")
    follow(reader, a)
    follow(reader, b)
    notes = {}
    for name, author in (("a1", a), ("b1", b), ("a2", a)):
        with django_capture_on_commit_callbacks(execute=True):
            notes[name] = feed_services.note_create(author=author, body=f"note {name}")
    return {"reader": reader, "a": a, "b": b, **notes}


def timeline_ids(user: Any) -> list[int]:
    return [note.pk for note in home_timeline(user_id=user.pk, cursor=None, limit=20).notes]


class TestHide:
    def test_moderator_hides_by_action_and_the_note_leaves_every_feed(
        self,
        reader_and_notes: Any,
        moderator_client: Any,
        moderator: Any,
        redis_client: Any,
        django_capture_on_commit_callbacks: Any,
    ) -> None:
        r, a1, a2, b1 = (reader_and_notes[k] for k in ("reader", "a1", "a2", "b1"))
        assert inbox_ids(redis_client, r) == [a2.pk, b1.pk, a1.pk]

        with django_capture_on_commit_callbacks(execute=True):
            response = moderator_client.post("/admin/feed/note/", {"action": "hide_notes", "_selected_action": [a1.pk]})

        assert response.status_code == 302
        a1.refresh_from_db()
        assert a1.is_hidden is True
        assert inbox_ids(redis_client, r) == [a2.pk, b1.pk]
        assert redis_client.zscore(feed_keys.outbox_key(a1.author_id), a1.pk) is None
        assert timeline_ids(r) == [a2.pk, b1.pk]
        entry = LogEntry.objects.get(user=moderator)
        assert (entry.action_flag, entry.object_id, entry.change_message) == (CHANGE, str(a1.pk), f"Hid note {a1.pk}.")

    def test_unhide_delivers_the_note_again_at_its_time(
        self, reader_and_notes: Any, moderator_client: Any, redis_client: Any, django_capture_on_commit_callbacks: Any
    ) -> None:
        r, a1, a2, b1 = (reader_and_notes[k] for k in ("reader", "a1", "a2", "b1"))
        with django_capture_on_commit_callbacks(execute=True):
            moderator_client.post(f"/admin/feed/note/{a1.pk}/moderate/hide/")

        with django_capture_on_commit_callbacks(execute=True):
            response = moderator_client.post(f"/admin/feed/note/{a1.pk}/moderate/unhide/")

        assert response.status_code == 302
        assert inbox_ids(redis_client, r) == [a2.pk, b1.pk, a1.pk]
        assert timeline_ids(r) == [a2.pk, b1.pk, a1.pk]
        assert list(LogEntry.objects.values_list("change_message", flat=True).order_by("id")) == [
            f"Hid note {a1.pk}.",
            f"Unhid note {a1.pk}.",
        ]

    def test_plain_staff_cannot_hide(self, reader_and_notes: Any, staff_client: Any) -> None:
        a1 = reader_and_notes["a1"]

        button = staff_client.post(f"/admin/feed/note/{a1.pk}/moderate/hide/")
        action = staff_client.post("/admin/feed/note/", {"action": "hide_notes", "_selected_action": [a1.pk]})

        assert (button.status_code, action.status_code) == (403, 403)
        a1.refresh_from_db()
        assert a1.is_hidden is False

    def test_hide_answers_only_post_and_404s_unknown_notes(self, reader_and_notes: Any, moderator_client: Any) -> None:
        a1 = reader_and_notes["a1"]

        statuses = [
            moderator_client.get(f"/admin/feed/note/{a1.pk}/moderate/hide/").status_code,
            moderator_client.post("/admin/feed/note/999999999/moderate/hide/").status_code,
            moderator_client.post(f"/admin/feed/note/{a1.pk}/moderate/explode/").status_code,
        ]

        assert statuses == [405, 404, 404]


class TestDelete:
    def test_moderator_cannot_delete(self, reader_and_notes: Any, moderator_client: Any) -> None:
        a1 = reader_and_notes["a1"]

        page = moderator_client.get(f"/admin/feed/note/{a1.pk}/delete/")
        post = moderator_client.post(f"/admin/feed/note/{a1.pk}/delete/", {"post": "yes"})
        listing = moderator_client.get("/admin/feed/note/")

        assert (page.status_code, post.status_code) == (403, 403)
        actions = {name for name, _ in listing.context["action_form"].fields["action"].choices if name}
        assert actions == {"hide_notes", "unhide_notes"}
        a1.refresh_from_db()
        assert a1.deleted_at is None

    def test_superuser_bulk_delete_soft_deletes_through_the_service(
        self, reader_and_notes: Any, superuser_client: Any, redis_client: Any, django_capture_on_commit_callbacks: Any
    ) -> None:
        r, a1, a2, b1 = (reader_and_notes[k] for k in ("reader", "a1", "a2", "b1"))

        with django_capture_on_commit_callbacks(execute=True):
            response = superuser_client.post(
                "/admin/feed/note/", {"action": "delete_selected", "_selected_action": [a1.pk, b1.pk], "post": "yes"}
            )

        assert response.status_code == 302
        assert Note.objects.filter(pk__in=[a1.pk, b1.pk], deleted_at__isnull=False).count() == 2
        assert inbox_ids(redis_client, r) == [a2.pk]
        assert timeline_ids(r) == [a2.pk]
        assert LogEntry.objects.filter(action_flag=DELETION).count() == 2

    def test_superuser_single_delete(
        self, reader_and_notes: Any, superuser_client: Any, redis_client: Any, django_capture_on_commit_callbacks: Any
    ) -> None:
        r, a2 = reader_and_notes["reader"], reader_and_notes["a2"]

        with django_capture_on_commit_callbacks(execute=True):
            response = superuser_client.post(f"/admin/feed/note/{a2.pk}/delete/", {"post": "yes"})

        assert response.status_code == 302
        assert a2.pk not in inbox_ids(redis_client, r)
        assert a2.pk not in timeline_ids(r)


class TestAuthorDeactivationInTheAdmin:
    def test_notes_leave_feeds_and_come_back(
        self, reader_and_notes: Any, superuser_client: Any, redis_client: Any, django_capture_on_commit_callbacks: Any
    ) -> None:
        r, a, a1, a2, b1 = (reader_and_notes[k] for k in ("reader", "a", "a1", "a2", "b1"))

        with django_capture_on_commit_callbacks(execute=True):
            superuser_client.post(f"/admin/users/user/{a.pk}/mirror/deactivate/")
        gone_inbox, gone_timeline = inbox_ids(redis_client, r), timeline_ids(r)
        with django_capture_on_commit_callbacks(execute=True):
            superuser_client.post(f"/admin/users/user/{a.pk}/mirror/reactivate/")

        assert (gone_inbox, gone_timeline) == ([b1.pk], [b1.pk])
        assert inbox_ids(redis_client, r) == [a2.pk, b1.pk, a1.pk]
        assert timeline_ids(r) == [a2.pk, b1.pk, a1.pk]


class TestListing:
    def test_search_by_author_prefix_or_note_id_and_filter_by_state(
        self, reader_and_notes: Any, superuser_client: Any, django_capture_on_commit_callbacks: Any
    ) -> None:
        a1, a2, b1 = (reader_and_notes[k] for k in ("a1", "a2", "b1"))
        with django_capture_on_commit_callbacks(execute=True):
            feed_services.note_hide(note=b1, hidden=True)

        by_author = superuser_client.get("/admin/feed/note/", {"q": "author_a"})
        by_id = superuser_client.get("/admin/feed/note/", {"q": str(b1.pk)})
        hidden = superuser_client.get("/admin/feed/note/", {"state": "hidden"})
        visible = superuser_client.get("/admin/feed/note/", {"state": "visible"})

        assert [n.pk for n in by_author.context["cl"].result_list] == [a2.pk, a1.pk]
        assert b1.pk in [n.pk for n in by_id.context["cl"].result_list]
        assert [n.pk for n in hidden.context["cl"].result_list] == [b1.pk]
        assert [n.pk for n in visible.context["cl"].result_list] == [a2.pk, a1.pk]

    @pytest.mark.parametrize("notes", [3, 40])
    def test_changelist_queries_do_not_grow_with_rows(
        self, notes: int, superuser_client: Any, django_assert_max_num_queries: Any
    ) -> None:
        Note.objects.bulk_create([Note(author=make_user(), body=f"n{i}") for i in range(notes)])
        superuser_client.get("/admin/feed/note/")

        with django_assert_max_num_queries(7):
            response = superuser_client.get("/admin/feed/note/")

        assert len(response.context["cl"].result_list) == notes

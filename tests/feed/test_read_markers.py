"""The pages move the read markers: the home page's first page (with its "new since you last
read" divider) and the notifications page."""

from __future__ import annotations

import pytest

from notifications.models import Notification
from tests.support.accounts import signed_in
from users.models import HOME, NOTIFICATIONS
from users.selectors import marker_position

pytestmark = pytest.mark.django_db


class TestPagesMoveMarkers:
    def test_the_home_page_marks_the_newest_shown_and_divides_what_is_new(
        self, active_alice, active_bob, follow, publish, synced
    ) -> None:
        follow(active_alice, active_bob)
        synced(active_alice)
        old = [publish(active_bob, f"old {i}") for i in range(2)]
        client = signed_in(active_alice)

        first = client.get("/home").content.decode()
        new = [publish(active_bob, f"new {i}") for i in range(3)]
        second = client.get("/home").content.decode()
        third = client.get("/home").content.decode()

        assert 'id="last-read"' not in first  # nothing read before
        assert marker_position(user_id=active_alice.pk, timeline=HOME) == new[-1].pk
        divider = second.index('id="last-read"')
        assert all(second.index(f"new {i}<") < divider < second.index(f"old {j}<") for i in range(3) for j in range(2))
        assert old[-1].pk < new[0].pk
        assert 'id="last-read"' not in third  # all read now

    def test_a_later_page_of_home_leaves_the_marker(self, active_alice, active_bob, follow, publish, synced, settings) -> None:
        follow(active_alice, active_bob)
        synced(active_alice)
        notes = [publish(active_bob, f"note {i}") for i in range(3)]
        settings.FEED_PAGE_SIZE = 1
        client = signed_in(active_alice)
        html = client.get("/home").content.decode()
        cursor = html.split('class="load-more" href="?cursor=')[1].split('"')[0]

        client.get(f"/home?cursor={cursor}")

        assert marker_position(user_id=active_alice.pk, timeline=HOME) == notes[-1].pk

    def test_the_notifications_page_moves_the_notifications_marker(self, active_alice, active_bob, follow) -> None:
        follow(active_bob, active_alice)
        newest = Notification.objects.filter(recipient=active_alice).latest("id")

        signed_in(active_alice).get("/notifications/")

        assert marker_position(user_id=active_alice.pk, timeline=NOTIFICATIONS) == newest.pk

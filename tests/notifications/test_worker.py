"""Notifications through real Celery workers (issue 17): a follow storm handled by 5 worker
processes at once makes one notification per follower, one line and the right count."""

from __future__ import annotations

import pytest

from core.models import OutboxEntry
from notifications import selectors
from notifications.models import Notification, NotificationGroup
from social import services as social_services
from tests.feed.helpers import make_user
from tests.feed.test_worker import DELIVERY_TIMEOUT, queue, worker  # noqa: F401 - fixtures
from tests.social.faults import wait_until

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


class TestFollowStorm:
    def test_five_worker_processes_make_one_notification_per_follower(self, worker, redis_client):  # noqa: F811
        star = make_user("star")
        fans = [make_user(f"fan{n:02d}") for n in range(40)]
        for _ in range(5):
            worker()

        for fan in fans:
            social_services.follow_create(actor=fan, followee_id=star.pk)
        # Five of them change their mind twice within the minute: still one notification each.
        for fan in fans[:5]:
            social_services.follow_delete(actor=fan, followee_id=star.pk)
            social_services.follow_create(actor=fan, followee_id=star.pk)
        wait_until(
            lambda: not OutboxEntry.objects.filter(applied_at__isnull=True).exists(),
            timeout=DELIVERY_TIMEOUT,
            what="every outbox entry applied by the workers",
        )

        group = NotificationGroup.objects.get(recipient=star)
        line = selectors.groups_page(user_id=star.pk, cursor=None, limit=5).lines
        assert Notification.objects.filter(recipient=star).count() == 40
        assert set(Notification.objects.values_list("actor_id", flat=True)) == {fan.pk for fan in fans}
        assert group.count == 40 and len(group.latest_actor_ids) == 3
        assert len(line) == 1 and line[0].text.endswith(" and 37 others followed you")
        assert selectors.unread_count(user_id=star.pk) == 40
        assert selectors.unread_database(user_id=star.pk) == 40

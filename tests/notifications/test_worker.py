"""Notifications through real Celery workers (issue 17): a follow storm from 5 processes, handled
by 5 worker processes at once, makes one notification per follower, one line and the right count."""

from __future__ import annotations

import multiprocessing

import pytest
from django.db import connections

from core.models import OutboxEntry
from core.sender import flush_sends
from notifications import redis_keys, selectors
from notifications.models import Notification, NotificationGroup
from social import services as social_services
from tests.support.accounts import make_user
from tests.support.faults import DELIVERY_TIMEOUT, wait_until
from users.models import User

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

WRITERS = 5


def storm(args: tuple[int, list[int], str]) -> int:
    """Child: each fan follows the star; the first of them unfollows and follows again twice
    within the minute. Returns the follows made."""
    star_id, fan_ids, queue_name = args
    from config.celery_app import app

    connections.close_all()
    app.conf.task_always_eager = False
    app.conf.task_default_queue = queue_name
    app._pool = None  # this process's own broker connections
    app.amqp._producer_pool = None
    made = 0
    for index, fan in enumerate(User.objects.filter(pk__in=fan_ids).order_by("pk")):
        made += social_services.follow_create(actor=fan, followee_id=star_id).changed
        if index == 0:
            for _ in range(2):
                social_services.follow_delete(actor=fan, followee_id=star_id)
                made += social_services.follow_create(actor=fan, followee_id=star_id).changed
    flush_sends()  # a pool process ends without running exit handlers
    connections.close_all()
    return made


class TestFollowStorm:
    def test_five_writers_and_five_workers_make_one_notification_per_follower(self, queue, worker, redis_client):
        star = make_user("star")
        fans = [make_user(f"fan{n:02d}") for n in range(40)]
        before = selectors.unread_count(user_id=star.pk)  # the counter exists before the storm
        for _ in range(5):
            worker()
        connections.close_all()

        with multiprocessing.get_context("fork").Pool(WRITERS) as pool:
            made = pool.map(storm, [(star.pk, [fan.pk for fan in fans[n::WRITERS]], queue) for n in range(WRITERS)])
        wait_until(
            lambda: not OutboxEntry.objects.filter(applied_at__isnull=True).exists(),
            timeout=DELIVERY_TIMEOUT,
            what="every outbox entry applied by the workers",
        )

        group = NotificationGroup.objects.get(recipient=star)
        line = selectors.groups_page(user_id=star.pk, cursor=None, limit=5).lines
        assert (before, sum(made)) == (0, 40 + 2 * WRITERS)
        assert Notification.objects.filter(recipient=star).count() == 40
        assert set(Notification.objects.values_list("actor_id", flat=True)) == {fan.pk for fan in fans}
        assert group.count == 40 and len(group.latest_actor_ids) == 3
        assert len(line) == 1 and line[0].text.endswith(" and 37 others followed you")
        # One version per notification: the repeats changed nothing, the workers' writes in any order left the newest.
        assert redis_client.get(redis_keys.unread_key(star.pk)) == b"40:40"
        assert selectors.unread_count(user_id=star.pk) == selectors.unread_database(user_id=star.pk) == 40

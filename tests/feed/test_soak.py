"""Soak: five writers for three minutes on a wiki-Vote slice while Redis, the broker and a worker fail.

Five processes follow, unfollow, publish, delete notes, block, unblock,
mute, unmute, turn approval of followers on and off, approve requests,
remove followers, deactivate, reactivate and delete accounts at random
through the services (follows notify); everything after
commit goes through the outbox to a real Celery worker on RabbitMQ. A chaos
thread meanwhile kills Redis and restarts it empty, kills it again and
restarts it from an older RDB snapshot, stops and starts the broker, and
SIGKILLs the worker. Beat is played by the test (a drain every two
seconds). Afterwards every reader comes back (a visit), the drain runs
until nothing is pending, and the follow mirror and every active reader's
first five feed pages on Redis must equal the database, and the reconcile of
every structure of the table of derived state (``core.derived``) must find
nothing in a dry run. The run prints the operations done, the faults
injected and the differences found.

Marker ``slow``: ``.ci/run`` runs it once, not in the cluster pass.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import subprocess
import threading
import time
import traceback
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connections
from django.utils import timezone

from core import derived
from core import redis_keys as core_keys
from core.models import OutboxEntry
from core.outbox import drain
from core.redis import forget_sentinel, get_redis, redis_reset_breaker
from core.sender import flush_sends
from tests.support.consistency import feed_differences
from tests.support.faults import CeleryWorker, RedisServer, point_at, purge_queue, wait_until
from tests.support.graph import assert_mirror_equals_database
from users.models import User

pytestmark = [pytest.mark.slow, pytest.mark.worker, pytest.mark.broker_outage, pytest.mark.django_db(transaction=True)]

WRITERS = 5
SECONDS = float(os.environ.get("FOLLOWFEED_SOAK_SECONDS", "180"))
SLICE_EDGES = 3000


def writer(args: tuple[list[int], int, float, str]) -> tuple[dict[str, int], list[str]]:
    """Child: random writes through the services until ``deadline``.

    :returns: counts per operation, and the unexpected errors (repr and where) met.
    """
    ids, seed, deadline, queue = args
    from config.celery_app import app
    from core.errors import DomainError
    from feed import services as feed_services
    from feed.models import Note
    from social import controls, services
    from social.models import Block, Follow, FollowRequest, Mute
    from users.services import user_set_active

    connections.close_all()
    app.conf.task_always_eager = False
    app.conf.task_default_queue = queue
    app._pool = None  # this process's own broker connections
    app.amqp._producer_pool = None
    rng = random.Random(seed)
    done = dict.fromkeys(
        ["follow", "unfollow", "publish", "delete", "block", "unblock", "mute", "unmute", "private", "public", "approve", "remove",
         "deactivate", "reactivate", "delete_account", "refused", "errors"],
        0,
    )  # fmt: skip
    failures: list[str] = []
    while time.time() < deadline:
        actor = User.objects.filter(pk=rng.choice(ids)).first()
        if actor is None:
            continue
        roll = rng.random()
        target = rng.choice(ids)
        try:
            if roll < 0.22:
                if target != actor.pk and actor.is_active and User.objects.filter(pk=target, is_active=True).exists():
                    services.follow_create(actor=actor, followee_id=target)
                    done["follow"] += 1
            elif roll < 0.40:
                if target != actor.pk:
                    services.follow_delete(actor=actor, followee_id=target)
                    done["unfollow"] += 1
            elif roll < 0.62:
                if actor.is_active:
                    feed_services.note_create(author=actor, body=f"soak {seed} {done['publish']}")
                    done["publish"] += 1
            elif roll < 0.69:
                note = Note.objects.filter(author=actor, deleted_at__isnull=True).order_by("?").first()
                if note is not None:
                    feed_services.note_delete(note=note, actor=actor)
                    done["delete"] += 1
            elif roll < 0.83 and target != actor.pk:
                # Controls: a block, its end, a mute (some for a minute), its end, a removal.
                name = rng.choice(["block", "unblock", "mute", "unmute", "remove"])
                # Undo what stands: an unblock, unmute or removal of a random account is mostly a 404.
                if name == "unblock":
                    target = Block.objects.filter(blocker_id=actor.pk).values_list("blocked_id", flat=True).first() or target
                elif name == "unmute":
                    target = Mute.objects.filter(muter_id=actor.pk).values_list("muted_id", flat=True).first() or target
                elif name == "remove":
                    target = Follow.objects.filter(followee_id=actor.pk).values_list("follower_id", flat=True).first() or target
                if name == "block":
                    controls.block_create(actor=actor, target_id=target)
                elif name == "unblock":
                    controls.block_delete(actor=actor, target_id=target)
                elif name == "mute":
                    controls.mute_create(actor=actor, target_id=target, duration=rng.choice([None, timedelta(minutes=1)]))
                elif name == "unmute":
                    controls.mute_delete(actor=actor, target_id=target)
                else:
                    controls.follower_remove(actor=actor, follower_id=target)
                done[name] += 1
            elif roll < 0.90:
                private = rng.random() < 0.5
                controls.account_privacy_set(actor=actor, private=private)
                done["private" if private else "public"] += 1
            elif roll < 0.95:
                requester = FollowRequest.objects.filter(target_id=actor.pk).values_list("requester_id", flat=True).first()
                if requester is not None:
                    controls.follow_request_approve(actor=actor, requester_id=requester)
                    done["approve"] += 1
            elif roll < 0.995:
                user_set_active(user=actor, is_active=not actor.is_active)
                done["reactivate" if not actor.is_active else "deactivate"] += 1
            elif done["delete_account"] < 2:
                actor.delete()
                done["delete_account"] += 1
        except DomainError:
            # A rule's answer (403/404/409/422): another writer deactivated, deleted or blocked
            # the actor or the target between this writer's check and the service's locked read,
            # or the pair is not in the state the action needs; nothing was written.
            done["refused"] += 1
        except Exception:  # noqa: BLE001 - counted, reported and asserted zero
            failures.append(traceback.format_exc(limit=6)[-1500:])
            done["errors"] += 1
        time.sleep(rng.uniform(0.02, 0.1))
    flush_sends()  # a pool process ends without running exit handlers
    connections.close_all()
    return done, failures


def notification_differences() -> list[str]:
    """What the notifications reconcile finds (``notifications_found``), item by item: stale rows
    (recipient, actor), groups (stored figures beside derived), counters and Redis mirrors (the
    row beside the visible unread rows and the stored value); empty when nothing differs."""
    from notifications import redis_keys as notification_keys
    from notifications.models import Notification, NotificationGroup, UnreadCounter
    from notifications.selectors import derive_group, visible
    from notifications.services import notifications_found

    client = get_redis()
    found = notifications_found(client, 0, 2**62)
    lines = [f"stale row {pair}" for pair in found.stale]
    for group in NotificationGroup.objects.filter(pk__in=[pk for ids in found.groups.values() for pk in ids]).order_by("pk"):
        stored = (group.count, group.latest_actor_ids, group.unread, group.updated_at)
        lines.append(f"group {group.pk} of {group.recipient_id}: stored {stored}, derived {derive_group(group.pk)}")
    for recipient_id, version, unread in (
        UnreadCounter.objects.filter(pk__in=[*found.counters, *found.mirrors])
        .order_by("pk")
        .values_list("pk", "version", "unread")
    ):
        truth = visible(Notification.objects.filter(recipient_id=recipient_id, read_at__isnull=True)).count()
        mirror = client.get(notification_keys.unread_key(recipient_id))
        lines.append(f"counter of {recipient_id}: row {version}:{unread}, visible unread rows {truth}, Redis {mirror!r}")
    return lines


class Chaos:
    """The faults, on a schedule over the run; ``injected`` names each one when it happened."""

    def __init__(self, redis_server: RedisServer, worker_box: dict[str, CeleryWorker], make_worker: Any) -> None:
        self.redis = redis_server
        self.worker_box = worker_box
        self.make_worker = make_worker
        self.injected: list[str] = []
        self.stop = threading.Event()

    def run(self, seconds: float) -> None:
        plan = [
            (0.10, self.redis_restarted_empty),
            (0.30, self.snapshot),
            (0.45, self.redis_restarted_from_the_snapshot),
            (0.60, self.broker_stopped),
            (0.80, self.worker_killed),
        ]
        started = time.monotonic()
        for at, fault in plan:
            while time.monotonic() - started < at * seconds:
                if self.stop.wait(0.2):
                    return
            fault()

    def redis_restarted_empty(self) -> None:
        self.redis.kill()
        time.sleep(3)
        assert self.redis.data_dir is not None
        (self.redis.data_dir / "dump.rdb").unlink(missing_ok=True)  # nothing to load: empty
        self.redis.start()
        self.injected.append("redis killed, restarted empty")

    def snapshot(self) -> None:
        # Of a mirror the drain has rebuilt since the restart (a snapshot
        # without the sentinel would be plain data loss again).
        wait_until(lambda: self.redis.client().exists(core_keys.sentinel_key()), timeout=120, interval=0.2, what="the rebuild")
        self.redis.snapshot()
        self.injected.append("redis snapshot")

    def redis_restarted_from_the_snapshot(self) -> None:
        self.redis.kill()
        time.sleep(2)
        self.redis.start()
        self.injected.append("redis killed, restarted from the older snapshot")

    def broker_stopped(self) -> None:
        subprocess.run(["rabbitmqctl", "stop_app"], check=True, capture_output=True, timeout=120)
        time.sleep(8)
        subprocess.run(["rabbitmqctl", "start_app"], check=True, capture_output=True, timeout=120)
        self.injected.append("broker stopped for 8 s")

    def worker_killed(self) -> None:
        self.worker_box["worker"].kill()
        self.worker_box["worker"] = self.make_worker()
        self.worker_box["worker"].start()
        self.injected.append("worker SIGKILLed and replaced")


def test_five_writers_through_redis_broker_and_worker_faults_end_with_feeds_equal_to_the_database(
    settings: Any, tmp_path: Path, request: Any, capsys: Any
) -> None:
    from config.celery_app import app
    from datatools.datasets import dataset_path
    from datatools.importer import graph_import
    from feed import services as feed_services
    from feed.rebuild import inbox_rebuild
    from social.rebuild import rebuild_all

    server = RedisServer(data_dir=tmp_path)
    server.start()
    request.addfinalizer(server.stop)
    point_at(settings, server)
    settings.REDIS_CIRCUIT_OPEN_SECONDS = 0.5
    graph_import(dataset_path("wiki-Vote.txt.gz"), limit=SLICE_EDGES)
    User.objects.update(last_seen_at=timezone.now())
    rebuild_all()
    ids = list(User.objects.order_by("pk").values_list("pk", flat=True))
    for user_id in ids:
        inbox_rebuild(user_id=user_id)
    queue = f"ff_soak_{uuid.uuid4().hex[:8]}"
    redis_url = server.url

    def make_worker() -> CeleryWorker:
        return CeleryWorker(queue=queue, redis_url=redis_url, extra_env={"OUTBOX_TASK_GRACE_SECONDS": "5"})

    box = {"worker": make_worker()}
    chaos = Chaos(server, box, make_worker)
    drains = {"sent": 0, "refused": 0}
    stop_beat = threading.Event()

    def beat() -> None:
        while not stop_beat.wait(2.0):
            try:
                app.send_task("core.tasks.outbox_drain", queue=queue)
                drains["sent"] += 1
            except Exception:  # noqa: BLE001 - the broker is down: beat tries again
                drains["refused"] += 1

    settings.OUTBOX_TASK_GRACE_SECONDS = 5
    try:
        box["worker"].start()
        connections.close_all()
        beat_thread = threading.Thread(target=beat, daemon=True)
        chaos_thread = threading.Thread(target=chaos.run, args=(SECONDS,), daemon=True)
        beat_thread.start()
        chaos_thread.start()
        deadline = time.time() + SECONDS
        context = multiprocessing.get_context("fork")
        with context.Pool(WRITERS) as pool:
            results = pool.map(writer, [(ids, seed, deadline, queue) for seed in range(WRITERS)])
        chaos.stop.set()
        chaos_thread.join(timeout=180)
        # Every service is back; every reader visits (a catch-up where its inbox was lost).
        subprocess.run(["rabbitmqctl", "start_app"], capture_output=True, timeout=120, check=False)
        redis_reset_breaker()
        forget_sentinel()
        wait_until(lambda: server.client().exists(core_keys.sentinel_key()), timeout=180, interval=0.5, what="the mirror rebuilt")
        readers = list(User.objects.filter(is_active=True).values_list("pk", flat=True))
        for user_id in readers:
            feed_services.inbox_sign_in(user_id=user_id)
        wait_until(
            lambda: not OutboxEntry.objects.filter(applied_at__isnull=True).exists(),
            timeout=300,
            interval=0.5,
            what="the outbox drained",
        )
        stop_beat.set()
        beat_thread.join(timeout=10)
        time.sleep(1)
    finally:
        stop_beat.set()
        chaos.stop.set()
        subprocess.run(["rabbitmqctl", "start_app"], capture_output=True, timeout=120, check=False)
        box["worker"].stop()
        purge_queue(queue)

    redis_reset_breaker()
    forget_sentinel()
    drain()  # one more beat after everything settled
    client = get_redis()
    operations = {name: sum(counts[name] for counts, _ in results) for name in results[0][0]}
    failures = [failure for _, writer_failures in results for failure in writer_failures]
    graph_differences = []
    try:
        assert_mirror_equals_database(client, ids)
    except AssertionError as exc:
        graph_differences.append(str(exc)[:500])
    readers = list(User.objects.filter(is_active=True).values_list("pk", flat=True))
    feeds = feed_differences(readers)
    derived_drift = derived.drift(repair=False)
    notifications_found = notification_differences() if any(derived_drift.values()) else []
    with capsys.disabled():
        print(
            f"\nsoak: {sum(v for k, v in operations.items() if k not in ('errors', 'refused'))} operations in {SECONDS:.0f} s {operations}; "
            f"faults injected: {chaos.injected}; drains sent {drains['sent']}, refused {drains['refused']}; "
            f"differences found: graph {len(graph_differences)}, feeds {len(feeds)} of {len(readers)} readers; "
            f"derived structures {derived_drift}; notifications: {notifications_found}"
        )

    assert failures == []
    assert operations["errors"] == 0
    assert len(chaos.injected) == 5
    assert sum(operations.values()) > 1000
    assert graph_differences == []
    assert feeds == {}
    assert derived_drift == dict.fromkeys(derived_drift, 0), notifications_found

"""The demo's warm-up: when a restart needs one (sentinel, watermark, pending outbox entries),
what it builds, and what it leaves when it fails or is interrupted."""

from __future__ import annotations

import pytest

from core import redis_keys as core_keys
from core.models import OutboxEntry
from core.redis import RedisLock
from datatools import redis_keys, services
from datatools.datasets import dataset_path
from datatools.importer import graph_import
from datatools.selectors import WarmupProgress, database_fingerprint, mirror_state, warmup_progress, warmup_reason
from datatools.services import (
    STAGE_FAILED,
    STAGE_GRAPH,
    STAGE_NOTES,
    STAGE_OUTBOX_ENTRIES,
    STAGE_OUTBOXES,
    STAGE_WAITING,
    mirror_forget,
    mirror_warm_up,
)
from feed.models import Note
from social import redis_keys as social_keys
from social.reconcile import reconcile_all
from social.services import follow_create
from users.models import User

pytestmark = pytest.mark.django_db


@pytest.fixture
def imported(db):
    """A real slice, the first 2,000 follows of wiki-Vote, imported without a mirror."""
    graph_import(dataset_path("wiki-Vote.txt.gz"), limit=2000)
    mirror_forget()
    return User.objects.count()


class TestMirrorState:
    def test_a_forgotten_mirror_needs_a_rebuild(self, imported, redis_client):
        state = mirror_state(redis_client)

        assert (state.sentinel, state.needs_rebuild, state.current) == (False, True, False)
        assert state.reason() == "the Redis mirror is not built"

    def test_a_mirror_built_from_other_data_needs_a_rebuild(self, imported, redis_client):
        mirror_warm_up()
        redis_client.set(redis_keys.watermark_key(), "1:2009-02-01T00:00:00+00:00")

        state = mirror_state(redis_client)

        assert (state.sentinel, state.watermark_matches, state.needs_rebuild) == (True, False, True)
        assert state.reason() == "the Redis mirror was built from other data"

    def test_the_fingerprint_is_the_first_account_and_its_creation(self, imported):
        first = User.objects.order_by("pk").first()
        assert first is not None

        assert database_fingerprint() == f"{first.pk}:{first.date_joined.isoformat()}"

        first.delete()

        assert database_fingerprint() != f"{first.pk}:{first.date_joined.isoformat()}"


class TestWarmUp:
    def test_builds_the_whole_mirror_then_the_state_is_current(self, imported, redis_client):
        seen: list[WarmupProgress] = []

        result = mirror_warm_up(on_progress=seen.append)

        assert result.rebuilt and result.applied == 0
        assert mirror_state(redis_client).current
        assert redis_client.get(redis_keys.watermark_key()).decode() == database_fingerprint()
        report = reconcile_all(repair=False)
        assert (report.edges_missing, report.edges_extra, report.scores_wrong) == (0, 0, 0)
        stages = [p.stage for p in seen]
        assert stages.index(STAGE_OUTBOXES) < stages.index(STAGE_GRAPH)  # the graph, which sets the sentinel, last
        last = seen[-1]
        assert (last.stage, last.done, last.total) == (STAGE_GRAPH, User.objects.count(), User.objects.count())
        assert warmup_progress(redis_client) is None  # no banner once done

    def test_replays_the_notes_first_when_there_are_none(self, imported, redis_client):
        assert warmup_reason(mirror_state(redis_client), replay_notes=True) == "the notes are not replayed yet"
        seen: list[WarmupProgress] = []

        result = mirror_warm_up(replay_notes=True, on_progress=seen.append)

        assert result.notes == Note.objects.count() > 0 and result.rebuilt
        stages = [p.stage for p in seen]
        assert stages.index(STAGE_NOTES) < stages.index(STAGE_OUTBOXES)  # the outboxes then hold the notes
        assert warmup_reason(mirror_state(redis_client), replay_notes=True) == ""
        again = mirror_warm_up(replay_notes=True)
        assert again.notes == 0 and not again.rebuilt  # nothing replayed twice

    def test_pending_outbox_entries_are_applied_without_a_rebuild(self, imported, redis_client):
        mirror_warm_up()
        alice = User.objects.order_by("pk").first()
        assert alice is not None
        bob = User.objects.exclude(pk=alice.pk).exclude(follower_edges__follower=alice).order_by("pk").first()
        assert bob is not None
        # Not run: on_commit callbacks do not run in a test transaction, so the entry stays pending.
        follow_create(actor=alice, followee_id=bob.pk)
        state = mirror_state(redis_client)
        assert (state.needs_rebuild, state.current, state.pending_entries) == (
            False,
            False,
            OutboxEntry.objects.filter(applied_at__isnull=True).count(),
        )
        assert state.pending_entries >= 1

        seen: list[WarmupProgress] = []
        result = mirror_warm_up(on_progress=seen.append)

        assert not result.rebuilt and result.applied >= 1
        assert STAGE_OUTBOX_ENTRIES in [p.stage for p in seen]
        assert redis_client.sismember(social_keys.followers_set_key(bob.pk), alice.pk)
        assert mirror_state(redis_client).current

    def test_waits_for_another_rebuild_holding_the_lock(self, imported, redis_client, monkeypatch):
        monkeypatch.setattr(services, "LOCK_POLL_SECONDS", 0.05)
        other = RedisLock(client=redis_client, key=core_keys.rebuild_lock_key(), milliseconds=300)
        assert other.acquire()
        seen: list[WarmupProgress] = []

        result = mirror_warm_up(on_progress=seen.append)

        assert result.rebuilt
        assert seen[0].stage == STAGE_WAITING
        assert not redis_client.exists(core_keys.rebuild_lock_key())  # released after use

    def test_a_failure_is_left_for_the_banner_and_releases_the_lock(self, imported, redis_client, monkeypatch):
        def broken(**kwargs):
            raise RuntimeError("the disk is on fire")

        monkeypatch.setattr(services, "rebuild_all", broken)

        with pytest.raises(RuntimeError, match="on fire"):
            mirror_warm_up()

        progress = warmup_progress(redis_client)
        assert progress is not None
        assert (progress.stage, progress.error) == (STAGE_FAILED, "RuntimeError: the disk is on fire")
        assert redis_client.ttl(redis_keys.warmup_key()) == -1  # kept until the next warm-up
        assert not redis_client.exists(core_keys.rebuild_lock_key())
        assert mirror_state(redis_client).needs_rebuild  # no watermark: the next run warms up again

    def test_an_interrupted_warm_up_leaves_no_banner_and_no_watermark(self, imported, redis_client, monkeypatch):
        def interrupted(**kwargs):
            raise KeyboardInterrupt

        monkeypatch.setattr(services, "rebuild_all", interrupted)

        with pytest.raises(KeyboardInterrupt):
            mirror_warm_up()

        assert warmup_progress(redis_client) is None
        assert not redis_client.exists(redis_keys.watermark_key())
        assert not redis_client.exists(core_keys.rebuild_lock_key())

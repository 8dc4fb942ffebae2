"""The read replica: which reads go where (``core.routers``), and the invariants under replica lag.

Runs only against the private primary and replica of ``tests.replica``, in
its own pytest run (pytest-django reads DATABASES at start-up)::

    bash scripts/with_replica.sh .venv/bin/python -m pytest -m replica tests/core/test_replica.py

Every test commits (``transaction=True``): rows in an uncommitted test
transaction would never reach the replica. Lag is injected by stopping the
replica's SQL thread (``ReplicaPair.lag``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.conf import settings
from django.db import connections, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext

from core import outbox
from core.redis import get_redis, redis_reset_breaker
from core.replica import WROTE_AT_COOKIE, page_reads, primary_reads
from feed import redis_keys as feed_keys
from feed import services as feed_services
from feed.models import Note
from feed.rebuild import inbox_rebuild
from feed.reconcile import reconcile_inboxes_run
from social import services as social_services
from social.mirror import mirror_apply_pairs
from social.models import Follow
from social.rebuild import rebuild_user
from social.reconcile import reconcile_run
from tests.replica import ReplicaPair
from tests.support.accounts import UserFactory, make_user, signed_in
from tests.support.consistency import feed_differences
from tests.support.faults import RedisServer, point_at
from tests.support.feed import inbox_ids
from tests.support.graph import assert_mirror_equals_database
from users.redis_keys import ACCOUNT_REPLICA_FILL_SECONDS, account_key

pytestmark = [
    pytest.mark.replica,
    pytest.mark.skipif("replica" not in settings.DATABASES, reason="needs the pair of scripts/with_replica.sh"),
    pytest.mark.django_db(transaction=True, databases=["default", "replica"]),
]

LAG_SECONDS = 2.0


@dataclass
class Reads:
    """The SQL each connection ran inside ``by_alias()``: ``primary`` and ``replica``."""

    primary: list[str] = field(default_factory=list)
    replica: list[str] = field(default_factory=list)

    def primary_beyond_sessions(self) -> list[str]:
        """Primary queries other than the session's and the signed-in account's row (both stay on
        the primary by design: a kept account row is read there, users.account_rows)."""
        return [sql for sql in self.primary if "django_session" not in sql and not SIGNED_IN_ACCOUNT.fullmatch(sql)]


# The signed-in account's read (users.selectors.account_by_id): every column, by id alone.
SIGNED_IN_ACCOUNT = re.compile(r"SELECT `id`, `password`, .* FROM `users_user` WHERE id = \d+")


@contextmanager
def by_alias() -> Iterator[Reads]:
    """Capture the queries of both connections; the ``Reads`` is filled when the block ends."""
    reads = Reads()
    with CaptureQueriesContext(connections["default"]) as primary, CaptureQueriesContext(connections["replica"]) as replica:
        yield reads
    reads.primary = [query["sql"] for query in primary.captured_queries]
    reads.replica = [query["sql"] for query in replica.captured_queries]


@contextmanager
def redis_down(settings_fixture: Any) -> Iterator[None]:
    """Point the application at a port nobody listens on (every Redis call fails), then back."""
    saved = settings_fixture.CACHES, settings_fixture.REDIS_CLUSTER
    point_at(settings_fixture, RedisServer())  # never started
    redis_reset_breaker()
    try:
        yield
    finally:
        settings_fixture.CACHES, settings_fixture.REDIS_CLUSTER = saved
        redis_reset_breaker()


@pytest.fixture(scope="session")
def pair() -> ReplicaPair:
    found = ReplicaPair.attached()
    assert found is not None, "run through scripts/with_replica.sh"
    return found


def followee_ids(response: Any) -> list[int]:
    assert response.status_code == 200, response.content[:500]
    return [entry["id"] for entry in response.json()["data"]["list"]]


class TestTheRouterSendsPageReadsToTheReplica:
    def test_a_followers_page_reads_the_replica(self, pair, settings):
        alice, bob = UserFactory.create(username="alice"), UserFactory.create(username="bob")
        social_services.follow_create(actor=alice, followee_id=bob.pk)
        pair.wait_caught_up()

        with by_alias() as from_redis:
            page = Client().get("/u/bob/followers/")
        with redis_down(settings), by_alias() as from_database:
            page_without_redis = Client().get("/u/bob/followers/")

        assert page.status_code == page_without_redis.status_code == 200
        assert b"alice" in page.content and b"alice" in page_without_redis.content
        assert from_redis.primary == [] and from_database.primary == []
        assert any("users_user" in sql for sql in from_redis.replica)
        assert any("social_follow" in sql for sql in from_database.replica)
        # The replica's answer fills the account cache for as long as a tombstone lives, not a day.
        assert 0 < get_redis().ttl(account_key(alice.pk)) <= ACCOUNT_REPLICA_FILL_SECONDS

    def test_the_feed_database_path_reads_the_replica(self, pair, settings):
        alice, bob = make_user("alice"), make_user("bob")
        social_services.follow_create(actor=alice, followee_id=bob.pk)
        note = feed_services.note_create(author=bob, body="from the replica")
        pair.wait_caught_up()
        client = signed_in(alice)

        with redis_down(settings), by_alias() as reads:
            response = client.get("/api/feed")

        assert [item["id"] for item in response.json()["data"]["list"]] == [note.pk]
        # The one primary read is the page's visibility check (social.visibility.hidden_authors): whom
        # the reader follows now, which a lagging replica could still answer with a removed follow.
        assert reads.primary_beyond_sessions() == [
            f"SELECT followee_id FROM social_follow WHERE follower_id = {alice.pk} AND followee_id IN ({bob.pk})"
        ]
        assert any("feed_note" in sql for sql in reads.replica)

    def test_an_admin_list_reads_the_replica(self, pair):
        moderator = UserFactory.create(username="moderator", is_staff=True, is_superuser=True)
        alice, bob = UserFactory.create(username="alice"), UserFactory.create(username="bob")
        social_services.follow_create(actor=alice, followee_id=bob.pk)
        pair.wait_caught_up()
        client = signed_in(moderator)

        with by_alias() as reads:
            response = client.get("/admin/social/follow/")

        assert response.status_code == 200
        assert b"alice" in response.content
        assert reads.primary_beyond_sessions() == []
        assert any("social_follow" in sql for sql in reads.replica)

    def test_a_follow_and_the_reads_of_its_service_use_the_primary(self, pair):
        alice, bob = UserFactory.create(username="alice"), UserFactory.create(username="bob")
        pair.wait_caught_up()
        client = signed_in(alice)

        with by_alias() as reads:
            response = client.put(f"/api/follow/{bob.pk}/true")

        assert response.status_code == 200
        assert response.json()["data"]["changed"] is True
        assert reads.replica == []
        assert any(sql.startswith("INSERT") and "social_follow" in sql for sql in reads.primary)
        assert any(sql.startswith("SELECT") and "social_follow" in sql for sql in reads.primary)
        assert WROTE_AT_COOKIE in response.cookies

    @pytest.mark.parametrize(
        "mechanism",
        ["outbox drain", "mirror apply", "follow reconcile", "follow rebuild", "inbox rebuild", "inbox reconcile"],
    )
    def test_mechanisms_read_the_primary_even_inside_page_reads(self, pair, mechanism):
        alice, bob = make_user("alice"), make_user("bob")
        social_services.follow_create(actor=alice, followee_id=bob.pk)
        pair.wait_caught_up()
        run = {
            "outbox drain": lambda: outbox.drain(task_grace_seconds=0),
            "mirror apply": lambda: mirror_apply_pairs([(alice.pk, bob.pk)]),
            "follow reconcile": reconcile_run,
            "follow rebuild": lambda: rebuild_user(alice.pk),
            "inbox rebuild": lambda: inbox_rebuild(user_id=alice.pk),
            "inbox reconcile": reconcile_inboxes_run,
        }[mechanism]

        # As a GET would run it (an eager task, a catch-up): inside page reads.
        with page_reads(), by_alias() as reads:
            run()
            # The control: the same context does send a plain read to the replica.
            assert Follow.objects.filter(follower=alice).count() == 1

        assert len(reads.replica) == 1
        assert "social_follow" in reads.replica[0]
        assert any(sql.startswith("SELECT") for sql in reads.primary)

    def test_primary_reads_and_transactions_win_over_page_reads(self, pair):
        alice = UserFactory.create(username="alice")
        pair.wait_caught_up()

        with page_reads(), by_alias() as reads:
            with primary_reads(), page_reads():  # nested inside primary_reads: no effect
                Follow.objects.filter(follower=alice).exists()
            with transaction.atomic():
                Follow.objects.filter(follower=alice).exists()
            Follow.objects.filter(follower=alice).exists()

        assert [sql.split()[0] for sql in reads.primary] == ["SELECT", "BEGIN", "SELECT", "COMMIT"]
        assert [sql.split()[0] for sql in reads.replica] == ["SELECT"]

    def test_the_actor_reads_the_primary_right_after_a_write_then_the_replica(self, pair, settings):
        settings.REPLICA_READ_YOUR_WRITES_SECONDS = 1.0
        alice, bob = UserFactory.create(username="alice"), UserFactory.create(username="bob")
        pair.wait_caught_up()
        client = signed_in(alice)
        client.put(f"/api/follow/{bob.pk}/true")

        with by_alias() as right_after:
            mine = client.get(f"/api/users/{alice.pk}/following")
        with by_alias() as someone_else:
            theirs = Client().get(f"/api/users/{alice.pk}/following")
        time.sleep(1.1)
        pair.wait_caught_up()
        with by_alias() as later:
            mine_later = client.get(f"/api/users/{alice.pk}/following")

        assert followee_ids(mine) == followee_ids(theirs) == followee_ids(mine_later) == [bob.pk]
        assert right_after.replica == [] and right_after.primary_beyond_sessions() != []
        assert someone_else.primary == [] and someone_else.replica != []
        assert later.primary_beyond_sessions() == [] and later.replica != []


class TestUnderReplicaLag:
    def test_the_invariants_hold_with_two_seconds_of_lag(self, pair, settings, redis_client, capsys):
        alice, bob, charlie = make_user("alice"), make_user("bob"), make_user("charlie")
        social_services.follow_create(actor=charlie, followee_id=bob.pk)
        # Two older notes: an inbox's oldest note is its horizon, so the newer
        # ones are read through Redis (the path that removes stale ids).
        older = [feed_services.note_create(author=bob, body=f"older note {n}").pk for n in (1, 2)]
        pair.wait_caught_up()
        alice_client, bob_client, charlie_client = signed_in(alice), signed_in(bob), signed_in(charlie)

        with pair.lag():
            lag_started = time.monotonic()
            followed = alice_client.put(f"/api/follow/{bob.pk}/true")
            published = bob_client.post("/api/notes", {"body": "published while the replica lags"})
            note_id = published.json()["data"]["id"]
            # The lag is real: the replica has neither the follow nor the note.
            on_replica = Follow.objects.using("replica").filter(follower=alice, followee=bob).exists()
            note_on_replica = Note.objects.using("replica").filter(pk=note_id).exists()
            # Read-your-writes: alice's next pages, from Redis and from the database.
            own_page = alice_client.get(f"/api/users/{alice.pk}/following")
            with redis_down(settings):
                own_page_from_database = alice_client.get(f"/api/users/{alice.pk}/following")
                strangers_page_from_database = Client().get(f"/api/users/{alice.pk}/following")
            # Charlie did not write: his feed page reads the lagging replica,
            # which lacks the note fan-out already put in his inbox.
            charlie_inbox_before_page = inbox_ids(redis_client, charlie)
            with by_alias() as charlie_reads:
                charlie_feed = charlie_client.get("/api/feed")
            charlie_inbox_after_page = inbox_ids(redis_client, charlie)
            # The mirror built after commit is the primary's, and reconcile
            # (also as a page would run it) finds nothing to repair.
            assert_mirror_equals_database(redis_client, [alice.pk, bob.pk, charlie.pk])
            _, follow_report = reconcile_run(dry_run=True)
            with page_reads():
                _, follow_report_in_page = reconcile_run(dry_run=True)
                _, inbox_report_in_page = reconcile_inboxes_run(dry_run=True)
            time.sleep(max(0.0, LAG_SECONDS - (time.monotonic() - lag_started)))
            still_lagging = not Follow.objects.using("replica").filter(follower=alice, followee=bob).exists()
            lag_seconds = time.monotonic() - lag_started
        catch_up_seconds = pair.wait_caught_up()

        assert followed.status_code == 200 and published.status_code == 201
        assert on_replica is False and note_on_replica is False and still_lagging is True
        assert lag_seconds >= LAG_SECONDS
        assert followee_ids(own_page) == [bob.pk]
        assert followee_ids(own_page_from_database) == [bob.pk]
        assert followee_ids(strangers_page_from_database) == []  # the replica's stale answer, shown and forgotten
        newest_first = [note_id, *reversed(older)]
        assert charlie_inbox_before_page == newest_first
        assert [item["id"] for item in charlie_feed.json()["data"]["list"]] == newest_first
        assert any("feed_note" in sql for sql in charlie_reads.replica)
        # The replica did not know the new note; the note cache or the primary vouched for it, so it stayed.
        assert sum("feed_note" in sql for sql in charlie_reads.primary) <= 1
        assert charlie_inbox_after_page == newest_first
        assert follow_report.drift == follow_report_in_page.drift == inbox_report_in_page.drift == 0
        assert follow_report.users_checked == 3
        # Caught up: the replica holds exactly the primary's rows.
        for model in (Follow, Note):
            primary_rows = sorted(model.objects.using("default").values_list("pk", flat=True))
            replica_rows = sorted(model.objects.using("replica").values_list("pk", flat=True))
            assert replica_rows == primary_rows != []
        assert sorted(Follow.objects.using("replica").values_list("follower_id", "followee_id")) == [
            (alice.pk, bob.pk),
            (charlie.pk, bob.pk),
        ]
        assert_mirror_equals_database(redis_client, [alice.pk, bob.pk, charlie.pk])
        assert feed_differences([alice.pk, bob.pk, charlie.pk]) == {}
        assert inbox_ids(redis_client, alice) == newest_first
        assert redis_client.exists(feed_keys.inbox_key(charlie.pk))
        with capsys.disabled():
            print(
                f"\nreplica lag injected {lag_seconds:.2f}s; caught up {catch_up_seconds * 1000:.1f} ms after START SLAVE SQL_THREAD"
            )

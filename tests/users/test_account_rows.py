"""The signed-in account's row kept per process under its version token (``users.account_rows``):
read once, never served after a write of the row has committed, and read every time while Redis
cannot vouch for it."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core import serializers
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core import outbox
from core.models import OutboxEntry
from core.redis import redis_failed, redis_reset_breaker
from social import controls
from tests.support.accounts import UserFactory, signed_in
from users import account_rows, redis_keys
from users.backends import AccountBackend
from users.models import User
from users.outbox import ACCOUNT_VERSION_KIND
from users.selectors import account_by_id
from users.services import user_set_active, user_touch_seen

pytestmark = pytest.mark.django_db

TABLE = User._meta.db_table


def account_reads(queries: CaptureQueriesContext) -> int:
    """How many of ``queries`` read the accounts' table."""
    return sum(1 for query in queries.captured_queries if f"FROM `{TABLE}`" in query["sql"] or f'FROM "{TABLE}"' in query["sql"])


def read(user_id: int) -> tuple[User | None, int]:
    """The backend's account ``user_id`` and how many account reads it made."""
    with CaptureQueriesContext(connection) as queries:
        found = AccountBackend().get_user(str(user_id))
    return found, account_reads(queries)


class TestKept:
    def test_a_signed_in_page_reads_the_account_row_once_then_only_its_token_with_the_session(
        self, alice, monkeypatch, redis_backend
    ):
        client = signed_in(alice)
        with CaptureQueriesContext(connection) as first:
            assert client.get("/api/feed").status_code == 200
        own_reads: list[int] = []
        real = account_rows._read_token

        def read_token(user_id: int) -> bytes | None:
            own_reads.append(user_id)
            return real(user_id)

        monkeypatch.setattr(account_rows, "_read_token", read_token)
        with CaptureQueriesContext(connection) as second:
            assert client.get("/api/feed").status_code == 200

        assert (account_reads(first), account_reads(second)) == (1, 0)
        # The token came with the session's read; on a cluster (another slot) by a read of its own.
        assert own_reads == ([] if redis_backend is None else [alice.pk])
        assert account_rows._kept[alice.pk].token == bytes(_token(alice.pk))

    def test_each_request_gets_an_account_of_its_own(self, alice):
        first, _ = read(alice.pk)
        assert first is not None
        first.display_name = "changed by one request, never saved"

        second, reads = read(alice.pk)

        assert reads == 0
        assert second is not first
        assert second is not None and second.display_name == alice.display_name
        assert second.get_deferred_fields() == set()
        assert second.password == alice.password and second.date_joined == User.objects.get(pk=alice.pk).date_joined

    def test_a_missing_token_is_made_anew_and_the_row_read_again(self, alice, redis_client):
        read(alice.pk)
        redis_client.delete(redis_keys.account_version_key(alice.pk))  # flushed, expired or lost

        found, reads = read(alice.pk)

        assert reads == 1
        assert found is not None and found.pk == alice.pk
        assert redis_client.get(redis_keys.account_version_key(alice.pk)) == account_rows._kept[alice.pk].token

    def test_a_kept_row_serves_keep_seconds_at_most(self, alice, monkeypatch):
        monkeypatch.setattr(account_rows, "KEEP_SECONDS", 0.0)
        read(alice.pk)

        assert read(alice.pk)[1] == 1
        monkeypatch.setattr(account_rows, "KEEP_SECONDS", 60.0)
        read(alice.pk)
        assert read(alice.pk)[1] == 0


def rename(user: User) -> None:
    user.display_name = "A New Name"
    user.save()


def rename_by_update(user: User) -> None:
    User.objects.filter(pk=user.pk).update(username="renamed")


def make_private(user: User) -> None:
    controls.account_privacy_set(actor=user, private=True)


def make_staff(user: User) -> None:
    user.is_staff = True
    user.save(update_fields=["is_staff"])


def new_password(user: User) -> None:
    user.set_password("another-long-passphrase")
    user.save()


CHANGES = {
    "display name saved": (rename, lambda user: user.display_name == "A New Name"),
    "username by update": (rename_by_update, lambda user: user.username == "renamed"),
    "privacy": (make_private, lambda user: user.approve_followers is True),
    "staff flag": (make_staff, lambda user: user.is_staff is True),
    "password": (new_password, lambda user: user.check_password("another-long-passphrase")),
}


class TestAChangeShowsOnTheNextRead:
    @pytest.mark.parametrize("name", sorted(CHANGES))
    def test_the_kept_row_is_not_served_after_the_change_commits(self, name, alice, run_commits):
        change, shows = CHANGES[name]
        read(alice.pk)
        kept, reads = read(alice.pk)
        assert reads == 0 and kept is not None and not shows(kept)

        run_commits(lambda: change(User.objects.get(pk=alice.pk)))
        found, reads = read(alice.pk)

        assert reads == 1
        assert found is not None and shows(found)

    def test_deactivation_and_deletion_sign_the_account_out(self, alice, bob, run_commits, redis_client):
        for user in (alice, bob):
            read(user.pk)
            assert read(user.pk) == (user, 0)

        run_commits(lambda: user_set_active(user=alice, is_active=False))
        run_commits(lambda: User.objects.get(pk=bob.pk).delete())

        assert read(alice.pk) == (None, 1)
        assert read(bob.pk) == (None, 1)
        # The deletion's entry took the token away, and the read after it left none behind.
        assert redis_client.exists(redis_keys.account_version_key(bob.pk)) == 0

    def test_a_page_after_a_rename_prints_the_new_name(self, alice, run_commits):
        client = signed_in(alice)
        assert client.get("/home").status_code == 200
        assert "@alice<" in client.get("/home").content.decode()  # the header, from the kept row

        run_commits(lambda: rename_by_update(alice))

        page = client.get("/home").content.decode()
        assert "@renamed<" in page and "@alice<" not in page

    def test_a_token_change_that_failed_stays_pending_and_the_drain_applies_it(self, alice, run_commits, monkeypatch):
        read(alice.pk)
        real = account_rows.versions_change

        def unreachable(**kwargs: Any) -> None:
            raise ConnectionError("Redis went away")

        monkeypatch.setattr(account_rows, "versions_change", unreachable)
        monkeypatch.setattr("users.outbox.versions_change", unreachable)
        run_commits(lambda: rename(User.objects.get(pk=alice.pk)))
        pending = OutboxEntry.objects.filter(kind=ACCOUNT_VERSION_KIND, subject_id=alice.pk, applied_at__isnull=True)
        assert pending.count() == 1

        monkeypatch.setattr("users.outbox.versions_change", real)
        outbox.drain()

        assert pending.count() == 0
        found, reads = read(alice.pk)
        assert reads == 1 and found is not None and found.display_name == "A New Name"


class TestAWriteWhoseTokenChangeWasSkipped:
    def test_a_deactivation_made_while_the_breaker_was_open_signs_out_once_it_closes(self, alice, run_commits, settings):
        settings.REDIS_CIRCUIT_OPEN_SECONDS = 5.0
        client = signed_in(alice)
        assert client.get("/home").status_code == 200
        assert client.get("/home").status_code == 200  # kept
        redis_failed(ConnectionError("a blip"))  # the breaker opens: the after-commit work is skipped

        run_commits(lambda: user_set_active(user=User.objects.get(pk=alice.pk), is_active=False))
        redis_reset_breaker()  # REDIS_CIRCUIT_OPEN_SECONDS later; the entry still pending

        assert OutboxEntry.objects.filter(kind=ACCOUNT_VERSION_KIND, applied_at__isnull=True).count() == 1
        assert client.get("/home").status_code == 302

    def test_a_failure_met_while_the_row_was_read_leaves_it_untrusted(self, alice, run_commits, settings, monkeypatch):
        settings.REDIS_CIRCUIT_OPEN_SECONDS = 5.0
        client = signed_in(alice)
        real = account_by_id

        def read_then_a_deactivation_during_an_outage(user_id: int, **kwargs: Any) -> User | None:
            found = real(user_id, **kwargs)  # the row, still active
            monkeypatch.setattr(account_rows, "account_by_id", real)
            redis_failed(ConnectionError("a blip"))
            run_commits(lambda: user_set_active(user=User.objects.get(pk=alice.pk), is_active=False))
            return found

        monkeypatch.setattr(account_rows, "account_by_id", read_then_a_deactivation_during_an_outage)
        assert client.get("/home").status_code == 200  # read before the deactivation committed
        redis_reset_breaker()

        assert client.get("/home").status_code == 302

    def test_a_fixture_loaded_over_an_account_changes_its_token(self, alice, run_commits, tmp_path: Path):
        client = signed_in(alice)
        client.get("/home")
        assert client.get("/home").status_code == 200
        rows = json.loads(serializers.serialize("json", [User.objects.get(pk=alice.pk)]))
        rows[0]["fields"]["is_active"] = False
        fixture = tmp_path / "accounts.json"
        fixture.write_text(json.dumps(rows))

        run_commits(lambda: call_command("loaddata", str(fixture), verbosity=0))

        assert client.get("/home").status_code == 302


class TestWhatChangesTheToken:
    def test_a_visit_writes_last_seen_once_though_the_row_is_kept(self, alice):
        client = signed_in(alice)
        User.objects.filter(pk=alice.pk).update(last_seen_at=timezone.now() - timedelta(hours=1))
        with CaptureQueriesContext(connection) as queries:
            for _ in range(4):
                assert client.get("/home").status_code == 200

        writes = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("UPDATE") and "last_seen_at" in q["sql"]]
        assert len(writes) == 1

    def test_an_update_of_many_accounts_records_their_entries_at_once(self, run_commits):
        users = UserFactory.create_batch(200)
        with CaptureQueriesContext(connection) as queries:
            run_commits(lambda: User.objects.filter(pk__in=[user.pk for user in users]).update(bio="hello"))

        assert len(queries.captured_queries) < 20
        assert OutboxEntry.objects.filter(kind=ACCOUNT_VERSION_KIND, applied_at__isnull=True).count() == 0
        assert OutboxEntry.objects.filter(kind=ACCOUNT_VERSION_KIND).count() == 200

    def test_an_update_records_one_entry_per_account_and_a_sign_in_s_fields_none(self, alice, bob, charlie):
        entries = OutboxEntry.objects.filter(kind=ACCOUNT_VERSION_KIND)

        assert User.objects.filter(pk__in=[alice.pk, bob.pk]).update(bio="the same bio") == 2
        assert sorted(entries.values_list("subject_id", flat=True)) == sorted([alice.pk, bob.pk])

        user_touch_seen(user=charlie)
        User.objects.filter(pk=charlie.pk).update(last_login=charlie.date_joined)
        charlie.save(update_fields=["last_login"])
        assert User.objects.filter(pk=10**12).update(bio="nobody") == 0
        assert entries.count() == 2


class TestRedisDown:
    def test_every_request_reads_the_row_while_the_breaker_is_open(self, private_redis, settings, alice):
        settings.REDIS_CIRCUIT_OPEN_SECONDS = 30.0
        client = signed_in(alice, raise_request_exception=False)
        assert client.get("/home").status_code == 200
        assert client.get("/home").status_code == 200  # kept
        private_redis.kill()
        User.objects.filter(pk=alice.pk).update(username="downrename")  # its token change cannot be made

        pages = [client.get("/home") for _ in range(2)]

        assert [page.status_code for page in pages] == [200, 200]
        assert all("@downrename<" in page.content.decode() for page in pages)
        assert read(alice.pk)[1] == 1


def _token(user_id: int) -> bytes:
    from core.redis import get_redis

    value = get_redis().get(redis_keys.account_version_key(user_id))
    assert isinstance(value, bytes)
    return value

"""Sessions read from Redis, kept in the database (core.sessions), with Redis up, killed, hung,
refusing commands and back; the break-it cases: a cookie in another letter case, a cache fill
racing a sign-out, a write that timed out landing later, a delete lost while Redis refused it."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import login
from django.contrib.sessions.models import Session
from django.core.cache import cache
from django.db import connection
from django.test import Client, RequestFactory
from django.test.utils import CaptureQueriesContext

from core import redis_keys as core_keys
from core.outbox import now_ms
from core.redis import redis_reset_breaker
from core.sessions import SessionStore
from tests.support.accounts import signed_in
from tests.support.faults import accept_commands_again, refuse_every_command

pytestmark = pytest.mark.django_db


def cached_copy(client: Client) -> Any:
    return cache.get(SessionStore.cache_key_prefix + client.cookies[django_settings.SESSION_COOKIE_NAME].value)


def session_queries(client: Client, path: str) -> tuple[int, list[str]]:
    """(the answer's status, the SQL of its queries that read or write ``django_session``)."""
    with CaptureQueriesContext(connection) as queries:
        status = client.get(path).status_code
    return status, [q["sql"] for q in queries.captured_queries if "django_session" in q["sql"]]


class TestRedisUp:
    def test_a_signed_in_page_reads_its_session_from_redis_not_the_database(self, alice):
        client = signed_in(alice)
        assert cached_copy(client)["_auth_user_id"] == str(alice.pk)
        status, queries = session_queries(client, "/home")
        assert (status, queries) == (200, [])

    def test_a_copy_missing_from_redis_is_read_from_the_database_once_and_cached_again(self, alice):
        client = signed_in(alice)
        cache.delete(SessionStore.cache_key_prefix + client.session.session_key)
        assert session_queries(client, "/home")[0] == 200
        assert len(session_queries(client, "/home")[1]) == 0
        assert cached_copy(client)["_auth_user_id"] == str(alice.pk)

    def test_the_cached_copy_lives_at_most_session_cache_seconds(self, alice, settings):
        settings.SESSION_CACHE_SECONDS = 40
        client = signed_in(alice)
        key = cache.make_key(SessionStore.cache_key_prefix + client.session.session_key)
        assert 0 < cache.client.get_client().ttl(key) <= 40  # type: ignore[attr-defined]

    def test_signing_out_ends_the_session_in_both_stores(self, alice):
        client = signed_in(alice)
        key = str(client.session.session_key)
        assert client.post("/logout/").status_code == 302
        assert not Session.objects.filter(session_key=key).exists()
        assert cache.get(SessionStore.cache_key_prefix + key) is None
        stolen = Client()
        stolen.cookies[django_settings.SESSION_COOKIE_NAME] = key
        assert stolen.get("/home").status_code == 302  # to the sign-in page

    def test_a_deactivated_account_is_signed_out_on_its_next_request_despite_the_cached_session(self, alice, run_commits):
        client = signed_in(alice)
        assert client.get("/home").status_code == 200
        assert client.get("/home").status_code == 200  # its row kept (users.account_rows)
        run_commits(lambda: type(alice).objects.filter(pk=alice.pk).update(is_active=False))
        assert client.get("/home").status_code == 302

    def test_a_password_change_ends_the_other_sessions_despite_their_cached_copies(self, alice, run_commits):
        other = signed_in(alice)
        assert other.get("/home").status_code == 200
        assert other.get("/home").status_code == 200
        alice.set_password("a-new-long-passphrase")
        run_commits(alice.save)
        assert other.get("/home").status_code == 302

    def test_a_cookie_in_another_letter_case_is_no_session_and_caches_nothing(self, alice):
        client = signed_in(alice)
        key = client.cookies[django_settings.SESSION_COOKIE_NAME].value
        variant = Client()
        variant.cookies[django_settings.SESSION_COOKIE_NAME] = key.upper()  # the column's collation matches it

        assert variant.get("/home").status_code == 302
        assert cache.get(SessionStore.cache_key_prefix + key.upper()) is None
        assert client.post("/logout/").status_code == 302
        assert variant.get("/home").status_code == 302

    def test_a_cache_fill_racing_a_sign_out_does_not_bring_the_session_back(self, alice, monkeypatch):
        client = signed_in(alice)
        key = client.cookies[django_settings.SESSION_COOKIE_NAME].value
        cache.delete(SessionStore.cache_key_prefix + key)  # the copy expired
        read_row = SessionStore._get_session_from_db  # type: ignore[attr-defined]

        def row_then_sign_out(store: SessionStore) -> object:
            row = read_row(store)
            SessionStore(key).flush()  # another request of the same reader signs out right now
            return row

        monkeypatch.setattr(SessionStore, "_get_session_from_db", row_then_sign_out)
        assert SessionStore(key).load() == {}
        monkeypatch.undo()

        assert cache.get(SessionStore.cache_key_prefix + key) is None
        assert client.get("/home").status_code == 302


@pytest.fixture
def private_redis(private_redis, settings):
    """The shared private redis-server (tests/conftest.py), with a breaker that an outage opens
    for the rest of the test (the tests that close it say so)."""
    settings.REDIS_CIRCUIT_OPEN_SECONDS = 30.0
    return private_redis


class TestRedisDown:
    def test_pages_sign_in_and_sign_out_work_from_the_database_while_redis_is_killed(self, private_redis, alice, bob):
        before = signed_in(alice, raise_request_exception=False)
        private_redis.kill()
        assert before.get("/home").status_code == 200  # the database's row, read after the cache failed
        newcomer = Client(raise_request_exception=False)
        newcomer.force_login(bob)
        assert newcomer.get("/home").status_code == 200
        key = str(newcomer.session.session_key)
        assert newcomer.post("/logout/").status_code == 302
        assert not Session.objects.filter(session_key=key).exists()
        stolen = Client(raise_request_exception=False)
        stolen.cookies[django_settings.SESSION_COOKIE_NAME] = key
        assert stolen.get("/home").status_code == 302

    def test_while_the_breaker_is_open_a_page_reads_the_session_row_once(self, private_redis, alice):
        client = signed_in(alice, raise_request_exception=False)
        private_redis.kill()
        assert client.get("/home").status_code == 200  # the failure opens the breaker

        status, queries = session_queries(client, "/home")

        assert status == 200
        assert len(queries) == 1  # the row; no check of it after a copy that was never written

    def test_a_session_made_during_the_outage_is_cached_once_redis_is_back(self, private_redis, settings, alice):
        settings.REDIS_CIRCUIT_OPEN_SECONDS = 0.0
        private_redis.kill()
        client = signed_in(alice, raise_request_exception=False)
        assert client.get("/home").status_code == 200
        private_redis.start()
        private_redis.client().set(core_keys.sentinel_key(), now_ms())
        assert client.get("/home").status_code == 200
        assert cached_copy(client)["_auth_user_id"] == str(alice.pk)


class TestRedisHungOrRefusing:
    def test_a_sign_in_while_redis_hangs_is_not_undone_when_redis_resumes(self, private_redis, alice):
        cache.get("warm-up")  # an open pooled connection, as in a running process
        request = RequestFactory().post("/login/")
        request.session = SessionStore()
        private_redis.pause()
        login(request, alice, backend="django.contrib.auth.backends.ModelBackend")
        request.session.save()  # a write that times out, then the breaker is open: the database only
        key = str(request.session.session_key)
        private_redis.resume()
        private_redis.client().ping()
        time.sleep(0.1)  # the server runs what it read while stopped
        redis_reset_breaker()  # REDIS_CIRCUIT_OPEN_SECONDS later

        client = Client()
        client.cookies[django_settings.SESSION_COOKIE_NAME] = key
        assert client.get("/home").status_code == 200
        assert cache.get(SessionStore.cache_key_prefix + key)["_auth_user_id"] == str(alice.pk)

    def test_a_sign_out_redis_refused_takes_the_cached_copy_once_redis_answers(self, private_redis, alice):
        client = signed_in(alice, raise_request_exception=False)
        assert client.get("/home").status_code == 200
        key = str(client.session.session_key)
        assert cache.get(SessionStore.cache_key_prefix + key) is not None
        refuse_every_command(private_redis)

        assert client.post("/logout/").status_code == 302  # the row goes; the copy's delete fails
        accept_commands_again(private_redis)
        assert private_redis.client().exists(cache.make_key(SessionStore.cache_key_prefix + key)) == 1
        redis_reset_breaker()

        stolen = Client()
        stolen.cookies[django_settings.SESSION_COOKIE_NAME] = key
        assert stolen.get("/home").status_code == 302
        assert private_redis.client().exists(cache.make_key(SessionStore.cache_key_prefix + key)) == 0

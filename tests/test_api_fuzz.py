"""The JSON API fuzzed from its OpenAPI document (schemathesis) against a live server.

The real stack: Django's live server thread, the test database on MariaDB,
a private redis-server (stopped for the "Redis down" runs). Four runs:
signed in and signed out, each with Redis up and with Redis stopped. Every
operation of ``config/openapi.yaml`` gets generated requests, valid ones
(positive) and invalid ones (negative), with ids drawn both from the whole
id range and from the accounts and notes that exist. Each response must:

- not be a 5xx;
- have a status, headers, content type and body the document describes;
- when it is a refusal (4xx), leave the database exactly as it was (a
  checksum of every table the product writes, not counting sessions, the
  limits' fallback cache and the Redis watch).

``FOLLOWFEED_FUZZ_EXAMPLES`` (default 30) sets the examples per operation
and generation mode; the figures of each run (requests by status) are
printed (``pytest -s``).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

import pytest
import requests
import schemathesis
from django.apps import apps
from django.db import connection
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.accounts import signed_in

if TYPE_CHECKING:
    from schemathesis.core.result import Ok

from core.views import api_document
from tests.support.faults import RedisServer, point_at

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# Per operation and generation mode; the document's 30-odd operations make
# this the longest test of the suite, so it runs once (marked slow).
EXAMPLES = int(os.environ.get("FOLLOWFEED_FUZZ_EXAMPLES", "20"))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
# Rows these tables hold change on refused requests by design (a session, a
# counted login failure while Redis is down, the heartbeat of the watch).
UNCHECKED_TABLES = {"django_session", "core_cache", "core_rediswatch"}

SCHEMA = schemathesis.openapi.from_dict(api_document())
# Every operation of our own document loads (an Err would raise here; cast for the type checker only).
OPERATIONS = [cast("Ok[Any]", result).ok() for result in SCHEMA.get_all_operations()]
FIGURES: dict[str, Counter[int]] = {}


def product_tables() -> list[str]:
    """Every table of the project's apps and Django's auth, but ``UNCHECKED_TABLES``."""
    names = {model._meta.db_table for model in apps.get_models()}
    return sorted(names - UNCHECKED_TABLES)


def database_checksum(tables: list[str]) -> tuple[Any, ...]:
    """MariaDB's CHECKSUM TABLE of ``tables``: equal when and only when no row changed."""
    with connection.cursor() as cursor:
        cursor.execute("CHECKSUM TABLE " + ", ".join(f"`{name}`" for name in tables))
        return tuple(cursor.fetchall())


@pytest.fixture
def private_redis_no_sentinel(settings: Any) -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    point_at(settings, server)
    yield server
    server.stop()


@pytest.fixture
def world(user_factory: Any, django_capture_on_commit_callbacks: Any) -> dict[str, Any]:
    """A few accounts that follow each other, with notes; the fuzzer signs in as ``actor``."""
    from feed import services as feed_services
    from social import services as social_services

    actor, *others = [user_factory() for _ in range(5)]
    with django_capture_on_commit_callbacks(execute=True):
        for other in others:
            social_services.follow_create(actor=actor, followee_id=other.pk)
            social_services.follow_create(actor=other, followee_id=actor.pk)
        notes = [
            feed_services.note_create(author=author, body=f"note {index}") for index, author in enumerate([actor, *others] * 2)
        ]
    ids = sorted({actor.pk, *(other.pk for other in others), *(note.pk for note in notes)})
    return {"actor": actor, "ids": ids}


class Credentials:
    """What a client sends: the CSRF cookie and its header value, and the actor's session when
    signed in. Schemathesis generates values for the document's security schemes (a random
    ``sessionid``, a random ``X-CSRFToken``); ``apply`` puts the real ones over them, so a
    signed-out client keeps a random session cookie and reaches the views past the CSRF check."""

    def __init__(self, base_url: str, actor: Any | None) -> None:
        self.session = requests.Session()
        self.session.get(f"{base_url}/login/", timeout=10)
        self.csrf_token = self.session.cookies["csrftoken"]
        self.session_id: str | None = None
        if actor is not None:
            django_client = signed_in(actor)
            self.session_id = django_client.cookies["sessionid"].value

    def apply(self, case: Any) -> None:
        case.headers = {**(case.headers or {}), "X-CSRFToken": self.csrf_token}
        if self.session_id is not None:
            case.cookies = {**(case.cookies or {}), "sessionid": self.session_id}


def fuzz(base_url: str, credentials: Credentials, ids: list[int], figures: Counter[int]) -> None:
    """Every operation in both generation modes, ids free and drawn from ``ids``."""
    tables = product_tables()
    for operation in OPERATIONS:
        strategies = [operation.as_strategy(generation_mode=mode) for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)]
        if "{id}" in operation.path:

            def with_id(found: int, op: Any = operation) -> Any:
                return op.as_strategy(path_parameters={"id": found})

            strategies.append(st.sampled_from(ids).flatmap(with_id))

        @hypothesis_settings(
            max_examples=EXAMPLES * len(strategies),
            deadline=None,
            database=None,
            phases=[Phase.generate, Phase.shrink],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=st.one_of(strategies))
        def run(case: Any) -> None:
            credentials.apply(case)
            before = database_checksum(tables)
            response = case.call(base_url=base_url, session=credentials.session, timeout=30)
            figures[response.status_code] += 1
            case.validate_response(response, checks=CHECKS)
            if 400 <= response.status_code < 500:
                assert database_checksum(tables) == before, (
                    f"{case.method} {case.formatted_path} changed the database with a {response.status_code}"
                )

        run()


@pytest.mark.parametrize("redis_state", ["up", "down"])
@pytest.mark.parametrize("signed_in", [True, False], ids=["signed-in", "signed-out"])
def test_every_operation_answers_as_documented(live_server, private_redis_no_sentinel, world, signed_in, redis_state):
    credentials = Credentials(live_server.url, world["actor"] if signed_in else None)
    if redis_state == "down":
        private_redis_no_sentinel.kill()
    figures: Counter[int] = Counter()

    fuzz(live_server.url, credentials, world["ids"], figures)

    label = f"{'signed in' if signed_in else 'signed out'}, Redis {redis_state}"
    FIGURES[label] = figures
    print(f"\nfuzz {label}: {sum(figures.values())} requests, by status {dict(sorted(figures.items()))}")
    assert not any(status >= 500 for status in figures)
    assert sum(figures.values()) >= EXAMPLES * len(OPERATIONS)
    # The valid half reached the product: successes among the answers, and
    # refusals for want of a session only when signed out.
    assert any(200 <= status < 300 for status in figures)
    assert (figures[401] > 0) is not signed_in


class TestTheDocument:
    def test_every_api_route_is_described_with_its_methods(self, client):
        """Each URL pattern under /api/ is a path of the document, with exactly the methods it takes
        (the Mastodon client API's /api/v1 and /api/v2 are Mastodon's, documented by Mastodon)."""
        from django.urls import URLPattern, URLResolver, get_resolver

        def walk(patterns: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
            for entry in patterns:
                if isinstance(entry, URLResolver):
                    yield from walk(entry.url_patterns, prefix + str(entry.pattern))
                elif isinstance(entry, URLPattern):
                    yield prefix + str(entry.pattern), entry

        import re

        routes = {}
        for route, _ in walk(get_resolver().url_patterns):
            if route.startswith("api/") and not route.startswith(("api/v1/", "api/v2/")):
                routes[
                    "/"
                    + re.sub(r"<(?:\w+:)?(\w+)>", lambda m: "{id}" if m.group(1) == "raw_id" else "{" + m.group(1) + "}", route)
                ] = route
        document = api_document()
        assert sorted(routes) == sorted(document["paths"])
        for path in routes:
            sample = path.replace("{id}", "1").replace("{flag}", "true")
            allowed = set(client.generic("PATCH", sample).headers["Allow"].split(", "))
            described = {method.upper() for method in document["paths"][path] if method != "parameters"}
            assert allowed - {"HEAD", "OPTIONS"} == described, path

    def test_the_document_is_served_as_json(self, client):
        response = client.get("/api/schema")

        assert response.status_code == 200
        assert response.json()["openapi"] == "3.1.0"
        assert response.json()["paths"].keys() == api_document()["paths"].keys()

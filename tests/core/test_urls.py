"""The project's URL patterns (``config/urls.py``): no two of its entries answer the same path, so
their order (the most loaded pages first) changes no answer."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.exceptions import Resolver404
from django.urls.resolvers import RegexPattern, RoutePattern

CONVERTER = re.compile(r"<(?:(\w+):)?\w+>")
SAMPLES = {None: "sample", "str": "sample", "int": "1", "id": "1", "slug": "sample", "path": "sample/deeper"}


def group_sample(group: re.Match[str]) -> str:
    """A value for a named group: its first alternative when it lists words, else a word."""
    alternatives = group.group(1).split("|")
    return alternatives[0] if all(re.fullmatch(r"[\w.-]+", word) for word in alternatives) else "sample"


def sample_of(pattern: Any) -> str:
    """A path the pattern matches (converters and groups filled with sample values)."""
    if isinstance(pattern, RoutePattern):
        return CONVERTER.sub(lambda found: SAMPLES.get(found.group(1), "1"), str(pattern))
    assert isinstance(pattern, RegexPattern)
    regex = str(pattern)
    sample = re.sub(r"\(\?P<\w+>([^)]*)\)", group_sample, regex).replace("[12]", "1").replace("/?", "").strip("^$")
    assert re.fullmatch(regex.strip("^$"), sample), regex
    return sample


def leaves(entry: Any, prefix: str = "") -> Iterator[str]:
    """Sample paths of every pattern under ``entry``."""
    here = prefix + sample_of(entry.pattern)
    if isinstance(entry, URLPattern):
        yield here
        return
    assert isinstance(entry, URLResolver)
    for child in entry.url_patterns:
        yield from leaves(child, here)


def answers(entry: Any, path: str) -> bool:
    try:
        return entry.resolve(path) is not None
    except Resolver404:
        return False


def test_no_two_entries_answer_the_same_path() -> None:
    entries = get_resolver().url_patterns
    paths = [(index, path) for index, entry in enumerate(entries) for path in leaves(entry)]
    assert len(paths) > 100

    claimed = {path: [index for index, entry in enumerate(entries) if answers(entry, path)] for _, path in paths}

    assert {path: found for path, found in claimed.items() if len(found) != 1} == {}
    assert all(claimed[path] == [index] for index, path in paths)


@pytest.mark.parametrize(
    ("path", "view_name"),
    [
        ("/home", "feed:home"),
        ("/u/bob/", "feed:profile"),
        ("/u/bob/followers/", "social:followers"),
        ("/api/feed", None),
        ("/api/v1/accounts/1/followers", "client_api:account_followers"),
        ("/api/v1/no/such/thing", "client_api:not_found"),
        ("/oauth/token", "client_api:token"),
        ("/login/", "users:login"),
        ("/admin/", "admin:index"),
    ],
)
def test_each_path_reaches_its_view(path: str, view_name: str | None) -> None:
    match = get_resolver().resolve(path)

    if view_name is not None:
        assert match.view_name == view_name
    else:
        assert match.func.__module__ == "feed.api"

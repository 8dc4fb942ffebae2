"""A page's account and the viewer's access to it in one query (``social.visibility.account_and_access``,
issue 26): the same answers as ``active_user_named`` (or the account by id) and ``access`` took
in two, for every kind of viewer."""

from __future__ import annotations

from typing import Any

import pytest

from core.errors import NotFound
from social import controls, services, visibility
from users.selectors import active_user_named

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(user_factory: Any, run_commits: Any) -> dict[str, Any]:
    """An account and a viewer of every standing with it: a follower, a stranger, one it blocks,
    one that blocks it; and a private account with a follower."""
    people = {name: user_factory(username=name) for name in ("star", "fan", "stranger", "pest", "hater", "shy", "friend")}
    run_commits(lambda: services.follow_create(actor=people["fan"], followee_id=people["star"].pk))
    run_commits(lambda: controls.block_create(actor=people["star"], target_id=people["pest"].pk))
    run_commits(lambda: controls.block_create(actor=people["hater"], target_id=people["star"].pk))
    run_commits(lambda: services.follow_create(actor=people["friend"], followee_id=people["shy"].pk))
    run_commits(lambda: controls.account_privacy_set(actor=people["shy"], private=True))
    return people


def two_reads(viewer: Any, name: str) -> Any:
    user = active_user_named(name)
    return user.pk, user.username, visibility.access(viewer=viewer, user=user)


@pytest.mark.parametrize("account", ["star", "shy", "hater", "pest"])
@pytest.mark.parametrize("viewer", [None, "star", "fan", "stranger", "pest", "hater", "shy", "friend"])
def test_equals_the_two_reads_for_every_viewer(world: dict[str, Any], account: str, viewer: str | None) -> None:
    seer = world[viewer] if viewer is not None else None
    expected = two_reads(seer, account)

    by_name = visibility.account_and_access(viewer=seer, username=account.upper())
    by_id = visibility.account_and_access(viewer=seer, user_id=world[account].pk)

    assert by_name is not None and by_id is not None
    assert (by_name[0].pk, by_name[0].username, by_name[1]) == expected
    assert (by_id[0].pk, by_id[0].username, by_id[1]) == expected


def test_the_standings_are_told_apart(world: dict[str, Any]) -> None:
    def seen(viewer: str, account: str) -> Any:
        found = visibility.account_and_access(viewer=world[viewer], username=account)
        assert found is not None
        return found[1]

    assert seen("fan", "star") == visibility.Access(hidden=False, blocking=False, private=False, content=True, follows=True)
    assert seen("pest", "star") == visibility.Access(hidden=True, blocking=False, private=False, content=False)
    assert seen("star", "pest") == visibility.Access(hidden=False, blocking=True, private=False, content=False)
    assert seen("stranger", "shy") == visibility.Access(hidden=False, blocking=False, private=True, content=False)
    assert seen("friend", "shy") == visibility.Access(hidden=False, blocking=False, private=True, content=True, follows=True)


def test_no_such_active_account_is_none_and_a_name_that_cannot_be_one_is_404(world: dict[str, Any], user_factory: Any) -> None:
    gone = user_factory(username="gone", is_active=False)

    assert visibility.account_and_access(viewer=world["fan"], username="gone") is None
    assert visibility.account_and_access(viewer=None, user_id=gone.pk) is None
    assert visibility.account_and_access(viewer=None, username="nobody") is None
    assert visibility.account_and_access(viewer=None, user_id=2**62) is None
    with pytest.raises(NotFound):
        visibility.account_and_access(viewer=None, username="no such/name")


@pytest.mark.parametrize("pattern", ["st_r", "sta%", "%"])
def test_like_wildcards_match_no_account(world: dict[str, Any], pattern: str) -> None:
    try:
        found = visibility.account_and_access(viewer=None, username=pattern)
    except NotFound:
        found = None

    assert found is None


def test_one_query(world: dict[str, Any], django_assert_num_queries: Any) -> None:
    with django_assert_num_queries(1):
        found = visibility.account_and_access(viewer=world["fan"], username="star")

    assert found is not None and found[1].follows

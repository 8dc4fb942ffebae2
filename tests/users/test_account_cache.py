"""The account cache (``users.account_cache``, issue 26): what a follow list and a profile print of
an account comes from Redis in the page's one script; a miss reads the primary and fills; a
rename, deactivation or deletion shows on the next page; a fill read before the change never
writes the old names back."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.cluster import is_cluster
from feed.outbox import account_purge
from social import selectors
from tests.support.graph import follow
from users import account_cache
from users.models import User
from users.redis_keys import ACCOUNT_TOMBSTONE, ACCOUNT_TOMBSTONE_SECONDS, account_key
from users.selectors import users_by_id
from users.serializers import ShownAccount
from users.services import user_set_active

pytestmark = pytest.mark.django_db


@pytest.fixture
def star_and_fans(user_factory: Any) -> tuple[User, list[User]]:
    """A star followed by four fans, who include a space, digits and non-ASCII in their names."""
    star = user_factory(username="star")
    fans = [
        user_factory(username="ana_1", display_name="Ana María"),
        user_factory(username="bo", display_name="12 Bo 34"),
        user_factory(username="chloé", display_name=""),
        user_factory(username="dee", display_name="Dee <d> & co"),
    ]
    for fan in fans:
        follow(fan, star)
        follow(star, fan)  # mutual: the profile's sample shows them too
    return star, fans


def followers(star: User, viewer_id: int | None = None) -> dict[int, Any]:
    found = selectors.follow_list(kind="followers", user_id=star.pk, cursor=None, limit=50, viewer_id=viewer_id)
    return {entry.user.pk: entry.user for entry in found.page.entries}


def account_reads(queries: CaptureQueriesContext) -> list[str]:
    """The queries that read accounts' rows."""
    table = User._meta.db_table
    return [
        query["sql"]
        for query in queries.captured_queries
        if f"FROM `{table}`" in query["sql"] or f'FROM "{table}"' in query["sql"]
    ]


@pytest.fixture
def one_server(redis_client: Any) -> None:
    if is_cluster(redis_client):
        pytest.skip("on a cluster the follow list and the profile read the separate way, accounts from the database")


class TestValues:
    @pytest.mark.parametrize(
        ("username", "display_name"), [("bo", ""), ("ana_1", "Ana María"), ("chloé", "12 3"), ("x", " spaced  name ")]
    )
    def test_a_value_gives_back_the_names(self, username: str, display_name: str) -> None:
        value = account_cache.account_value(ShownAccount(7, username, display_name))

        assert account_cache.parse_account_value(value) == (username, display_name)
        assert account_cache.parsed_account(7, value) == ShownAccount(7, username, display_name)

    def test_a_value_that_is_not_one_raises(self) -> None:
        with pytest.raises(ValueError):
            account_cache.parse_account_value(b"not a value")


@pytest.mark.usefixtures("one_server")
class TestFollowList:
    def test_a_first_page_fills_the_entries_and_the_next_reads_no_account_row(
        self, star_and_fans: Any, redis_client: Any
    ) -> None:
        star, fans = star_and_fans
        redis_client.delete(*[account_key(fan.pk) for fan in fans])

        first = followers(star)
        with CaptureQueriesContext(connection) as queries:
            second = followers(star)

        expected = {fan.pk: ShownAccount(fan.pk, fan.username, fan.display_name) for fan in fans}
        assert first == second == expected
        assert account_reads(queries) == []
        for fan in fans:
            assert redis_client.get(account_key(fan.pk)) == account_cache.account_value(fan)

    def test_the_page_shows_what_the_database_holds(self, star_and_fans: Any) -> None:
        star, _ = star_and_fans
        followers(star)  # cached

        shown = followers(star)

        by_database = selectors.followers_page(user_id=star.pk, cursor=None, limit=50)
        assert [(pk, user.username, user.shown_name) for pk, user in shown.items()] == [
            (entry.user.pk, entry.user.username, entry.user.shown_name) for entry in by_database.entries
        ]

    def test_a_rename_shows_on_the_next_page(self, star_and_fans: Any, run_commits: Any) -> None:
        star, fans = star_and_fans
        followers(star)

        def rename() -> None:
            fans[1].username, fans[1].display_name = "bo2", "Bo Two"
            fans[1].save()

        run_commits(rename)

        assert followers(star)[fans[1].pk] == ShownAccount(fans[1].pk, "bo2", "Bo Two")

    def test_a_deactivated_follower_leaves_the_next_page(self, star_and_fans: Any, run_commits: Any, redis_client: Any) -> None:
        star, fans = star_and_fans
        followers(star)

        run_commits(lambda: user_set_active(user=fans[0], is_active=False))

        assert fans[0].pk not in followers(star)
        assert fans[0].pk not in {
            user.pk for user in selectors.profile_graph(user_id=star.pk, viewer_id=None).samples.mutual.users
        }
        assert redis_client.get(account_key(fans[0].pk)) == ACCOUNT_TOMBSTONE

    def test_while_tombstoned_the_page_reads_the_database_and_writes_nothing(self, star_and_fans: Any, redis_client: Any) -> None:
        star, fans = star_and_fans
        followers(star)
        pipe = redis_client.pipeline(transaction=False)
        account_cache.queue_account_forget(pipe, [fans[2].pk])
        pipe.execute()

        with CaptureQueriesContext(connection) as queries:
            shown = followers(star)

        assert shown[fans[2].pk] == ShownAccount(fans[2].pk, "chloé", "")
        assert len(account_reads(queries)) == 1  # that one account, nothing filled
        assert redis_client.get(account_key(fans[2].pk)) == ACCOUNT_TOMBSTONE
        assert 0 < redis_client.ttl(account_key(fans[2].pk)) <= ACCOUNT_TOMBSTONE_SECONDS

    def test_a_fill_read_before_a_change_does_not_write_over_its_tombstone(self, star_and_fans: Any, redis_client: Any) -> None:
        _, fans = star_and_fans
        before = User.objects.get(pk=fans[3].pk)  # read before the rename...
        pipe = redis_client.pipeline(transaction=False)
        account_cache.queue_account_forget(pipe, [fans[3].pk])  # ...which commits and forgets
        pipe.execute()

        pipe = redis_client.pipeline(transaction=False)
        account_cache.queue_account_fill(pipe, [before])  # the reader's late fill
        pipe.execute()

        assert redis_client.get(account_key(fans[3].pk)) == ACCOUNT_TOMBSTONE

    def test_a_fill_read_before_a_deletion_and_landing_after_the_purge_leaves_no_entry(
        self, star_and_fans: Any, redis_client: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        star, fans = star_and_fans
        gone = fans[1]
        for fan in fans:
            redis_client.delete(account_key(fan.pk))
        real = users_by_id
        reads: list[list[int]] = []

        def read_then_delete(ids: Any) -> dict[int, User]:
            found = real(ids)
            if not reads:  # the page's read, then the deletion and its purge commit
                User.objects.filter(pk=gone.pk).delete()
                assert account_purge(user_id=gone.pk) >= 0
                assert redis_client.get(account_key(gone.pk)) is None
            reads.append(sorted(ids))
            return found

        monkeypatch.setattr("users.account_cache.users_by_id", read_then_delete)

        shown = followers(star)

        assert gone.pk in shown  # read before the deletion
        assert reads == [sorted(fan.pk for fan in fans)] * 2  # the page's read, then the check after the fill
        assert redis_client.get(account_key(gone.pk)) is None
        for fan in fans:
            if fan is not gone:
                assert redis_client.get(account_key(fan.pk)) == account_cache.account_value(fan)

    def test_the_json_list_prints_the_cached_names(self, star_and_fans: Any, client: Any) -> None:
        star, fans = star_and_fans
        followers(star)

        body = client.get(f"/api/users/{star.pk}/followers").json()

        names = {row["id"]: (row["username"], row["displayName"]) for row in body["data"]["list"]}
        assert names == {fan.pk: (fan.username, fan.display_name or fan.username) for fan in fans}


@pytest.mark.usefixtures("one_server")
class TestProfile:
    def test_the_samples_come_from_the_cache_after_the_first_view(self, star_and_fans: Any) -> None:
        star, fans = star_and_fans
        selectors.profile_graph(user_id=star.pk, viewer_id=fans[0].pk)

        with CaptureQueriesContext(connection) as queries:
            graph = selectors.profile_graph(user_id=star.pk, viewer_id=fans[0].pk)

        assert account_reads(queries) == []
        assert graph.samples.mutual.users == [
            ShownAccount(fan.pk, fan.username, fan.display_name) for fan in sorted(fans, key=lambda f: f.pk)
        ]
        assert graph.samples.common is not None and graph.samples.familiar is not None
        expected = selectors.profile_samples(user_id=star.pk, viewer_id=fans[0].pk)
        assert expected.common is not None and expected.familiar is not None
        assert [u.pk for u in graph.samples.common.users] == [u.pk for u in expected.common.users]
        assert [u.pk for u in graph.samples.familiar.users] == [u.pk for u in expected.familiar.users]

    def test_a_rename_shows_in_the_next_sample(self, star_and_fans: Any, run_commits: Any) -> None:
        star, fans = star_and_fans
        selectors.profile_graph(user_id=star.pk, viewer_id=None)

        def rename() -> None:
            fans[0].display_name = "Ana Renamed"
            fans[0].save()

        run_commits(rename)

        shown = {
            user.pk: user.shown_name for user in selectors.profile_graph(user_id=star.pk, viewer_id=None).samples.mutual.users
        }
        assert shown[fans[0].pk] == "Ana Renamed"


@pytest.mark.usefixtures("one_server")
def test_an_id_past_fourteen_digits_is_read_from_the_cache(user_factory: Any) -> None:
    """The profile's script builds the keys of the ids it sampled: an id Lua would print in exponent
    form (1.2345678901234e+14) must still name its entry."""
    star = user_factory(username="star")
    big = user_factory(pk=123_456_789_012_345, username="big")
    follow(big, star)
    follow(star, big)
    selectors.profile_graph(user_id=star.pk, viewer_id=None)  # fills

    with CaptureQueriesContext(connection) as queries:
        graph = selectors.profile_graph(user_id=star.pk, viewer_id=None)

    assert graph.samples.mutual.users == [ShownAccount(big.pk, "big", big.display_name)]
    assert account_reads(queries) == []

"""Invariant 1: after any sequence of follows/unfollows the mirror equals the database."""

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from social import selectors, services
from tests.support.graph import assert_mirror_equals_database, db_edges

pytestmark = pytest.mark.django_db

USERS = 5
operations = st.lists(
    st.tuples(st.sampled_from(["follow", "unfollow"]), st.integers(0, USERS - 1), st.integers(0, USERS - 1)),
    min_size=1,
    max_size=40,
)


@pytest.fixture
def accounts(user_factory):
    return [user_factory() for _ in range(USERS)]


@hypothesis_settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations)
def test_random_sequences_leave_mirror_equal_to_database(ops, accounts, redis_client, django_capture_on_commit_callbacks):
    for action, a, b in ops:
        with django_capture_on_commit_callbacks(execute=True):
            try:
                if action == "follow":
                    services.follow_create(actor=accounts[a], followee_id=accounts[b].pk)
                else:
                    services.follow_delete(actor=accounts[a], followee_id=accounts[b].pk)
            except services.SelfFollowError:
                assert a == b

    ids = [p.pk for p in accounts]
    assert_mirror_equals_database(redis_client, ids)
    edges = db_edges()
    for person in accounts:
        counts = selectors.follow_counts(user_id=person.pk)
        assert counts.followers == sum(1 for _, b in edges if b == person.pk)
        assert counts.following == sum(1 for a, _ in edges if a == person.pk)
        assert (person.pk, person.pk) not in edges

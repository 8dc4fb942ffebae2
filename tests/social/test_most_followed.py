"""The directory's most-followed ranking counts only follows between active accounts."""

from typing import Any

import pytest

from social import selectors
from social.models import Follow

pytestmark = pytest.mark.django_db


def test_ranking_leaves_out_inactive_followers_and_inactive_followees(user_factory: Any) -> None:
    star, second, gone = user_factory(), user_factory(), user_factory()
    fans = [user_factory() for _ in range(4)]
    ghost = user_factory(is_active=False)
    Follow.objects.bulk_create(
        [Follow(follower=fan, followee=star) for fan in fans[:3]]
        + [Follow(follower=fan, followee=second) for fan in fans[:2]]
        + [Follow(follower=ghost, followee=second), Follow(follower=ghost, followee=star)]
        + [Follow(follower=fan, followee=gone) for fan in fans]
    )
    gone.is_active = False
    gone.save(update_fields=["is_active"])

    ranking = selectors.users_most_followed(limit=3)

    assert [(user.pk, count) for user, count in ranking] == [(star.pk, 3), (second.pk, 2)]

"""Fixtures of the admin tests: the three kinds of staff, signed in.

- ``moderator``: staff, in the "moderators" group (created by the users
  migration), not a superuser;
- ``plain_staff``: staff with no group and no permission;
- ``superuser``.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from tests.conftest import UserFactory


@pytest.fixture
def moderator(db: Any) -> Any:
    user = UserFactory(username="mod", is_staff=True)
    user.groups.add(Group.objects.get(name="moderators"))
    return user


@pytest.fixture
def plain_staff(db: Any) -> Any:
    return UserFactory(username="staffer", is_staff=True)


@pytest.fixture
def superuser(db: Any) -> Any:
    return UserFactory(username="root", is_staff=True, is_superuser=True)


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def moderator_client(moderator: Any) -> Client:
    return signed_in(moderator)


@pytest.fixture
def staff_client(plain_staff: Any) -> Client:
    return signed_in(plain_staff)


@pytest.fixture
def superuser_client(superuser: Any) -> Client:
    return signed_in(superuser)


@pytest.fixture
def follow(django_capture_on_commit_callbacks: Any) -> Any:
    """``follow(a, b)``: ``a`` follows ``b`` through the service, mirror applied."""
    from social import services

    def make(follower: Any, followee: Any) -> None:
        with django_capture_on_commit_callbacks(execute=True):
            services.follow_create(actor=follower, target_id=followee.pk)

    return make

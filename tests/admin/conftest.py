"""Fixtures of the admin tests: the three kinds of staff, signed in.

- ``moderator``: staff, in the "moderators" group (created by the users
  migration), not a superuser;
- ``plain_staff``: staff with no group and no permission;
- ``superuser`` (and ``superuser_client``): the root conftest's.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from django.apps import apps as django_apps
from django.contrib.auth.models import Group
from django.test import Client

from tests.support.accounts import UserFactory, signed_in


@pytest.fixture
def moderators_group(db: Any) -> Group:
    """The "moderators" group as the users and social migrations leave it.

    Re-applied here because a transactional test elsewhere flushes every
    table, migration-made rows included, and ``--reuse-db`` keeps that state.
    """
    migration = importlib.import_module("users.migrations.0003_moderators_note_permissions")
    migration.forwards(django_apps, None)
    importlib.import_module("social.migrations.0006_moderators_follow_requests").forwards(django_apps, None)
    return Group.objects.get(name="moderators")


@pytest.fixture
def moderator(moderators_group: Group) -> Any:
    user = UserFactory.create(username="mod", is_staff=True)
    user.groups.add(moderators_group)
    return user


@pytest.fixture
def plain_staff(db: Any) -> Any:
    return UserFactory.create(username="staffer", is_staff=True)


@pytest.fixture
def moderator_client(moderator: Any) -> Client:
    return signed_in(moderator)


@pytest.fixture
def staff_client(plain_staff: Any) -> Client:
    return signed_in(plain_staff)

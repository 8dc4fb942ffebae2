"""Accounts in tests: the user factory, active readers, signed-in clients."""

from __future__ import annotations

from typing import Any

import factory
from django.test import Client
from django.utils import timezone
from factory.declarations import LazyAttribute, Sequence

from feed.rebuild import inbox_rebuild, synced_until
from users.models import User


class UserFactory(factory.django.DjangoModelFactory[User]):
    class Meta:
        model = User
        skip_postgeneration_save = True

    username = Sequence(lambda n: f"user{n}")
    display_name = LazyAttribute(lambda o: o.username.title())
    password = factory.django.Password("pw")
    is_active = True


def make_user(username: str | None = None, *, active: bool = True, **fields: Any) -> Any:
    """A user; ``active`` readers were seen now and their (empty) inbox is synced, as after a
    sign-in, so fan-out delivers to them."""
    if username is not None:
        fields["username"] = username
    if active:
        fields.setdefault("last_seen_at", timezone.now())
    user = UserFactory.create(**fields)
    if active and synced_until(user.last_seen_at) is not None:
        inbox_rebuild(user_id=user.pk)
    return user


def signed_in(user: Any, **defaults: Any) -> Client:
    """A test client signed in as ``user`` (``defaults``: the ``Client``'s, e.g. ``REMOTE_ADDR``)."""
    client = Client(**defaults)
    client.force_login(user)
    return client

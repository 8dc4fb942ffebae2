"""Fixtures of the Mastodon client API's tests: an application and tokens for the personas."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from django.test import Client
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application

from client_api.models import ClientApp


def make_app(
    *, name: str = "Test app", scopes: str = "read write follow push", client_id: str | None = None, secret: str = "s3cret"
) -> Application:
    app = Application(
        name=name,
        redirect_uris="urn:ietf:wg:oauth:2.0:oob",
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        client_secret=secret,
        algorithm="",
    )
    if client_id:
        app.client_id = client_id
    app.save()
    ClientApp.objects.create(application=app, scopes=scopes)
    return app


def make_token(user: Any, app: Application, *, token: str, scope: str = "read write follow push") -> AccessToken:
    return AccessToken.objects.create(
        user=user, application=app, token=token, scope=scope, expires=timezone.now() + timedelta(days=3650)
    )


FORM = "application/x-www-form-urlencoded"


class Api:
    """A client that sends ``Authorization: Bearer <token>``."""

    def __init__(self, token: str | None) -> None:
        self.client = Client()
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    def get(self, path: str, data: Any = None, **extra: Any) -> Any:
        return self.client.get(path, data, headers={**self.headers, **extra.pop("headers", {})}, **extra)

    def post(self, path: str, data: Any = None, **extra: Any) -> Any:
        return self.client.post(path, data or {}, headers={**self.headers, **extra.pop("headers", {})}, **extra)

    def delete(self, path: str, data: Any = None, **extra: Any) -> Any:
        if data is not None:
            extra.update(data=urlencode(data, doseq=True), content_type=FORM)
        return self.client.delete(path, headers={**self.headers, **extra.pop("headers", {})}, **extra)

    def put(self, path: str, data: Any = None, **extra: Any) -> Any:
        """A PUT with a form body (as Mastodon.py sends one)."""
        body = urlencode(data or {}, doseq=True)
        return self.client.put(path, body, content_type=FORM, headers={**self.headers, **extra.pop("headers", {})}, **extra)


@pytest.fixture
def oauth_app(db: Any) -> Application:
    return make_app()


@pytest.fixture
def api_alice(alice: Any, oauth_app: Application) -> Api:
    make_token(alice, oauth_app, token="alice-token")
    return Api("alice-token")


@pytest.fixture
def api_bob(bob: Any, oauth_app: Application) -> Api:
    make_token(bob, oauth_app, token="bob-token")
    return Api("bob-token")


@pytest.fixture
def api_charlie(charlie: Any, oauth_app: Application) -> Api:
    make_token(charlie, oauth_app, token="charlie-token")
    return Api("charlie-token")

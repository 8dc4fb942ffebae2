"""django-oauth-toolkit's validator, as Mastodon's OAuth behaves: an application may use the
authorization code (with or without PKCE), the refresh token and the client credentials grants,
and a token gets only scopes within those the application registered (``ClientApp.scopes``)."""

from __future__ import annotations

from typing import Any

from oauth2_provider.oauth2_validators import OAuth2Validator

from . import scopes as mastodon_scopes
from .models import ClientApp

GRANTS = frozenset({"authorization_code", "refresh_token", "client_credentials"})


def registered_scopes(application: Any) -> list[str]:
    """The scopes ``application`` registered (``read`` when it never said)."""
    found = ClientApp.objects.filter(application_id=application.pk).values_list("scopes", flat=True).first()
    return (found or "read").split()


class MastodonValidator(OAuth2Validator):  # type: ignore[misc]
    """Every grant Mastodon allows for every application; scopes bounded by the registered ones."""

    def validate_grant_type(self, client_id: str, grant_type: str, client: Any, request: Any, *args: Any, **kwargs: Any) -> bool:
        return grant_type in GRANTS

    def validate_response_type(
        self, client_id: str, response_type: str, client: Any, request: Any, *args: Any, **kwargs: Any
    ) -> bool:
        return response_type == "code"

    def validate_scopes(self, client_id: str, scopes: list[str], client: Any, request: Any, *args: Any, **kwargs: Any) -> bool:
        known = super().validate_scopes(client_id, scopes, client, request, *args, **kwargs)
        return bool(known) and mastodon_scopes.within(scopes, registered_scopes(client))

    def get_default_scopes(self, client_id: str, request: Any, *args: Any, **kwargs: Any) -> list[str]:
        return ["read"]

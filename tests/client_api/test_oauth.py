"""OAuth 2 as Mastodon speaks it: apps, authorize with consent, the code, tokens, refresh, revoke,
scopes per endpoint, and tokens of deactivated accounts."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest
from django.test import Client
from oauth2_provider.models import AccessToken, Application, Grant

from client_api.models import ClientApp
from tests.client_api.conftest import Api, make_app, make_token
from users.services import user_set_active

pytestmark = pytest.mark.django_db

OOB = "urn:ietf:wg:oauth:2.0:oob"


class TestAppsCreate:
    def test_registers_an_app_from_a_form(self, client: Client) -> None:
        response = client.post(
            "/api/v1/apps", {"client_name": "Tusky", "redirect_uris": OOB, "scopes": "read write", "website": "https://tusky.app"}
        )

        assert response.status_code == 200
        body = response.json()
        assert body["name"] == "Tusky"
        assert body["scopes"] == ["read", "write"]
        assert body["redirect_uris"] == [OOB]
        app = Application.objects.get(client_id=body["client_id"])
        assert app.client_secret != body["client_secret"]  # kept hashed
        assert ClientApp.objects.get(application=app).scopes == "read write"

    def test_registers_an_app_from_json_with_a_list_of_uris(self, client: Client) -> None:
        response = client.post(
            "/api/v1/apps",
            {"client_name": "App", "redirect_uris": ["https://a.example/cb", "https://b.example/cb"], "scopes": "read"},
            content_type="application/json",
        )

        assert response.status_code == 200
        assert response.json()["redirect_uris"] == ["https://a.example/cb", "https://b.example/cb"]

    @pytest.mark.parametrize(
        "data",
        [
            {"redirect_uris": OOB},  # no name
            {"client_name": "App"},  # no redirect URI
            {"client_name": "App", "redirect_uris": OOB, "scopes": "read nonsense"},
            {"client_name": "App", "redirect_uris": "not a uri"},
        ],
    )
    def test_refuses_bad_input_and_writes_nothing(self, client: Client, data: dict[str, str]) -> None:
        response = client.post("/api/v1/apps", data)

        assert response.status_code == 422
        assert "error" in response.json()
        assert Application.objects.count() == 0

    def test_a_malformed_json_body_is_a_400(self, client: Client) -> None:
        response = client.post("/api/v1/apps", "{nope", content_type="application/json")

        assert response.status_code == 400
        assert set(response.json()) == {"error"}


def _pkce() -> tuple[str, str]:
    verifier = "v" * 64
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


class TestCodeFlow:
    def test_sign_in_consent_code_token_refresh_and_revoke(self, alice, client: Client) -> None:
        app = make_app(secret="app-secret")
        verifier, challenge = _pkce()
        query = {
            "client_id": app.client_id,
            "response_type": "code",
            "redirect_uri": OOB,
            "scope": "read write",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        }

        signed_out = client.get("/oauth/authorize", query)
        assert signed_out.status_code == 302 and "/login/" in signed_out["Location"]
        client.force_login(alice)
        consent = client.get("/oauth/authorize", query)
        assert consent.status_code == 200
        assert b"Authorise" in consent.content
        assert "form-action" not in consent["Content-Security-Policy"]  # the answer redirects to the app
        fields = dict(re.findall(rb'name="(\w+)" value="([^"]*)"', consent.content))
        form = {key.decode(): value.decode() for key, value in fields.items()}
        shown = client.post("/oauth/authorize", {**form, "allow": "Authorize"})
        assert shown.status_code == 200
        found = re.search(rb'id="authorization-code" value="([^"]+)"', shown.content)
        assert found is not None
        code = found.group(1).decode()

        token = Client().post(
            "/oauth/token",
            {
                "grant_type": "authorization_code",
                "code": code,
                "client_id": app.client_id,
                "client_secret": "app-secret",
                "redirect_uri": OOB,
                "code_verifier": verifier,
            },
        )
        assert token.status_code == 200, token.content
        body = token.json()
        assert body["scope"] == "read write"
        assert isinstance(body["created_at"], int)
        me = Api(body["access_token"]).get("/api/v1/accounts/verify_credentials")
        assert me.status_code == 200 and me.json()["username"] == "alice"

        refreshed = Client().post(
            "/oauth/token",
            {
                "grant_type": "refresh_token",
                "refresh_token": body["refresh_token"],
                "client_id": app.client_id,
                "client_secret": "app-secret",
            },
        )
        assert refreshed.status_code == 200
        new = refreshed.json()["access_token"]
        assert Api(new).get("/api/v1/accounts/verify_credentials").status_code == 200

        revoked = Client().post("/oauth/revoke", {"token": new, "client_id": app.client_id, "client_secret": "app-secret"})
        assert revoked.status_code == 200 and revoked.json() == {}
        assert Api(new).get("/api/v1/accounts/verify_credentials").status_code == 401

    def test_a_web_apps_redirect_uri_gets_the_code(self, alice, client: Client) -> None:
        app = make_app()
        app.redirect_uris = "https://app.example/callback"
        app.save()
        client.force_login(alice)
        query = {
            "client_id": app.client_id,
            "response_type": "code",
            "redirect_uri": "https://app.example/callback",
            "scope": "read",
            "state": "s1",
        }
        consent = client.get("/oauth/authorize", query)
        form = {key.decode(): value.decode() for key, value in re.findall(rb'name="(\w+)" value="([^"]*)"', consent.content)}

        answer = client.post("/oauth/authorize", {**form, "allow": "Authorize"})

        assert answer.status_code == 302
        assert answer["Location"].startswith("https://app.example/callback?code=")
        assert "state=s1" in answer["Location"]

    def test_an_unregistered_redirect_uri_is_refused(self, alice, client: Client) -> None:
        app = make_app()
        client.force_login(alice)

        response = client.get(
            "/oauth/authorize",
            {"client_id": app.client_id, "response_type": "code", "redirect_uri": "https://evil.example/", "scope": "read"},
        )

        assert response.status_code == 400
        assert Grant.objects.count() == 0

    def test_a_code_for_scopes_beyond_the_app_is_refused(self, alice, client: Client) -> None:
        app = make_app(scopes="read")
        client.force_login(alice)

        response = client.get(
            "/oauth/authorize", {"client_id": app.client_id, "response_type": "code", "redirect_uri": OOB, "scope": "read write"}
        )

        assert response.status_code == 200
        assert b"invalid_scope" in response.content  # the out-of-band page names the refusal
        assert b"authorization-code" not in response.content
        assert Grant.objects.count() == 0

    def test_client_credentials_give_an_app_token(self) -> None:
        app = make_app(secret="app-secret")

        response = Client().post(
            "/oauth/token",
            {"grant_type": "client_credentials", "client_id": app.client_id, "client_secret": "app-secret", "scope": "read"},
        )

        assert response.status_code == 200
        token = response.json()["access_token"]
        assert Api(token).get("/api/v1/apps/verify_credentials").json()["name"] == "Test app"
        assert Api(token).get("/api/v1/accounts/verify_credentials").status_code == 422  # no account behind it

    def test_a_wrong_secret_is_refused(self) -> None:
        app = make_app(secret="app-secret")

        response = Client().post(
            "/oauth/token", {"grant_type": "client_credentials", "client_id": app.client_id, "client_secret": "wrong"}
        )

        assert response.status_code == 401
        assert response.json()["error"] == "invalid_client"
        assert AccessToken.objects.count() == 0

    def test_the_well_known_document_names_the_endpoints(self, client: Client) -> None:
        body = client.get("/.well-known/oauth-authorization-server").json()

        assert body["token_endpoint"].endswith("/oauth/token")
        assert "S256" in body["code_challenge_methods_supported"]
        assert "write:follows" in body["scopes_supported"]


class TestTokens:
    def test_no_token_is_a_401(self, client: Client) -> None:
        response = client.get("/api/v1/accounts/verify_credentials")

        assert response.status_code == 401
        assert response.json() == {"error": "The access token is invalid"}

    def test_an_unknown_token_is_a_401(self) -> None:
        assert Api("nope").get("/api/v1/timelines/home").status_code == 401

    def test_a_read_only_token_cannot_follow(self, alice, bob) -> None:
        app = make_app()
        make_token(alice, app, token="read-only", scope="read")

        response = Api("read-only").post(f"/api/v1/accounts/{bob.pk}/follow")

        assert response.status_code == 403
        assert response.json() == {"error": "This action is outside the authorized scopes"}
        assert not alice.following_edges.exists()

    def test_a_granular_scope_covers_only_its_part(self, alice, bob) -> None:
        app = make_app()
        make_token(alice, app, token="follows-only", scope="write:follows read:accounts")
        api = Api("follows-only")

        assert api.post(f"/api/v1/accounts/{bob.pk}/follow").status_code == 200
        assert api.post(f"/api/v1/accounts/{bob.pk}/block").status_code == 403
        assert api.get("/api/v1/timelines/home").status_code == 403

    def test_the_legacy_follow_scope_covers_blocks(self, alice, bob) -> None:
        app = make_app()
        make_token(alice, app, token="follow-scope", scope="follow")

        assert Api("follow-scope").post(f"/api/v1/accounts/{bob.pk}/block").status_code == 200

    def test_a_deactivated_accounts_token_is_refused(self, alice, bob, api_alice) -> None:
        user_set_active(user=alice, is_active=False)

        response = api_alice.post(f"/api/v1/accounts/{bob.pk}/follow")

        assert response.status_code == 403
        assert response.json() == {"error": "Your login is currently disabled"}
        assert not alice.following_edges.exists()

    def test_the_token_read_follows_use_tz(self, alice, oauth_app) -> None:
        """The token read keeps its converters per connection: made under another USE_TZ, they are made again."""
        from django.test import override_settings

        from client_api.selectors import access_token

        made = make_token(alice, oauth_app, token="tz-token")
        with override_settings(USE_TZ=False):
            naive = access_token("tz-token")
        found = access_token("tz-token")

        assert naive is not None and naive.pk == made.pk
        assert found is not None and (found.pk, found.user.pk, found.expires.tzinfo is not None) == (made.pk, alice.pk, True)

    def test_an_expired_token_is_a_401(self, alice, oauth_app) -> None:
        from datetime import timedelta

        from django.utils import timezone

        made = make_token(alice, oauth_app, token="old-token")
        AccessToken.objects.filter(pk=made.pk).update(expires=timezone.now() - timedelta(seconds=1))

        assert Api("old-token").get("/api/v1/accounts/verify_credentials").status_code == 401


class TestAuthorizedApps:
    def test_lists_and_revokes_the_apps_a_person_authorised(self, alice, bob, api_alice, api_bob, client: Client) -> None:
        client.force_login(alice)

        page = client.get("/settings/applications/")
        assert b"Test app" in page.content
        app_id = AccessToken.objects.get(token="alice-token").application_id
        client.post(f"/settings/applications/{app_id}/revoke")

        assert api_alice.get("/api/v1/accounts/verify_credentials").status_code == 401
        assert api_bob.get("/api/v1/accounts/verify_credentials").status_code == 200  # only alice's

    def test_needs_sign_in(self, client: Client) -> None:
        assert client.get("/settings/applications/").status_code == 302


class TestLimits:
    def test_registering_apps_is_rate_limited(self, client: Client, settings) -> None:
        settings.APP_REGISTRATION_RATE = "2/m"
        data = {"client_name": "App", "redirect_uris": OOB}
        answers = [client.post("/api/v1/apps", data).status_code for _ in range(3)]

        assert answers == [200, 200, 429]
        assert Application.objects.count() == 2

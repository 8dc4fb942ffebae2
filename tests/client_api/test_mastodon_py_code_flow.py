"""Mastodon.py, the client library, through the whole code flow against a live followfeed:
``create_app``, ``auth_request_url``, sign-in and consent in the site, the code, ``log_in(code=...)``,
a call with the new token, ``revoke_access_token``."""

from __future__ import annotations

import re
from html import unescape

import pytest
import requests

mastodon = pytest.importorskip("mastodon")

pytestmark = pytest.mark.django_db(transaction=True)

OOB = "urn:ietf:wg:oauth:2.0:oob"
SCOPES = ["read", "write", "follow"]


def hidden_fields(html: str) -> dict[str, str]:
    return {name: unescape(value) for name, value in re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', html)}


def test_mastodon_py_signs_in_through_the_site_and_revokes(live_server, user_factory) -> None:
    user_factory(username="reader", password="correct horse")
    base = live_server.url
    client_id, client_secret = mastodon.Mastodon.create_app(
        "followfeed test", api_base_url=base, redirect_uris=OOB, scopes=SCOPES
    )
    api = mastodon.Mastodon(client_id=client_id, client_secret=client_secret, api_base_url=base, version_check_mode="none")
    url = api.auth_request_url(redirect_uris=OOB, scopes=SCOPES, allow_http=True)

    browser = requests.Session()
    sign_in = browser.get(url)  # the site's sign-in page first
    assert "/login/" in sign_in.url
    consent = browser.post(
        sign_in.url,
        data={**hidden_fields(sign_in.text), "username": "reader", "password": "correct horse"},
        headers={"Referer": sign_in.url},
    )
    assert "Authorise followfeed test" in consent.text
    shown = browser.post(
        consent.url, data={**hidden_fields(consent.text), "allow": "Authorize"}, headers={"Referer": consent.url}
    )
    found = re.search(r'id="authorization-code" value="([^"]+)"', shown.text)
    assert found is not None
    code = found.group(1)
    token = api.log_in(code=code, redirect_uri=OOB, scopes=SCOPES, allow_http=True)

    assert token
    assert api.account_verify_credentials().username == "reader"
    api.revoke_access_token(allow_http=True)
    with pytest.raises(mastodon.MastodonUnauthorizedError):
        mastodon.Mastodon(access_token=token, api_base_url=base, version_check_mode="none").account_verify_credentials()

"""OAuth 2 as Mastodon speaks it, on django-oauth-toolkit: ``/oauth/authorize`` (the site's
sign-in, then a consent page; the out-of-band redirect shows the code), ``/oauth/token`` (the
answer carries ``scope`` and ``created_at``), ``/oauth/revoke``, and the settings page listing the
applications a person authorised, with revoke."""

from __future__ import annotations

import json
from typing import Any

from csp.decorators import csp_replace
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST
from oauth2_provider import views as oauth_views
from oauth2_provider.models import AccessToken, RefreshToken

from core.parsing import parse_id
from users.models import User

OOB = "urn:ietf:wg:oauth:2.0:oob"


# The consent form's answer redirects to the application's redirect URI (another site, or an app's
# own scheme): a browser applies form-action to that redirect, so this page leaves it out.
@method_decorator(csp_replace({"form-action": None}), name="dispatch")
class AuthorizeView(oauth_views.AuthorizationView):  # type: ignore[misc]
    """The consent page after the site's sign-in; the out-of-band redirect renders the code instead of redirecting to it."""

    template_name = "client_api/authorize.html"

    def redirect(self, redirect_to: str, application: Any) -> HttpResponse:
        if redirect_to.startswith(OOB):
            from urllib.parse import parse_qs, urlparse

            query = parse_qs(urlparse(redirect_to).query)
            code = query.get("code", [""])[0]
            failure = query.get("error", [""])[0]
            return render(
                self.request, "client_api/authorize_code.html", {"code": code, "error": failure, "application": application}
            )
        response: HttpResponse = super().redirect(redirect_to, application)
        return response


@method_decorator(csrf_exempt, name="dispatch")
class TokenView(oauth_views.TokenView):  # type: ignore[misc]
    """``/oauth/token``: django-oauth-toolkit's answer with Mastodon's ``created_at`` added."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.content_type == "application/json" and request.body:
            # Some clients send the token request as JSON: django-oauth-toolkit reads a form.
            try:
                data = json.loads(request.body)
            except ValueError:
                return HttpResponse(json.dumps({"error": "invalid_request"}), status=400, content_type="application/json")
            if not isinstance(data, dict):
                return HttpResponse(json.dumps({"error": "invalid_request"}), status=400, content_type="application/json")
            form = QueryDict(mutable=True)
            for key, value in data.items():
                form[key] = str(value)
            request.POST = form  # type: ignore[assignment]
        response: HttpResponse = super().post(request, *args, **kwargs)
        if response.status_code == 200:
            body = json.loads(response.content)
            token = AccessToken.objects.filter(token_checksum=_checksum(str(body.get("access_token", "")))).first()
            body["created_at"] = int(token.created.timestamp()) if token is not None else None
            body.pop("expires_in", None)  # Mastodon's tokens do not expire
            response.content = json.dumps(body).encode()
            response["Content-Type"] = "application/json"
        return response


def _checksum(raw: str) -> str:
    import hashlib

    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


@method_decorator(csrf_exempt, name="dispatch")
class RevokeView(oauth_views.RevokeTokenView):  # type: ignore[misc]
    """``/oauth/revoke``: Mastodon answers ``{}``."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response: HttpResponse = super().post(request, *args, **kwargs)
        if response.status_code == 200:
            return HttpResponse("{}", content_type="application/json")
        return response


@login_required
@require_http_methods(["GET", "HEAD"])
def authorized_apps(request: HttpRequest) -> HttpResponse:
    """/settings/applications/: the applications the signed-in person authorised, with revoke."""
    assert isinstance(request.user, User)
    tokens = AccessToken.objects.filter(user_id=request.user.pk).select_related("application").order_by("-created", "-id")
    apps: dict[int, dict[str, Any]] = {}
    for token in tokens:
        if token.application is None or token.is_expired():
            continue
        entry = apps.setdefault(
            token.application.pk, {"application": token.application, "scopes": set(), "created": token.created}
        )
        entry["scopes"].update(token.scope.split())
    return render(
        request,
        "client_api/authorized_apps.html",
        {"apps": [dict(entry, scopes=" ".join(sorted(entry["scopes"]))) for entry in apps.values()]},
    )


@login_required
@require_POST
def authorized_app_revoke(request: HttpRequest, application_id: str) -> HttpResponse:
    """POST /settings/applications/<id>/revoke: every token of that application for this person ends."""
    assert isinstance(request.user, User)
    app_id = parse_id(application_id, name="Application id")
    RefreshToken.objects.filter(user_id=request.user.pk, application_id=app_id).delete()
    AccessToken.objects.filter(user_id=request.user.pk, application_id=app_id).delete()
    return redirect("client_api:authorized_apps")

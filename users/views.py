"""Account pages: sign up, and sign in with a lockout after too many failures (sign out is Django's view)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from core import limits
from core.http import with_retry_after
from core.parsing import parse_username

from . import selectors, services
from .forms import SignInForm, SignUpForm

LOCKED_MESSAGE = "Too many failed sign-ins. Sign-in is locked for this account or address; try again in {minutes} min."


@require_http_methods(["GET", "HEAD", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    """/signup/: create an account and sign in (``SIGNUP_RATE`` sign-ups per client address).

    :raises RateLimited: too many sign-ups from this address (429).
    """
    form = SignUpForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            limits.hit(
                "signups",
                limits.client_address(request),
                "SIGNUP_RATE",
                message="Too many accounts created from here; try again later.",
            )
        except limits.RateLimited as exc:
            form.add_error(None, exc.message)
            return with_retry_after(render(request, "users/user_signup.html", {"form": form}, status=exc.status), exc)
        try:
            user = services.user_create(
                username=parse_username(form.cleaned_data["username"]),
                password=form.cleaned_data["password1"],
                display_name=form.cleaned_data.get("display_name", ""),
            )
        except services.UsernameTaken as exc:  # another sign-up took the name since the form checked
            form.add_error("username", exc.message)
            return render(request, "users/user_signup.html", {"form": form}, status=exc.status)
        login(request, user, backend=settings.AUTHENTICATION_BACKENDS[0])
        return redirect("feed:home")
    return render(request, "users/user_signup.html", {"form": form}, status=400 if request.method == "POST" else 200)


class SignInView(auth_views.LoginView):
    """/login/: Django's sign-in, locked (429, the form shown with the reason) once an account or a
    client address had too many failures in the window (``LOGIN_FAILURE_*_RATE``); the lock lifts
    when the window ends, and holds even for the right password meanwhile."""

    template_name = "users/user_login.html"
    form_class = SignInForm

    def _locked_for(self, request: HttpRequest) -> int | None:
        username = selectors.sign_in_identity(str(request.POST.get("username", "")))
        waits = [
            limits.limited("login_failures_account", username, "LOGIN_FAILURE_ACCOUNT_RATE") if username else None,
            limits.limited("login_failures_address", limits.client_address(request), "LOGIN_FAILURE_ADDRESS_RATE"),
        ]
        found = [wait for wait in waits if wait is not None]
        return max(found) if found else None

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        wait = self._locked_for(request)
        if wait is not None:
            # An unbound form: checking the password now would tell a guesser whether it was right.
            form = self.get_form_class()(request, initial={"username": str(request.POST.get("username", ""))[:150]})
            form.cleaned_data = {}
            form.add_error(None, LOCKED_MESSAGE.format(minutes=max(1, -(-wait // 60))))
            response = self.render_to_response(self.get_context_data(form=form), status=429)
            response["Retry-After"] = str(wait)
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: Any) -> HttpResponse:
        username = selectors.sign_in_identity(str(self.request.POST.get("username", "")))
        for group, who, rate in (
            ("login_failures_account", username, "LOGIN_FAILURE_ACCOUNT_RATE"),
            ("login_failures_address", limits.client_address(self.request), "LOGIN_FAILURE_ADDRESS_RATE"),
        ):
            if who:
                try:
                    limits.hit(group, who, rate, message="")
                except limits.RateLimited:
                    pass  # this failure reached the limit; the next attempt is locked
        return super().form_invalid(form)

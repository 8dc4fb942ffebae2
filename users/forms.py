"""Input validation of the account pages."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.forms import AuthenticationForm, UserCreationForm
from django.core.validators import MaxLengthValidator

from core.parsing import USERNAME_HELP, username_problem

from .models import User


class SignUpForm(UserCreationForm):  # type: ignore[type-arg]
    """Sign-up input: a username (``core.parsing``'s pattern, not reserved, unique whatever its
    case), a display name, and a password twice, checked by ``AUTH_PASSWORD_VALIDATORS`` (their
    rules are the password's help text)."""

    class Meta:
        model = User
        fields = ("username", "display_name")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        username = self.fields["username"]
        username.help_text = USERNAME_HELP
        username.validators = [MaxLengthValidator(30)]
        username.widget.attrs.update(maxlength="30", autocomplete="username", spellcheck="false")

    def clean_username(self) -> str:
        username = str(self.cleaned_data.get("username", ""))
        problem = username_problem(username)
        if problem is not None:
            raise forms.ValidationError(problem)
        if User.objects.filter(username__iexact=username).exists():
            raise forms.ValidationError("That name is taken.")
        return username


class SignInForm(AuthenticationForm):
    """Sign-in input; the lockout after too many failures is the view's (``users.views.SignInView``)."""


class DirectorySearchForm(forms.Form):
    """Directory search: a username prefix."""

    q = forms.CharField(max_length=150, required=False, label="Search by username")

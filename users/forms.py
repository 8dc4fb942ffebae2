from django import forms
from django.contrib.auth.forms import UserCreationForm

from .models import User


class SignUpForm(UserCreationForm):  # type: ignore[type-arg]
    """Sign-up input: username, display name, password twice."""

    class Meta:
        model = User
        fields = ("username", "display_name")


class DirectorySearchForm(forms.Form):
    """Directory search: a username prefix."""

    q = forms.CharField(max_length=150, required=False, label="Search by username")

"""Input validation of the feed pages."""

from __future__ import annotations

import functools
from typing import Any

from django import forms
from django.conf import settings
from django.forms.renderers import Jinja2
from django.template.loader import get_template
from django.utils.safestring import SafeString, mark_safe

from .models import LIST_TITLE_MAX_LENGTH, REPLIES_POLICIES, SPOILER_MAX_LENGTH, VISIBILITIES


class NoteForm(forms.Form):
    """The publish form: one body of 1..NOTE_MAX_LENGTH characters (read when the form is made)."""

    # Django's own widget templates in Jinja2: the home page prints this form on every load, and
    # the Django template language renders its three widgets at a higher cost. One
    # instance: a class here would build the renderer's engine again for every form.
    default_renderer = Jinja2()

    body = forms.CharField()
    # Optional: a form without them (the seed's clients, older pages) publishes a public note.
    visibility = forms.ChoiceField(choices=VISIBILITIES, required=False, label="Who sees it")
    spoiler_text = forms.CharField(max_length=SPOILER_MAX_LENGTH, required=False, strip=True, label="Content warning (optional)")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["body"] = forms.CharField(
            label="What's new?",
            max_length=int(settings.NOTE_MAX_LENGTH),
            strip=True,
            widget=forms.Textarea(attrs={"rows": 3, "placeholder": "Share a note with your followers"}),
        )


class ListForm(forms.Form):
    """A list's title (1..LIST_TITLE_MAX_LENGTH characters) and whether it is exclusive."""

    title = forms.CharField(max_length=LIST_TITLE_MAX_LENGTH, strip=True, label="Title")
    replies_policy = forms.ChoiceField(choices=REPLIES_POLICIES, required=False, label="Replies shown")
    exclusive = forms.BooleanField(required=False, label="Keep its members' notes out of Home")


class ListMemberForm(forms.Form):
    """An account to add to or remove from a list, by username."""

    username = forms.CharField(max_length=150, strip=True, label="Username")


def publish_fields_html(form: NoteForm) -> SafeString:
    """The publish form's labels, fields and (bound) errors as the home page prints them; an
    unbound form's are rendered once per process (they print nothing but settings)."""
    if form.is_bound:
        return _publish_fields(form)
    return _unbound_publish_fields(int(settings.NOTE_MAX_LENGTH))


@functools.lru_cache(maxsize=4)
def _unbound_publish_fields(max_length: int) -> SafeString:
    # The key: the one setting an unbound form prints (the body's maxlength).
    return _publish_fields(NoteForm())


def _publish_fields(form: NoteForm) -> SafeString:
    return mark_safe(get_template("feed/_publish_fields.html", using="jinja2").render({"form": form}))  # noqa: S308 - Jinja2 escaped every value

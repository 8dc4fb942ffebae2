"""Input validation of the feed pages."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings

from .models import SPOILER_MAX_LENGTH, VISIBILITIES


class NoteForm(forms.Form):
    """The publish form: one body of 1..NOTE_MAX_LENGTH characters (read when the form is made)."""

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

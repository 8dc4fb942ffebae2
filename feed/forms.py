"""Input validation of the feed pages."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings


class NoteForm(forms.Form):
    """The publish form: one body of 1..NOTE_MAX_LENGTH characters (read when the form is made)."""

    body = forms.CharField()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["body"] = forms.CharField(
            label="What's new?",
            max_length=int(settings.NOTE_MAX_LENGTH),
            strip=True,
            widget=forms.Textarea(attrs={"rows": 3, "placeholder": "Share a note with your followers"}),
        )

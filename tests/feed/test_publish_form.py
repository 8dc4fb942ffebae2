"""The home page's publish form (``feed.forms.publish_fields_html``): an unbound form's fields are
rendered once per process, and print what a fresh render prints; a refused post shows its own
errors and text, never the kept empty form."""

from __future__ import annotations

from typing import Any

import pytest
from django.template.loader import get_template

from feed.forms import NoteForm, publish_fields_html
from tests.support.accounts import signed_in

pytestmark = pytest.mark.django_db


def fresh(form: NoteForm) -> str:
    return get_template("feed/_publish_fields.html", using="jinja2").render({"form": form})


def test_the_kept_fields_are_a_fresh_render(settings: Any) -> None:
    settings.NOTE_MAX_LENGTH = 500
    assert str(publish_fields_html(NoteForm())) == fresh(NoteForm())
    assert 'maxlength="500"' in str(publish_fields_html(NoteForm()))

    settings.NOTE_MAX_LENGTH = 123

    assert 'maxlength="123"' in str(publish_fields_html(NoteForm()))


def test_a_refused_post_shows_its_errors_and_text(alice: Any) -> None:
    client = signed_in(alice)
    client.get("/home")  # the empty form kept

    too_long = "x" * 10_000
    response = client.post("/notes/", {"body": too_long})

    html = response.content.decode()
    assert response.status_code == 400
    assert 'class="errorlist"' in html
    assert too_long in html
    assert 'class="errorlist"' not in client.get("/home").content.decode()

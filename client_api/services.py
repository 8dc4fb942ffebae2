"""Writes of the Mastodon client API: registering an application, publishing a note once per
``Idempotency-Key``, and a client's dismissals of notifications. Follows, blocks, mutes and notes
themselves go through followfeed's own services (``social``, ``feed``)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from oauth2_provider.models import Application

from core.errors import InvalidInput
from feed.models import Note
from feed.services import note_create
from users.models import User

from .models import ClientApp, NotificationDismissal, StatusIdempotency
from .scopes import allows

OOB = "urn:ietf:wg:oauth:2.0:oob"


@dataclass(frozen=True)
class Registered:
    """A new application and its ``client_secret`` in clear (shown once: the row keeps a hash)."""

    application: Application
    client_secret: str
    scopes: str
    website: str


def app_register(
    *, name: str, redirect_uris: list[str], scopes: list[str], website: str = "", known_scopes: set[str]
) -> Registered:
    """Register an OAuth application (``POST /api/v1/apps``).

    :raises InvalidInput: no name, no redirect URI, an invalid redirect URI or an unknown scope.
    """
    if not name.strip():
        raise InvalidInput("Validation failed: Application name can't be blank", status=422)
    if not redirect_uris:
        raise InvalidInput("Validation failed: Redirect URI can't be blank", status=422)
    unknown = [scope for scope in scopes if scope not in known_scopes]
    if unknown:
        raise InvalidInput(f"Validation failed: Scopes are invalid ({', '.join(unknown)})", status=422)
    secret = secrets.token_urlsafe(32)

    def application(uris: list[str]) -> Application:
        return Application(
            name=name.strip()[:255],
            redirect_uris=" ".join(uris),
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            client_secret=secret,
            algorithm="",
        )

    # django-oauth-toolkit's validator refuses the out-of-band URI (it has no host): it is checked
    # here, the others there.
    others = [uri for uri in redirect_uris if uri != OOB]
    if others:
        try:
            application(others).full_clean(exclude=["user", "client_id", "client_secret"])
        except ValidationError:
            raise InvalidInput("Validation failed: Redirect URI must be an absolute URI.", status=422) from None
    app = application(redirect_uris)
    scope_text = " ".join(scopes) or "read"
    with transaction.atomic():
        app.save()
        ClientApp.objects.create(application=app, scopes=scope_text, website=website[:500])
    return Registered(application=app, client_secret=secret, scopes=scope_text, website=website)


def status_publish(
    *, author: User, body: str, idempotency_key: str | None, visibility: str = "public", spoiler_text: str = ""
) -> Note:
    """Publish ``body`` as ``author`` through ``feed.services.note_create``; with
    ``idempotency_key``, a repeat of the key returns the note the first request created.

    :raises NoteInvalidError, NoteForbiddenError, RateLimited: as ``note_create``.
    """
    if not idempotency_key:
        return note_create(author=author, body=body, visibility=visibility, spoiler_text=spoiler_text)
    key = idempotency_key[:200]
    earlier = StatusIdempotency.objects.filter(user_id=author.pk, key=key).values_list("note_id", flat=True).first()
    if earlier is not None:
        return Note.objects.get(pk=earlier)
    try:
        with transaction.atomic():
            note = note_create(author=author, body=body, visibility=visibility, spoiler_text=spoiler_text)
            StatusIdempotency.objects.create(user_id=author.pk, key=key, note_id=note.pk)
    except IntegrityError:  # a concurrent request with the same key won: its note, not a second one
        return Note.objects.get(pk=StatusIdempotency.objects.get(user_id=author.pk, key=key).note_id)
    return note


def notification_dismiss(*, recipient: User, notification_id: int, created_at: datetime) -> None:
    """Hide one notification from ``recipient``'s clients, as it stands now."""
    NotificationDismissal.objects.update_or_create(
        recipient_id=recipient.pk, notification_id=notification_id, defaults={"up_to": created_at}
    )


def notifications_clear(*, recipient: User) -> None:
    """Hide every notification of ``recipient`` so far from its clients."""
    with transaction.atomic():
        updated = NotificationDismissal.objects.filter(recipient_id=recipient.pk, notification_id__isnull=True).update(
            up_to=timezone.now()
        )
        if not updated:
            NotificationDismissal.objects.create(recipient_id=recipient.pk, notification_id=None, up_to=timezone.now())
        NotificationDismissal.objects.filter(recipient_id=recipient.pk, notification_id__isnull=False).delete()


def covers(granted: str, required: str) -> bool:
    """Whether the space-separated scopes ``granted`` cover ``required``."""
    return allows(granted.split(), required)

"""What the Mastodon client API keeps beside django-oauth-toolkit's tables: an app's scopes
(``ClientApp``: a token gets only scopes within them), the note an ``Idempotency-Key`` created
(``StatusIdempotency``: a retry returns it), and dismissed notifications (``NotificationDismissal``;
followfeed's own rows stay, and one that comes back shows again).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from oauth2_provider.models import Application


class ClientApp(models.Model):
    """The Mastodon side of an OAuth ``application``: its registered ``scopes`` and ``website``."""

    application = models.OneToOneField(Application, on_delete=models.CASCADE, primary_key=True, related_name="client_app")
    scopes = models.CharField(max_length=500, default="read")
    website = models.URLField(max_length=500, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.application_id}: {self.scopes}"


class StatusIdempotency(models.Model):
    """``user``'s POST /api/v1/statuses with ``key`` created ``note_id``."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=200)
    note_id = models.BigIntegerField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="status_idempotency_unique")]

    def __str__(self) -> str:
        return f"{self.user_id} {self.key} -> {self.note_id}"


class NotificationDismissal(models.Model):
    """``recipient`` dismissed notification ``notification_id`` as it stood at ``up_to`` (its
    ``created_at``); ``notification_id`` None: every notification up to ``up_to`` (``/clear``)."""

    recipient = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    notification_id = models.BigIntegerField(null=True, blank=True)
    up_to = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["recipient", "notification_id"], name="notification_dismissal_unique")]

    def __str__(self) -> str:
        return f"{self.recipient_id} dismissed {self.notification_id or 'all'} up to {self.up_to}"

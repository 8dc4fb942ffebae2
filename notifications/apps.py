from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "notifications"

    def ready(self) -> None:
        from django.db.models.signals import pre_delete

        from social.signals import follow_created, follow_request_approved, follow_requested
        from users.models import User

        from . import outbox, receivers  # noqa: F401 - outbox registers the notification kinds

        follow_created.connect(receivers.on_followed, dispatch_uid="notifications.on_follow")
        follow_requested.connect(receivers.on_follow_requested, dispatch_uid="notifications.on_follow_request")
        follow_request_approved.connect(receivers.on_request_approved, dispatch_uid="notifications.on_request_approved")
        pre_delete.connect(receivers.on_user_deleted, sender=User, dispatch_uid="notifications.purge_deleted_user")

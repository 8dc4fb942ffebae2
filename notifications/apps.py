from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "notifications"

    def ready(self) -> None:
        from django.db.models.signals import pre_delete

        from social.signals import block_created, follow_created, follow_request_approved, follow_request_ended, follow_requested
        from users.account_rows import read_with_session
        from users.models import User
        from users.signals import user_activity_changed

        from . import outbox, receivers  # noqa: F401 - outbox registers the notification kinds
        from .redis_keys import unread_key

        # The unread count of every page's header comes with the session's read.
        read_with_session(unread_key)

        follow_created.connect(receivers.on_followed, dispatch_uid="notifications.on_follow")
        follow_requested.connect(receivers.on_follow_requested, dispatch_uid="notifications.on_follow_request")
        follow_request_approved.connect(receivers.on_request_approved, dispatch_uid="notifications.on_request_approved")
        follow_request_ended.connect(receivers.on_follow_request_ended, dispatch_uid="notifications.on_follow_request_ended")
        block_created.connect(receivers.on_block_created, dispatch_uid="notifications.on_block_created")
        user_activity_changed.connect(receivers.on_user_activity_changed, dispatch_uid="notifications.on_user_activity_changed")
        pre_delete.connect(receivers.on_user_deleted, sender=User, dispatch_uid="notifications.purge_deleted_user")

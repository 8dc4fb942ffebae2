from django.apps import AppConfig


class SocialConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "social"

    def ready(self) -> None:
        from django.db.models.signals import pre_delete

        from users.models import User
        from users.signals import user_activity_changed

        from . import outbox, receivers, transfer  # noqa: F401 - outbox and transfer register their kinds

        user_activity_changed.connect(receivers.on_user_activity_changed, dispatch_uid="social.remirror_on_activity")
        pre_delete.connect(receivers.on_user_deleted, sender=User, dispatch_uid="social.remirror_deleted_user")

from django.apps import AppConfig


class UsersConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "users"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in
        from django.core.signals import request_started
        from django.db.models.signals import post_delete, post_save

        from . import receivers
        from .models import User
        from .signals import accounts_updated

        user_logged_in.connect(receivers.on_user_logged_in, dispatch_uid="users.touch_last_seen")
        post_save.connect(receivers.on_user_saved, sender=User, dispatch_uid="users.account_version_saved")
        post_delete.connect(receivers.on_user_deleted, sender=User, dispatch_uid="users.account_version_deleted")
        accounts_updated.connect(receivers.on_accounts_updated, dispatch_uid="users.account_version_updated")
        request_started.connect(receivers.on_request_started, dispatch_uid="users.forget_session_reads")

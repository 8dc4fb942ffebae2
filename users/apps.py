from django.apps import AppConfig


class UsersConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "users"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in

        from . import receivers

        user_logged_in.connect(receivers.on_user_logged_in, dispatch_uid="users.touch_last_seen")

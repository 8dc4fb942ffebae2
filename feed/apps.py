from django.apps import AppConfig


class FeedConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "feed"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in
        from django.db.models.signals import pre_delete

        from social.signals import follow_created, follow_deleted, mute_changed
        from users.models import User
        from users.signals import user_activity_changed

        from . import outbox, receivers  # noqa: F401 - outbox registers the feed's kinds

        follow_created.connect(receivers.on_follow_changed, dispatch_uid="feed.backfill_on_follow")
        follow_deleted.connect(receivers.on_follow_changed, dispatch_uid="feed.clean_on_unfollow")
        follow_deleted.connect(receivers.on_follow_deleted, dispatch_uid="feed.lists_on_unfollow")
        mute_changed.connect(receivers.on_mute_changed, dispatch_uid="feed.refresh_on_mute")
        user_activity_changed.connect(receivers.on_user_activity_changed, dispatch_uid="feed.refresh_on_activity")
        pre_delete.connect(receivers.on_user_deleted, sender=User, dispatch_uid="feed.purge_deleted_user")
        # Connected after users' receiver (users comes first in INSTALLED_APPS),
        # so last_seen_at is already the sign-in time when this runs.
        user_logged_in.connect(receivers.on_user_logged_in, dispatch_uid="feed.catch_up_on_sign_in")

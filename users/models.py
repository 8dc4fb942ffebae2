from typing import Any, ClassVar

from django.contrib.auth.models import AbstractUser, UserManager
from django.db import models, transaction

from core.parsing import USERNAME_HELP, validate_display_name, validate_username

from .signals import accounts_updated


class UserQuerySet(models.QuerySet["User"]):
    """Deletes lock the accounts' rows before Django collects what cascades with them; updates
    send ``accounts_updated`` (``users.signals``), so the accounts' version changes as on a save."""

    def update(self, **kwargs: Any) -> int:
        """``QuerySet.update`` of the accounts, locked first, sending ``accounts_updated`` in the
        same transaction (not for ``User.UNVERSIONED_FIELDS`` alone): its receiver records the
        accounts' new version, so no process keeps serving a row from before.

        :returns: the number of rows matched.
        """
        if set(kwargs) <= User.UNVERSIONED_FIELDS:
            return super().update(**kwargs)
        with transaction.atomic(using=self.db):
            ids = list(self.select_for_update().values_list("pk", flat=True))
            if not ids:
                return 0
            accounts_updated.send(sender=User, user_ids=ids, fields=sorted(kwargs))
            return super().update(**kwargs)

    def delete(self) -> tuple[int, dict[str, int]]:
        """Delete the accounts, their rows locked first (``User.delete``'s reason).

        :returns: as ``QuerySet.delete``.
        """
        with transaction.atomic(using=self.db):
            # The lock comes before the collection of the rows that cascade: a follow or a
            # notification inserted meanwhile waits on the account's row (its foreign key
            # check) and then finds it gone, instead of failing the account's DELETE.
            list(self.select_for_update().values_list("pk", flat=True))
            return super().delete()


class AccountManager(UserManager["User"]):
    """``UserManager`` over ``UserQuerySet``."""

    def get_queryset(self) -> UserQuerySet:
        return UserQuerySet(self.model, using=self._db)


class User(AbstractUser):
    """An account: username, display name, bio, date joined and active flag.

    ``is_active`` False: deactivated (its follows stop counting and leave Redis; reactivation
    restores them). ``last_seen_at``: fan-out delivers only to recent readers (``FEED_ACTIVE_DAYS``).
    ``approve_followers``: private (follows become ``social.FollowRequest``s).
    """

    # One rule for every way an account is made or renamed (sign-up, the admin, a model's
    # full_clean): Django's default accepts "+1+2" or "@SUM", which a spreadsheet runs.
    username = models.CharField(
        "username",
        max_length=150,
        unique=True,
        help_text=USERNAME_HELP,
        validators=[validate_username],
        error_messages={"unique": "A user with that username already exists."},
    )
    display_name = models.CharField(max_length=100, blank=True, validators=[validate_display_name])
    bio = models.TextField(max_length=500, blank=True)
    last_seen_at = models.DateTimeField(null=True, blank=True, db_index=True)
    approve_followers = models.BooleanField(default=False)

    objects: ClassVar[AccountManager] = AccountManager()

    # Written at sign-in and on a visit (at most every few minutes): a write of only these leaves
    # the account's version (users.account_rows), so signing in records nothing. No request shows
    # them; user_touch_seen, which compares last_seen_at, updates its process's kept row itself.
    UNVERSIONED_FIELDS: ClassVar[frozenset[str]] = frozenset({"last_login", "last_seen_at"})

    def delete(self, using: Any = None, keep_parents: bool = False) -> tuple[int, dict[str, int]]:
        """Delete the account, its row locked before the cascade is collected (``UserQuerySet.delete``)."""
        with transaction.atomic(using=using):
            list(User.objects.using(using).select_for_update().filter(pk=self.pk).values_list("pk", flat=True))
            return super().delete(using=using, keep_parents=keep_parents)

    @property
    def shown_name(self) -> str:
        return self.display_name or self.username

    def __str__(self) -> str:
        return self.username


HOME = "home"
NOTIFICATIONS = "notifications"
MARKER_TIMELINES = (HOME, NOTIFICATIONS)


class Marker(models.Model):
    """Where ``user`` stopped reading ``timeline`` (``home``: a note id; ``notifications``: a
    notification id), Mastodon's Marker; ``version`` rises with every write (optimistic locking).
    Not mirrored in Redis.
    """

    user = models.ForeignKey("users.User", on_delete=models.CASCADE, related_name="markers")
    timeline = models.CharField(max_length=20, choices=[(name, name) for name in MARKER_TIMELINES])
    last_read_id = models.PositiveBigIntegerField(default=0)
    version = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "timeline"], name="marker_one_per_timeline")]

    def __str__(self) -> str:
        return f"{self.user_id} {self.timeline} {self.last_read_id}"

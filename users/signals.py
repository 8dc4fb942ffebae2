"""Signals of accounts.

``user_activity_changed`` is sent by ``users.services.user_set_active``
inside the transaction that deactivated or reactivated an account, with
``user_id`` and ``is_active``; the follow mirror and the feed record their
outbox entries in it.

``accounts_updated`` is sent by ``UserQuerySet.update`` inside the transaction that updated the
accounts, with ``user_ids`` (the rows it locked and updated) and ``fields`` (the names set); not
for ``User.UNVERSIONED_FIELDS`` alone.
"""

from django.dispatch import Signal

user_activity_changed = Signal()
accounts_updated = Signal()

"""Signals of accounts.

``user_activity_changed`` is sent by ``users.services.user_set_active``
inside the transaction that deactivated or reactivated an account, with
``user_id`` and ``is_active``; the follow mirror and the feed record their
outbox entries in it.
"""

from django.dispatch import Signal

user_activity_changed = Signal()

"""Signals of the follow graph, sent by ``social.services`` inside the transaction of the change.

``follow_created``/``follow_deleted`` carry ``follower_id`` and
``followee_id`` (ints). Receivers record their own outbox entries
(``core.outbox.record``) in the same transaction, so their side effects are
exactly as durable as the follow; they never touch Redis themselves.
"""

from django.dispatch import Signal

follow_created = Signal()
follow_deleted = Signal()

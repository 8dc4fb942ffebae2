"""Signals of the follow graph, sent by ``social.services`` inside the transaction of the change.

``follow_created``/``follow_deleted`` carry ``follower_id`` and
``followee_id`` (ints); ``follow_requested`` (a private account was asked)
and ``follow_request_approved`` carry ``requester_id`` and ``target_id``;
``mute_changed`` (a mute made, changed, lifted or expired) ``muter_id`` and
``muted_id``; ``follow_request_ended`` (a pending request withdrawn, rejected,
approved or dropped) ``requester_id`` and ``target_id``; ``block_created``
``blocker_id`` and ``blocked_id``. Receivers record their own outbox entries
(``core.outbox.record``) in the same transaction, so their side effects are
exactly as durable as the follow; they never touch Redis themselves.
"""

from django.dispatch import Signal

follow_created = Signal()
follow_deleted = Signal()
follow_requested = Signal()
mute_changed = Signal()
follow_request_approved = Signal()
follow_request_ended = Signal()
block_created = Signal()

"""Signals of the follow graph, sent by ``social.services`` after commit.

``follow_created``/``follow_deleted`` carry ``follower_id`` and
``followee_id`` (ints); the feed listens to backfill and clean inboxes.
"""

from django.dispatch import Signal

follow_created = Signal()
follow_deleted = Signal()

"""The database router: writes and trusted reads on the primary, page reads on the replica.

``ReplicaRouter`` sends a read to ``replica`` only inside ``core.replica.page_reads()`` (no
``primary_reads()``), outside an atomic block on the primary, and for a model not in
``PRIMARY_ONLY_APP_LABELS``; everything else goes to ``default``.
"""

from __future__ import annotations

from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Model

from .replica import REPLICA_ALIAS, reads_may_use_replica, replica_configured

# Sessions: a GET may save the session it loaded (messages, a rotated key),
# and a sign-in must hold on the very next request. The database cache
# (``core.cache``, the abuse limits while Redis is down) counts by read,
# then write.
PRIMARY_ONLY_APP_LABELS = frozenset({"sessions", "django_cache"})


class ReplicaRouter:
    """Route reads to ``replica`` inside page reads (see the module docstring), all else to ``default``."""

    def db_for_read(self, model: type[Model], **hints: Any) -> str:
        """``"replica"`` for a page read, else ``"default"`` (never None, or Django would route related rows by the instance hint)."""
        if not reads_may_use_replica() or not replica_configured():
            return DEFAULT_DB_ALIAS
        if model._meta.app_label in PRIMARY_ONLY_APP_LABELS:
            return DEFAULT_DB_ALIAS
        if connections[DEFAULT_DB_ALIAS].in_atomic_block:
            return DEFAULT_DB_ALIAS
        return REPLICA_ALIAS

    def db_for_write(self, model: type[Model], **hints: Any) -> str:
        """Always ``"default"``: the replica is read-only."""
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1: Model, obj2: Model, **hints: Any) -> bool | None:
        """True between rows of the primary and the replica (the same data); None otherwise."""
        both = {obj1._state.db, obj2._state.db}
        if both <= {DEFAULT_DB_ALIAS, REPLICA_ALIAS}:
            return True
        return None

    def allow_migrate(self, db: str, app_label: str, model_name: str | None = None, **hints: Any) -> bool:
        """Migrate the primary only; the replica gets the schema through replication."""
        return db == DEFAULT_DB_ALIAS

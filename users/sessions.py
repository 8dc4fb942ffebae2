"""Sessions (``SESSION_ENGINE = "users.sessions"``): ``core.sessions``' store, whose read of a
session this process has met before also brings its account's version token and the keys higher
apps asked for (``account_rows.read_with_session``), in the same round trip (``MGET`` on one Redis
server), for ``users.account_rows``. On a cluster the two keys are on
different slots: the session is read alone and the token by its own read.
Design: docs/architecture.md#the-signed-in-account.
"""

from __future__ import annotations

from typing import Any

from core import sessions
from core.cluster import is_cluster
from core.redis import failures_seen, mirror_ready

from . import account_rows, redis_keys


class SessionStore(sessions.SessionStore):
    """``core.sessions.SessionStore`` that reads the account's token with the session (see the module)."""

    def load(self) -> dict[str, Any]:
        """As ``core.sessions.SessionStore.load``; the session's account is remembered for its next read."""
        data = super().load()
        account_rows.learn_session(self.session_key, data)
        return data

    def _cached_data(self) -> dict[str, Any] | None:
        account_rows.token_read(None)
        account_rows.values_read(None)
        user_id = account_rows.session_account(self.session_key)
        if user_id is None:
            return super()._cached_data()
        return self._cache_call(lambda: self._read_with_token(user_id))

    def _read_with_token(self, user_id: int) -> dict[str, Any] | None:
        """The cached copy (as ``_cached_data``) and, on one server, account ``user_id``'s token
        beside it (``account_rows.token_read``). :raises: ``REDIS_ERRORS``."""
        client = self._cache.client.get_client(write=False)  # type: ignore[attr-defined]
        token_key = redis_keys.account_version_key(user_id)
        if is_cluster(client) or not mirror_ready(client, [token_key]):
            return self._cache.get(self.cache_key)  # type: ignore[no-any-return]
        companions = account_rows.companion_keys(user_id)
        failures = failures_seen()
        value, token, *found = client.mget([self._cache.make_key(self.cache_key), token_key, *companions])
        account_rows.token_read((user_id, account_rows.token_of(client, user_id, token), failures))
        account_rows.values_read(dict(zip(companions, found)))
        return None if value is None else self._cache.client.decode(value)  # type: ignore[attr-defined]

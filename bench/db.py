"""Databases of the benchmark: created (and dropped for ``--fresh``) before Django connects to them."""

from __future__ import annotations

from typing import Any

import environ


def _server_params(url: str) -> tuple[dict[str, Any], str]:
    config = environ.Env.db_url_config(url)
    if config["ENGINE"] != "django.db.backends.mysql":
        raise SystemExit(f"the benchmark needs MariaDB/MySQL, not {config['ENGINE']} ({url})")
    params: dict[str, Any] = {"host": config.get("HOST") or "127.0.0.1", "user": config.get("USER") or "root"}
    if config.get("PASSWORD"):
        params["passwd"] = config["PASSWORD"]
    if config.get("PORT"):
        params["port"] = int(config["PORT"])
    return params, str(config["NAME"])


def database_name(url: str) -> str:
    """The database name in a ``mysql://`` URL."""
    return _server_params(url)[1]


def with_suffix(url: str, suffix: str) -> str:
    """The same URL naming database ``<name><suffix>``."""
    name = database_name(url)
    head, _, tail = url.partition(f"/{name}")
    return f"{head}/{name}{suffix}{tail}"


def ensure_database(url: str, *, fresh: bool = False) -> bool:
    """Create the database of ``url`` if it is missing (utf8mb4); ``fresh`` drops it first.

    :returns: True when the database was created now.
    """
    import MySQLdb

    params, name = _server_params(url)
    if not name.replace("_", "").isalnum():
        raise SystemExit(f"refusing database name {name!r}")
    conn = MySQLdb.connect(**params)
    try:
        cursor = conn.cursor()
        if fresh:
            cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
        cursor.execute("SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", [name])
        if cursor.fetchone() is not None:
            return False
        cursor.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        return True
    finally:
        conn.close()

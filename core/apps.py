from django.apps import AppConfig


class CoreConfig(AppConfig):
    """What every app shares: the Redis client and breaker, cursor paging, the JSON
    envelope, domain errors, the transactional outbox, exit codes, display filters."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "core"

    def ready(self) -> None:
        from django.urls import register_converter

        from . import outbox  # noqa: F401 - the registry the other apps fill
        from .http import IdConverter

        register_converter(IdConverter, "id")
        # The embedded Valkey server (REDIS_URL empty) is not started here: the first Redis
        # connection of a process starts it (core.embedded.EmbeddedConnection), so commands that
        # never touch Redis (--help, check, migrate) leave none behind.

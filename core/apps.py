from django.apps import AppConfig


class CoreConfig(AppConfig):
    """What every app shares: the Redis client and breaker, cursor paging, the JSON
    envelope, domain errors, the transactional outbox, exit codes, display filters."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "core"

    def ready(self) -> None:
        from django.core.signals import request_finished, request_started
        from django.urls import register_converter

        from . import outbox  # noqa: F401 - the registry the other apps fill
        from .connections import remember_request_end, skip_recent_health_checks
        from .http import IdConverter

        register_converter(IdConverter, "id")
        # Connected after django.db's close_old_connections (connected at its import), so they run after it.
        request_started.connect(skip_recent_health_checks, dispatch_uid="core.skip_recent_health_checks")
        request_finished.connect(remember_request_end, dispatch_uid="core.remember_request_end")
        # The embedded Valkey server (REDIS_URL empty) is not started here: the first Redis
        # connection of a process starts it (core.embedded.EmbeddedConnection), so commands that
        # never touch Redis (--help, check, migrate) leave none behind.

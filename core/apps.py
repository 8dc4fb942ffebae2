from django.apps import AppConfig
from django.conf import settings


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

        if settings.REDIS_EMBEDDED:
            from .embedded import EmbeddedRedis

            # Every process of the embedded default shares one server; the first starts it.
            EmbeddedRedis(settings.FOLLOWFEED_VAR_DIR).ensure_running()

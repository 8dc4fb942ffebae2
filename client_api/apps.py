from django.apps import AppConfig


class ClientApiConfig(AppConfig):
    """The Mastodon client API: another edge over followfeed's own services and selectors."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "client_api"
    verbose_name = "Mastodon client API"

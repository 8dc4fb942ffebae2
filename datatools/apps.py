from django.apps import AppConfig


class DatatoolsConfig(AppConfig):
    """Data tooling above the domain apps: graph import, datasets, the celebrity maker, the activity replay and the demo."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "datatools"

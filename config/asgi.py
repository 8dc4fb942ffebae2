"""ASGI entry point of the streaming process (uvicorn config.asgi:application): the same Django
project, whose async views in ``client_api.streams`` hold the server-sent event streams; every
other address answers too (through Django's sync-to-async), so a test or ``make run`` may point a
Mastodon client at it alone."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")
application = get_asgi_application()

"""Production settings: every service is required, nothing falls back to the embedded default.

A missing ``DATABASE_URL``, ``REDIS_URL``, ``CELERY_BROKER_URL`` or ``DJANGO_SECRET_KEY`` raises
``ImproperlyConfigured`` naming it. Behind a TLS proxy (``DJANGO_SECURE_PROXY_SSL_HEADER``):
HTTPS redirect, secure cookies, HSTS; WhiteNoise serves ``STATIC_ROOT``. See docs/operations.md#production.
"""

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .base import MIDDLEWARE, env


def required(name: str) -> str:
    """The value of the environment variable ``name``.

    :raises ImproperlyConfigured: it is unset or empty.
    """
    value = str(env(name, default=""))
    if not value:
        raise ImproperlyConfigured(
            f"{name} is not set. Production needs it (config.settings.production; see the README's "
            "'Processes in production'); the embedded default is only for `make run`."
        )
    return value


SECRET_KEY = required("DJANGO_SECRET_KEY")
for _name in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL"):
    required(_name)
DEBUG = False

# Database connections are kept for a minute and checked before reuse after an idle spell
# (core.connections: a connection busy a moment ago is not pinged again per request).
CONN_MAX_AGE = env.int("CONN_MAX_AGE", default=60)
CONN_HEALTH_CHECKS = True
from .base import DATABASES  # noqa: E402

DATABASES["default"]["CONN_MAX_AGE"] = CONN_MAX_AGE
DATABASES["default"]["CONN_HEALTH_CHECKS"] = CONN_HEALTH_CHECKS

# --- HTTPS behind the proxy ------------------------------------------------
_proxy_header = env("DJANGO_SECURE_PROXY_SSL_HEADER", default="X-Forwarded-Proto")
SECURE_PROXY_SSL_HEADER = ("HTTP_" + _proxy_header.upper().replace("-", "_"), "https") if _proxy_header else None
SECURE_SSL_REDIRECT = env.bool("DJANGO_SECURE_SSL_REDIRECT", default=True)
SESSION_COOKIE_SECURE = env.bool("DJANGO_SECURE_COOKIES", default=True)
CSRF_COOKIE_SECURE = env.bool("DJANGO_SECURE_COOKIES", default=True)
SECURE_HSTS_SECONDS = env.int("DJANGO_SECURE_HSTS_SECONDS", default=31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
SECURE_HSTS_PRELOAD = env.bool("DJANGO_SECURE_HSTS_PRELOAD", default=True)
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

# --- static files -----------------------------------------------------------
# WhiteNoise serves the hashed, compressed files collectstatic wrote, right
# after the security middleware (so a redirect to HTTPS comes first).
_security = MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1
MIDDLEWARE = [*MIDDLEWARE[:_security], "whitenoise.middleware.WhiteNoiseMiddleware", *MIDDLEWARE[_security:]]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

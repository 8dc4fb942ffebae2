"""Settings shared by every environment, read from environment variables.

Unset, followfeed runs embedded (SQLite and a Valkey server in ``FOLLOWFEED_VAR_DIR``, Celery
eager); ``DATABASE_URL``, ``REDIS_URL`` and ``CELERY_BROKER_URL`` switch each piece to the real
service. ``.env`` is read only when ``DJANGO_READ_DOT_ENV_FILE`` is true. See docs/operations.md#configuration.
"""

from pathlib import Path

import django_stubs_ext
import environ
from celery.schedules import crontab
from csp import constants as csp_constants

# Lets the admin and querysets be subscripted at run time (ModelAdmin[Note]), as mypy sees them.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parents[2]

env = environ.Env()
# Only when asked: a copied .env.example must not turn the embedded default
# into a run that needs services.
if env.bool("DJANGO_READ_DOT_ENV_FILE", default=False):
    environ.Env.read_env(env("DJANGO_DOT_ENV_FILE", default=str(BASE_DIR / ".env")))

# Where the embedded default keeps its SQLite database and Valkey server.
FOLLOWFEED_VAR_DIR = Path(env("FOLLOWFEED_VAR_DIR", default=str(BASE_DIR / "var")))

SECRET_KEY = env("DJANGO_SECRET_KEY", default="dev-only-insecure-key-change-me")
DEBUG = env.bool("DJANGO_DEBUG", default=False)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "core",
    "users",
    "social",
    "notifications",
    "feed",
    "datatools",
    "oauth2_provider",
    "corsheaders",
    "client_api",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Before CommonMiddleware, so a redirect or a preflight carries the CORS headers too.
    "corsheaders.middleware.CorsMiddleware",
    # Outside CommonMiddleware, so its answers (a 400 for a bad Host) carry the headers too.
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # Last, so it sees the exceptions views raise: domain errors -> 4xx, the API's failures -> the envelope.
    "core.errors.DomainErrorMiddleware",
    # Before django-prometheus's PrometheusAfterMiddleware (appended below), which parses the
    # header; its BadRequest is answered by handler400 (the envelope for a JSON client).
    "core.http.ContentLengthMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
AUTH_USER_MODEL = "users.User"
AUTHENTICATION_BACKENDS = [
    # ModelBackend with the per-request read of the account in raw SQL (users.backends).
    "users.backends.AccountBackend",
    # Only for the sessions signed in before AccountBackend: they name this one.
    "django.contrib.auth.backends.ModelBackend",
]
LOGIN_URL = "users:login"
LOGIN_REDIRECT_URL = "feed:home"
LOGOUT_REDIRECT_URL = "social:directory"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "notifications.context_processors.unread",
                # Last: the page's CSRF token masked once, not at each form (after Django's own).
                "core.context_processors.csrf",
            ],
        },
    },
    {
        # The most loaded pages (home, profile, followers and following), the rows every page
        # repeats and the layout's parts (core.jinja2): Jinja2 renders them for a fraction of the
        # Django template language's cost. A page name the first engine does not have is looked
        # up here; the other pages stay Django templates.
        "NAME": "jinja2",
        "BACKEND": "django.template.backends.jinja2.Jinja2",
        "DIRS": [BASE_DIR / "templates" / "jinja2"],
        "APP_DIRS": False,
        "OPTIONS": {
            "environment": "core.jinja2.environment",
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "notifications.context_processors.unread",
                # Last: the page's CSRF token masked once, not at each form (after Django's own).
                "core.context_processors.csrf",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------
DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{FOLLOWFEED_VAR_DIR / 'db.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.mysql":
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "charset": "utf8mb4",
            # READ COMMITTED: the mirror re-reads a pair's row after another
            # transaction commits; REPEATABLE READ snapshots would hide it.
            "isolation_level": "read committed",
            "init_command": "SET sql_mode='STRICT_TRANS_TABLES'",
        }
    )
    DATABASES["default"]["TEST"] = {
        # The database's own name behind "test_": two checkouts with their own DATABASE_URL never share one.
        "NAME": env("TEST_DATABASE_NAME", default=f"test_{DATABASES['default']['NAME']}"),
        "CHARSET": "utf8mb4",
        "COLLATION": "utf8mb4_unicode_ci",
    }
elif DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    FOLLOWFEED_VAR_DIR.mkdir(parents=True, exist_ok=True)
    # IMMEDIATE: a transaction takes the write lock when it begins, waiting up to
    # the timeout for another writer, instead of failing at once with "database is
    # locked" when its first write finds another transaction ahead of it.
    DATABASES["default"].setdefault("OPTIONS", {}).update({"timeout": 20, "transaction_mode": "IMMEDIATE"})

# With CONN_HEALTH_CHECKS (production), a kept connection is pinged before reuse only when its
# last request ended at least this long ago (seconds; core.connections).
DATABASE_HEALTH_CHECK_IDLE_SECONDS = env.float("DATABASE_HEALTH_CHECK_IDLE_SECONDS", default=5.0)

# --- database replica (core.routers) ---------------------------------------
# A MariaDB replica of DATABASE_URL (an account with SELECT only is enough).
# Set: page reads of GET and HEAD requests go there; writes, transactions and
# every read a write trusts stay on the primary (core.replica, core.routers).
DATABASE_REPLICA_URL = env("DATABASE_REPLICA_URL", default="")
# After a write, that browser's page reads use the primary this long (seconds):
# longer than the replica usually lags.
REPLICA_READ_YOUR_WRITES_SECONDS = env.float("REPLICA_READ_YOUR_WRITES_SECONDS", default=5.0)
if DATABASE_REPLICA_URL:
    DATABASES["replica"] = env.db_url_config(DATABASE_REPLICA_URL)
    DATABASES["replica"]["OPTIONS"] = {**DATABASES["default"].get("OPTIONS", {}), **DATABASES["replica"].get("OPTIONS", {})}
    # Tests: the replica reads the primary's test database, which reaches it through replication.
    DATABASES["replica"]["TEST"] = {"MIRROR": "default"}
    DATABASE_ROUTERS = ["core.routers.ReplicaRouter"]
    MIDDLEWARE.insert(
        MIDDLEWARE.index("django.contrib.auth.middleware.AuthenticationMiddleware") + 1, "core.replica.ReplicaReadsMiddleware"
    )
# --- end of database replica ------------------------------------------------
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis ----------------------------------------------------------------
# Empty REDIS_URL means the embedded Valkey server on a Unix socket in
# FOLLOWFEED_VAR_DIR, started by a process's first Redis connection (core.embedded).
# Redis Cluster: REDIS_URL=redis+cluster://host:port[,host:port...] or
# REDIS_CLUSTER_NODES=host:port,host:port (seed nodes; the rest is
# discovered). The cache then hands out redis-py's RedisCluster (core.cluster).
REDIS_URL = env("REDIS_URL", default="")
_cluster_nodes = env("REDIS_CLUSTER_NODES", default="")
if _cluster_nodes:
    REDIS_URL = "redis+cluster://" + _cluster_nodes
REDIS_CLUSTER = REDIS_URL.startswith("redis+cluster://")
REDIS_EMBEDDED = not REDIS_URL
if REDIS_EMBEDDED:
    REDIS_URL = f"unix://{FOLLOWFEED_VAR_DIR / 'valkey.sock'}?db=0"
REDIS_KEY_PREFIX = env("REDIS_KEY_PREFIX", default="ff:")
# Short timeouts: a page must fall back to the database instead of waiting
# on a dead Redis (seconds).
REDIS_SOCKET_CONNECT_TIMEOUT = env.float("REDIS_SOCKET_CONNECT_TIMEOUT", default=0.25)
REDIS_SOCKET_TIMEOUT = env.float("REDIS_SOCKET_TIMEOUT", default=1.0)
# After a Redis failure, reads go straight to the database for this long
# (seconds) instead of paying a timeout per call: the circuit breaker.
REDIS_CIRCUIT_OPEN_SECONDS = env.float("REDIS_CIRCUIT_OPEN_SECONDS", default=5.0)

_redis_options: dict[str, object] = {
    "CLIENT_CLASS": "django_redis.client.DefaultClient",
    "SOCKET_CONNECT_TIMEOUT": REDIS_SOCKET_CONNECT_TIMEOUT,
    "SOCKET_TIMEOUT": REDIS_SOCKET_TIMEOUT,
}
_redis_location = REDIS_URL
if REDIS_CLUSTER:
    from core.cluster import cluster_nodes

    # django-redis reads commas in LOCATION as replicas: the nodes go in OPTIONS.
    _redis_options["CONNECTION_FACTORY"] = "core.cluster.ClusterConnectionFactory"
    _redis_options["CLUSTER_NODES"] = cluster_nodes(REDIS_URL)
    _redis_location = REDIS_URL.split(",")[0]
elif REDIS_EMBEDDED:
    # The first connection of a process starts the embedded server (core.embedded).
    _redis_options["CONNECTION_FACTORY"] = "core.embedded.EmbeddedConnectionFactory"
CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": _redis_location,
        "KEY_PREFIX": REDIS_KEY_PREFIX + "cache",
        "OPTIONS": _redis_options,
    },
    # The abuse limits count here while Redis is down (core.cache).
    "database": {"BACKEND": "core.cache.CountingDatabaseCache", "LOCATION": "core_cache"},
    "limits": {"BACKEND": "core.cache.FallbackCache", "OPTIONS": {"primary": "default", "fallback": "database"}},
}
RATELIMIT_USE_CACHE = "limits"
# Sessions: the database's rows, read from the default cache (core.sessions) with the account's
# version token (users.sessions, users.account_rows); a cached copy lives
# at most this long (seconds), which bounds how long a delete lost to a Redis outage goes unseen.
SESSION_ENGINE = "users.sessions"
SESSION_CACHE_SECONDS = env.int("SESSION_CACHE_SECONDS", default=300)
# A cache that cannot count refuses the action rather than letting it through.
RATELIMIT_FAIL_OPEN = False

# --- limits on abuse (core.limits; django-ratelimit rates) -------------------
FOLLOW_RATE = env("FOLLOW_RATE", default="400/d")
NOTE_RATE = env("NOTE_RATE", default="100/h")
SIGNUP_RATE = env("SIGNUP_RATE", default="5/h")
# OAuth applications registered (POST /api/v1/apps) per client address; Mastodon allows 300 per 5 minutes.
APP_REGISTRATION_RATE = env("APP_REGISTRATION_RATE", default="300/5m")
LOGIN_FAILURE_ACCOUNT_RATE = env("LOGIN_FAILURE_ACCOUNT_RATE", default="10/15m")
LOGIN_FAILURE_ADDRESS_RATE = env("LOGIN_FAILURE_ADDRESS_RATE", default="30/15m")
# An import of follows (social.transfer) reads a file of at most this many bytes and lines.
FOLLOWS_IMPORT_MAX_BYTES = env.int("FOLLOWS_IMPORT_MAX_BYTES", default=1_048_576)
FOLLOWS_IMPORT_MAX_LINES = env.int("FOLLOWS_IMPORT_MAX_LINES", default=10_000)
# Seconds an import job waits after each follow it makes (spreads an import out).
FOLLOWS_IMPORT_PAUSE_SECONDS = env.float("FOLLOWS_IMPORT_PAUSE_SECONDS", default=0.0)
# An account follows at most max(FOLLOWING_MAX, FOLLOWING_RATIO x its followers).
FOLLOWING_MAX = env.int("FOLLOWING_MAX", default=7500)
FOLLOWING_RATIO = env.float("FOLLOWING_RATIO", default=1.1)
# How many proxies stand in front of the site, each appending the address it received from to
# CLIENT_ADDRESS_HEADER: the client's address is the Nth from the right (core.limits.client_address).
TRUSTED_PROXY_COUNT = env.int("TRUSTED_PROXY_COUNT", default=0)
# The request header the proxies write ("HTTP_X_FORWARDED_FOR", the default when TRUSTED_PROXY_COUNT > 0,
# or one proxy's "HTTP_X_REAL_IP"); empty and no proxies: REMOTE_ADDR.
CLIENT_ADDRESS_HEADER = env("CLIENT_ADDRESS_HEADER", default="")

# /metrics (core.monitoring): a scraper sends "Authorization: Bearer <METRICS_TOKEN>" or comes from one of
# METRICS_ALLOWED_NETWORKS ("10.0.0.0/8,127.0.0.1"); neither set: the endpoint answers 404.
METRICS_TOKEN = env("METRICS_TOKEN", default="")
METRICS_ALLOWED_NETWORKS = env.list("METRICS_ALLOWED_NETWORKS", default=[])
# django-prometheus's request metrics (off: none of its middleware or wrappers).
METRICS_ENABLED = env.bool("METRICS_ENABLED", default=True)
# Its per-query and per-cache-call counters too: a wrapper on every query, which costs the write
# path more than the request metrics do, so they are asked for.
METRICS_QUERIES = env.bool("METRICS_QUERIES", default=False)
if METRICS_ENABLED:
    INSTALLED_APPS.append("django_prometheus")
    MIDDLEWARE.insert(0, "django_prometheus.middleware.PrometheusBeforeMiddleware")
    MIDDLEWARE.append("django_prometheus.middleware.PrometheusAfterMiddleware")
if METRICS_ENABLED and METRICS_QUERIES:
    # The same backends, wrapped to count queries, errors and cache hits.
    for _database in DATABASES.values():
        if _database["ENGINE"] in ("django.db.backends.mysql", "django.db.backends.sqlite3"):
            _database["ENGINE"] = _database["ENGINE"].replace("django.db.backends.", "django_prometheus.db.backends.")
    if CACHES["default"]["BACKEND"] == "django_redis.cache.RedisCache":
        CACHES["default"]["BACKEND"] = "django_prometheus.cache.backends.redis.RedisCache"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 10}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# --- Celery ---------------------------------------------------------------
CELERY_BROKER_URL = env("CELERY_BROKER_URL", default="")
# No broker configured: run tasks in-process (the embedded default).
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=not CELERY_BROKER_URL)
CELERY_TASK_EAGER_PROPAGATES = False
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TIMEZONE = "UTC"
# A task that hangs (a half-open socket, a lock wait) is stopped: SoftTimeLimitExceeded
# after this many seconds, the worker process killed a little later. The long
# ones (rebuilds, the nightly reconcile) set their own limits.
CELERY_TASK_SOFT_TIME_LIMIT = env.int("CELERY_TASK_SOFT_TIME_LIMIT", default=300)
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT", default=330)
LONG_TASK_TIME_LIMIT = env.int("LONG_TASK_TIME_LIMIT", default=4 * 3600)
# Tests that start their own worker give it (and everything it sends) a queue of its own.
CELERY_TASK_DEFAULT_QUEUE = env("CELERY_TASK_DEFAULT_QUEUE", default="celery")
# Outbox entries applied per drain round (one database read, one Redis pipeline).
SOCIAL_OUTBOX_DRAIN_BATCH = env.int("SOCIAL_OUTBOX_DRAIN_BATCH", default=500)
# The drain leaves entries applied by a Celery task to that task this long (seconds).
OUTBOX_TASK_GRACE_SECONDS = env.float("OUTBOX_TASK_GRACE_SECONDS", default=30.0)
# The wake-up messages of entries committed within this long in one process go
# as one (seconds; 0: one message per commit, sent in the request).
OUTBOX_SEND_COALESCE_SECONDS = env.float("OUTBOX_SEND_COALESCE_SECONDS", default=0.02)
# Applied outbox entries are kept this long (seconds), then purged.
OUTBOX_RETENTION_SECONDS = env.int("OUTBOX_RETENTION_SECONDS", default=86_400)
# How often beat drains the outbox (seconds); run_demo, with no beat, drains in a thread this often.
SOCIAL_OUTBOX_DRAIN_SECONDS = env.float("SOCIAL_OUTBOX_DRAIN_SECONDS", default=10.0)
CELERY_BEAT_SCHEDULE = {
    # Every side effect not applied yet (Redis down, a refused broker message, a killed worker).
    "drain-outbox": {
        "task": "core.tasks.outbox_drain",
        "schedule": SOCIAL_OUTBOX_DRAIN_SECONDS,
    },
    "reconcile-social-cache-nightly": {
        "task": "social.tasks.social_cache_reconcile",
        "schedule": crontab(hour=3, minute=30),
    },
    "reconcile-notification-counters-nightly": {
        "task": "notifications.tasks.notifications_unread_reconcile",
        "schedule": crontab(hour=3, minute=45),
    },
    # Who to follow and the most-followed rankings against a rebuild from the database
    # (repairs drift and renews the stored sets).
    "reconcile-suggestions-nightly": {
        "task": "social.tasks.social_suggestions_reconcile",
        "schedule": crontab(hour=5, minute=0),
    },
    # Unfinished imports whose entry was lost get it again.
    "reconcile-imports-nightly": {
        "task": "social.tasks.social_imports_reconcile",
        "schedule": crontab(hour=5, minute=15),
    },
    # The profile samples kept in Redis against the sets they were derived from.
    "reconcile-profile-samples-nightly": {
        "task": "social.tasks.social_profile_samples_reconcile",
        "schedule": crontab(hour=5, minute=20),
    },
    # A mute that ran out gives back the muted author's notes within this long.
    "expire-mutes": {
        "task": "social.tasks.social_mutes_expire",
        "schedule": env.float("MUTE_EXPIRY_SECONDS", default=60.0),
    },
    # Mastodon's statuses_count of each author against a count of its notes.
    "reconcile-note-counts-nightly": {
        "task": "feed.tasks.feed_note_counts_reconcile",
        "schedule": crontab(hour=4, minute=15),
    },
    # After the graph's, so the inboxes are compared with a repaired mirror.
    "reconcile-inboxes-nightly": {
        "task": "feed.tasks.feed_inboxes_reconcile",
        "schedule": crontab(hour=4, minute=30),
    },
}

# --- followfeed -----------------------------------------------------------
FOLLOWFEED_DATA_DIR = Path(env("FOLLOWFEED_DATA_DIR", default=str(BASE_DIR.parent / "shared" / "data")))
FOLLOWFEED_DATASET = env("FOLLOWFEED_DATASET", default="soc-Slashdot0902.txt.gz")
# Authors with at least this many followers are not fanned out on write;
# readers pull their outbox at read time (hybrid).
FANOUT_PULL_THRESHOLD = env.int("FANOUT_PULL_THRESHOLD", default=10_000)
# Followers lists of at least this size are split into FOLLOWERS_SHARDS keys
# (a follower in shard id % FOLLOWERS_SHARDS; changing FOLLOWERS_SHARDS needs
# a rebuild_social_cache). A sharded account goes back to one key only below
# FOLLOWERS_SHARD_THRESHOLD * FOLLOWERS_UNSHARD_RATIO (hysteresis, so an
# account at the edge does not migrate back and forth); see social.sharding.
FOLLOWERS_SHARD_THRESHOLD = env.int("FOLLOWERS_SHARD_THRESHOLD", default=50_000)
FOLLOWERS_SHARDS = env.int("FOLLOWERS_SHARDS", default=16)
FOLLOWERS_UNSHARD_RATIO = env.float("FOLLOWERS_UNSHARD_RATIO", default=0.8)
INBOX_MAX_LEN = env.int("INBOX_MAX_LEN", default=800)
FEED_ACTIVE_DAYS = env.int("FEED_ACTIVE_DAYS", default=30)
NOTE_MAX_LENGTH = env.int("NOTE_MAX_LENGTH", default=500)
FOLLOW_PAGE_SIZE = env.int("FOLLOW_PAGE_SIZE", default=50)
FEED_PAGE_SIZE = env.int("FEED_PAGE_SIZE", default=20)
# Followers per fan-out batch (one users query + one Redis pipeline each),
# and an optional pause between batches (seconds) to spread a big fan-out.
FEED_FANOUT_BATCH_SIZE = env.int("FEED_FANOUT_BATCH_SIZE", default=1000)
FEED_FANOUT_BATCH_PAUSE_SECONDS = env.float("FEED_FANOUT_BATCH_PAUSE_SECONDS", default=0.0)
# A fan-out to more followers than this is split into parts of about this
# many followers (one outbox entry and one task each), so any worker can
# deliver a part and N workers share a big author's fan-out.
FEED_FANOUT_PART_FOLLOWERS = env.int("FEED_FANOUT_PART_FOLLOWERS", default=5000)
FEED_FANOUT_MAX_PARTS = env.int("FEED_FANOUT_MAX_PARTS", default=64)

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
# English only: no translation machinery on every string, date and URL of a page.
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Where collectstatic writes and WhiteNoise serves from (tests/test_production.py points it at its own directory).
STATIC_ROOT = Path(env("DJANGO_STATIC_ROOT", default=str(BASE_DIR / "staticfiles")))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", default="INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}

CSRF_FAILURE_VIEW = "core.http.csrf_failure"
# The JSON API's OpenAPI 3.1 document, served at /api/schema.
OPENAPI_DOCUMENT = BASE_DIR / "config" / "openapi.yaml"

# Live updates (client_api.streams, served by the ASGI process: docs/operations.md#streaming).
# STREAMING_API_URL: where clients find it (the instance's urls.streaming_api, the home page's
# EventSource), e.g. ws://127.0.0.1:8001; empty: the site's own host (a proxy routes
# /api/v1/streaming to the streaming process).
STREAMING_API_URL = env("STREAMING_API_URL", default="")
STREAMING_HEARTBEAT_SECONDS = env.float("STREAMING_HEARTBEAT_SECONDS", default=15.0)
# Notes replayed at most on a (re)connection with Last-Event-ID, and per Redis reconnection.
STREAMING_REPLAY_LIMIT = env.int("STREAMING_REPLAY_LIMIT", default=40)
# How often an open stream checks its credentials again (a revoked token, a deactivated account
# or an ended session closes it): one query per stream this often.
STREAMING_CREDENTIALS_CHECK_SECONDS = env.float("STREAMING_CREDENTIALS_CHECK_SECONDS", default=60.0)

# --- Content-Security-Policy (django-csp) --------------------------------------
# The pages load only their own stylesheet and script: no inline script or
# style, nothing from elsewhere, no framing. The admin is Django's and keeps
# its own inline bits, so it is left out.
CONTENT_SECURITY_POLICY = {
    "EXCLUDE_URL_PREFIXES": ["/admin/"],
    "DIRECTIVES": {
        "default-src": [csp_constants.SELF],
        "script-src": [csp_constants.SELF],
        "style-src": [csp_constants.SELF],
        "img-src": [csp_constants.SELF, "data:"],
        # The home page's EventSource may read the streaming process on another origin.
        "connect-src": [csp_constants.SELF, *([STREAMING_API_URL.replace("ws", "http", 1)] if STREAMING_API_URL else [])],
        "object-src": [csp_constants.NONE],
        "base-uri": [csp_constants.NONE],
        "form-action": [csp_constants.SELF],
        "frame-ancestors": [csp_constants.NONE],
    },
}


# --- the Mastodon client API (client_api) ------------------------------------
# django-oauth-toolkit: Mastodon's scopes, its tokens that do not expire, the
# out-of-band redirect (urn:) and any app scheme a client registers.
MASTODON_SCOPES = {
    "read": "read all your account's data",
    "write": "modify all your account's data",
    "follow": "modify account relationships",
    "push": "receive your push notifications",
    "profile": "read only your account's basic information",
    **{
        f"read:{part}": f"read your {part.replace('_', ' ')}"
        for part in (
            "accounts",
            "blocks",
            "bookmarks",
            "favourites",
            "filters",
            "follows",
            "lists",
            "mutes",
            "notifications",
            "search",
            "statuses",
        )
    },
    **{
        f"write:{part}": f"change your {part.replace('_', ' ')}"
        for part in (
            "accounts",
            "blocks",
            "bookmarks",
            "conversations",
            "favourites",
            "filters",
            "follows",
            "lists",
            "media",
            "mutes",
            "notifications",
            "reports",
            "statuses",
        )
    },
}
OAUTH2_PROVIDER = {
    "SCOPES": MASTODON_SCOPES,
    "DEFAULT_SCOPES": ["read"],
    "ALLOWED_REDIRECT_URI_SCHEMES": env.list("OAUTH_REDIRECT_SCHEMES", default=["http", "https", "urn"]),
    "PKCE_REQUIRED": False,
    # Mastodon's access tokens do not expire (a client keeps one until revoked): ten years.
    "ACCESS_TOKEN_EXPIRE_SECONDS": 10 * 365 * 24 * 3600,
    "REFRESH_TOKEN_EXPIRE_SECONDS": None,
    "OAUTH2_VALIDATOR_CLASS": "client_api.validators.MastodonValidator",
    # RFC 9700 (the OAuth 2.0 security BCP): no implicit or password grant, PKCE by S256 only,
    # tokens in the Authorization header only, the `iss` parameter in authorization responses,
    # and a replayed refresh token revokes its whole family.
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
}
# Left as Mastodon has them: tokens stored as issued (W006; Mastodon stores them so too), plain
# http redirect URIs, which native apps' loopback callbacks need (W008, RFC 8252), and PKCE
# optional (W010: Mastodon clients' code flow, Mastodon.py's included, may send none).
SILENCED_SYSTEM_CHECKS = ["oauth2_provider.W006", "oauth2_provider.W008", "oauth2_provider.W010"]
# Named here so a migration that points at them loads before django-oauth-toolkit's settings do.
OAUTH2_PROVIDER_APPLICATION_MODEL = "oauth2_provider.Application"
OAUTH2_PROVIDER_ACCESS_TOKEN_MODEL = "oauth2_provider.AccessToken"  # noqa: S105 - model names, not secrets
OAUTH2_PROVIDER_REFRESH_TOKEN_MODEL = "oauth2_provider.RefreshToken"  # noqa: S105
OAUTH2_PROVIDER_ID_TOKEN_MODEL = "oauth2_provider.IDToken"  # noqa: S105
OAUTH2_PROVIDER_GRANT_MODEL = "oauth2_provider.Grant"
CORS_ALLOW_ALL_ORIGINS = True
# The streams answer CORS themselves (client_api.streams): a page on another port of the same
# host reads them with its session cookie, which "*" would not carry.
CORS_URLS_REGEX = r"^/(api(?!/v1/streaming)|oauth)/.*$"
CORS_EXPOSE_HEADERS = [
    "Link",
    "X-RateLimit-Limit",
    "X-RateLimit-Remaining",
    "X-RateLimit-Reset",
    "X-Request-Id",
    "Idempotency-Key",
]
CORS_ALLOW_HEADERS = ["accept", "authorization", "content-type", "idempotency-key", "user-agent", "x-requested-with"]
# The version the Mastodon client API reports (GET /api/v1/instance).
MASTODON_API_VERSION = "4.3.0"

"""evalsite settings: every deploy-specific value comes from the environment; defaults run the embedded setup."""

import os
from pathlib import Path

from evalsite.env import (
    ImproperEnvironment,
    env_bool,
    env_database,
    env_float,
    env_int,
    env_list,
    env_lists_by_name,
    env_str,
)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# The statistics multiply many small matrices, for which one BLAS thread is fastest (the reports pin it to one
# anyway); OpenBLAS otherwise starts a spinning thread per core when numpy loads, which doubled the CPU time of a
# statistics command. Read by OpenBLAS only when numpy first loads, so it is set before any app imports numpy.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("EVALSITE_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DEBUG", False)
PRODUCTION = env_bool("EVALSITE_PRODUCTION", False)

_secret = os.environ.get("SECRET_KEY", "")
if not _secret:
    if PRODUCTION:
        raise ImproperEnvironment("SECRET_KEY must be set when EVALSITE_PRODUCTION is on")
    # Outside production a per-checkout random key is kept on disk so sessions survive restarts.
    _key_file = VAR_DIR / "secret_key"
    if not _key_file.exists():
        import secrets

        _key_file.write_text(secrets.token_urlsafe(64))
        _key_file.chmod(0o600)
    _secret = _key_file.read_text().strip()
elif len(_secret) < 32:
    raise ImproperEnvironment("SECRET_KEY must be at least 32 characters long")
SECRET_KEY = _secret

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "django_htmx",
    "annotations",
    "judging",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "evalsite.middleware.SecurityHeadersMiddleware",
    "evalsite.middleware.RequestSizeLimitMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "evalsite.middleware.RequestHygieneMiddleware",
    "evalsite.middleware.LazyMessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "evalsite.middleware.MethodNotAllowedPageMiddleware",
    "evalsite.middleware.TransientFaultMiddleware",
]

ROOT_URLCONF = "evalsite.urls"
# bench/annotate_load.py measures the submit against a floor view served by the same gunicorn: only its gunicorn sets
# this, and a production deployment refuses it, so the view is never reachable where real annotators work.
if env_bool("EVALSITE_BENCH_FLOOR", False):
    if PRODUCTION:
        raise ImproperEnvironment("EVALSITE_BENCH_FLOOR mounts a benchmark view and must not be set in production")
    ROOT_URLCONF = "bench.floor_urls"
    MIDDLEWARE = ["bench.floor_view.ThreadCpuHeader", *MIDDLEWARE]
WSGI_APPLICATION = "evalsite.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": env_database("DATABASE_URL", VAR_DIR / "evalsite.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("ja", "日本語")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"
MEDIA_ROOT = VAR_DIR / "media"
# Outside production the app serves static files straight from the source folders, so no collectstatic step is needed.
WHITENOISE_USE_FINDERS = not PRODUCTION
WHITENOISE_AUTOREFRESH = not PRODUCTION

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# Request-size limits: Django's own caps apply to forms; uploads have their own cap checked by the importer.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 2_621_440, minimum=1024)
FILE_UPLOAD_MAX_MEMORY_SIZE = 2_621_440
IMPORT_MAX_UPLOAD_BYTES = env_int("IMPORT_MAX_UPLOAD_BYTES", 512 * 1024 * 1024, minimum=1024)
IMPORT_MAX_LINE_BYTES = env_int("IMPORT_MAX_LINE_BYTES", 16 * 1024 * 1024, minimum=1024)
IMPORT_MAX_JSON_DEPTH = env_int("IMPORT_MAX_JSON_DEPTH", 64, minimum=4)
# What one table of the mapped import may become once read (decompressed): the upload cap bounds only the compressed
# bytes, and a small zstd Parquet or gzip file can expand to gigabytes. Checked while the table is read.
IMPORT_MAX_COLUMNS = env_int("IMPORT_MAX_COLUMNS", 1_000, minimum=1)
IMPORT_MAX_ROWS = env_int("IMPORT_MAX_ROWS", 500_000, minimum=1)
IMPORT_MAX_TABLE_BYTES = env_int("IMPORT_MAX_TABLE_BYTES", 256 * 1024 * 1024, minimum=1024)
IMPORT_MAX_CELL_CHARS = env_int("IMPORT_MAX_CELL_CHARS", 1_000_000, minimum=1)
# Bodies of requests with no signed-in user or valid token: a login form or a token request is far smaller, and
# nothing an anonymous client sends should make the server parse (or spool to disk) more than this.
# The Retry-After of the 503 answered while the database or Redis is away (a restart or failover takes seconds).
FAULT_RETRY_AFTER_S = env_int("FAULT_RETRY_AFTER_S", 5, minimum=1)
ANONYMOUS_MAX_BODY_BYTES = env_int("ANONYMOUS_MAX_BODY_BYTES", 64 * 1024, minimum=1024)
# API tokens stop working this many hours after they were issued (30 days by default).
API_TOKEN_TTL_HOURS = env_int("API_TOKEN_TTL_HOURS", 30 * 24, minimum=1)
IMPORT_CHUNK_ITEMS = env_int("IMPORT_CHUNK_ITEMS", 200, minimum=1)

# Celery: Redis in production, a server-less SQLite-backed kombu transport by default.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", f"sqla+sqlite:///{VAR_DIR / 'celery-broker.sqlite3'}")
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False


def _periodic(task: str, every_variable: str, default_s: int, *, minimum_s: int) -> dict[str, object]:
    return {"task": task, "schedule": float(env_int(every_variable, default_s, minimum=minimum_s))}


# Periodic upkeep; the worker runs the scheduler itself (`celery worker -B`, as rundemo and docker-compose start it).
# Running it twice is harmless: both tasks take each run with a conditional update or a row lock.
CELERY_BEAT_SCHEDULE = {
    "judge-runs-nudge-stalled": _periodic("judging.judge_runs_nudge_stalled", "JUDGE_NUDGE_EVERY_S", 60, minimum_s=5),
    # An ended run without its scores and version (its slices stopped at a budget, or it ended before both were
    # written with its status) gets them.
    "judge-runs-settle-ended": _periodic("judging.judge_runs_settle_ended", "JUDGE_NUDGE_EVERY_S", 60, minimum_s=5),
    "factscore-results-project-pending": _periodic(
        "judging.factscore_results_project_pending", "FACTSCORE_PROJECT_EVERY_S", 300, minimum_s=5
    ),
    # Each certified judge version in use re-judges a random sample of its reference set (daily by default).
    "judge-drift-checks": _periodic("judging.drift_checks_start", "JUDGE_DRIFT_EVERY_S", 86400, minimum_s=60),
    # A certificate, drift check or teaching whose evaluating worker died is handed to another worker.
    "judge-evaluations-reclaim-stale": _periodic(
        "judging.evaluations_reclaim_stale", "JUDGE_RECLAIM_EVERY_S", 300, minimum_s=30
    ),
}
JUDGE_DRIFT_SAMPLE_SIZE = env_int("JUDGE_DRIFT_SAMPLE_SIZE", 20, minimum=6)
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
BROKER_IS_REDIS = CELERY_BROKER_URL.startswith(("redis://", "rediss://"))
REDIS_URL = env_str("REDIS_URL", CELERY_BROKER_URL if BROKER_IS_REDIS else "")

CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}
# Every page reads the session: from the shared Redis cache when there is one (written through to the database, so
# a cache flush logs nobody out, and read from the database while Redis is away: evalsite.sessions). Not with the
# per-process cache: another worker would keep a logged-out session.
if REDIS_URL:
    SESSION_ENGINE = "evalsite.sessions"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "annotations.api.tokens.ExpiringTokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": (
        ["rest_framework.renderers.JSONRenderer"]
        if PRODUCTION
        else ["rest_framework.renderers.JSONRenderer", "rest_framework.renderers.BrowsableAPIRenderer"]
    ),
    "DEFAULT_PARSER_CLASSES": [
        "rest_framework.parsers.JSONParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_THROTTLE_RATES": {"login": "10/min", "token": "10/min"},
    # Trusted reverse proxies in front of the app; 0 ignores X-Forwarded-For, which clients can forge.
    "NUM_PROXIES": env_int("EVALSITE_NUM_PROXIES", 0, minimum=0),
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "evalsite API",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema maps every endpoint, the researchers' included: it is documentation for researchers' clients.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAdminUser"],
}

# Private addresses that judge api_base may point at (operators list their own gateways here).
JUDGE_API_BASE_ALLOWLIST = env_list("JUDGE_API_BASE_ALLOWLIST", [])
# Origins a provider-key variable may be sent to besides its provider's own: "VLLM_API_KEY=http://gpu1.lan:8000|gpu2.lan"
# (scheme, host and port; a bare host means https on 443).
JUDGE_API_KEY_HOSTS = env_lists_by_name("JUDGE_API_KEY_HOSTS")
# Judge engine timing: claim lease (a killed worker's units return after it), work-task slice, retry backoff.
JUDGE_LEASE_S = env_int("JUDGE_LEASE_S", 60, minimum=2)
JUDGE_TIME_SLICE_S = env_int("JUDGE_TIME_SLICE_S", 120, minimum=2)
JUDGE_TASKS_PER_RUN = env_int("JUDGE_TASKS_PER_RUN", 2, minimum=1)
# Units a work task claims at once; 0 sizes the claim from the run's max_concurrency.
JUDGE_CLAIM_BATCH = env_int("JUDGE_CLAIM_BATCH", 0, minimum=0)
# Longest pause of the task that waits for a run's last claims to finish or expire.
JUDGE_WATCH_MAX_S = env_float("JUDGE_WATCH_MAX_S", 10.0, minimum=1.0)
JUDGE_RETRY_BASE_S = env_int("JUDGE_RETRY_BASE_MS", 1000, minimum=1) / 1000
JUDGE_RETRY_CAP_S = env_int("JUDGE_RETRY_CAP_S", 60, minimum=1)
# A provider's Retry-After is honoured up to this many seconds.
JUDGE_RETRY_AFTER_CAP_S = env_int("JUDGE_RETRY_AFTER_CAP_S", 300, minimum=1)
# Keys the delimiters around untrusted text in prompts; empty derives them from SECRET_KEY. Set it to keep prompts
# (and so cache hits) stable across SECRET_KEY rotations.
JUDGE_DELIMITER_SECRET = env_str("JUDGE_DELIMITER_SECRET", "")

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
CSRF_FAILURE_VIEW = "evalsite.error_pages.csrf_failure"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; "
    "form-action 'self'; object-src 'none'"
)
if PRODUCTION:
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"no_query_strings": {"()": "evalsite.access_log.QueryStringFilter"}},
    "formatters": {
        "django.server": {"()": "django.utils.log.ServerFormatter", "format": "[{server_time}] {message}", "style": "{"}
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler"},
        "django.server": {"class": "logging.StreamHandler", "formatter": "django.server"},
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # The development server's access log (rundemo), without the query strings that carry platform ids.
    "loggers": {
        "django.server": {
            "handlers": ["django.server"],
            "level": "INFO",
            "propagate": False,
            "filters": ["no_query_strings"],
        }
    },
}

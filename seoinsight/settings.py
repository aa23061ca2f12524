"""Django's settings, from the environment (django-environ); they only declare, nothing starts here.

Development defaults are safe to run locally; production sets ``DEBUG=0``,
``SECRET_KEY``, ``ALLOWED_HOSTS`` and ``DATABASE_URL`` and passes
``manage.py check --deploy``. The apps' own settings (JOBS_*, IMPORT_*, MAILPOLL_*)
are declared in their ``conf.py`` and read from the environment there.
"""

from importlib.util import find_spec
from pathlib import Path
from urllib.parse import unquote

import environ

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
if (BASE_DIR / ".env").is_file():
    environ.Env.read_env(BASE_DIR / ".env")

DEBUG = env.bool("DEBUG", default=True)
# The development key is only ever used with DEBUG on; production must set its own.
SECRET_KEY = env("SECRET_KEY", default="dev-insecure-key-change-me" if DEBUG else environ.Env.NOTSET)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # ArrayField (jobs.worker_ids): Django 6.1's check postgres.E005 requires the app.
    "django.contrib.postgres",
    "seoinsight",
    "jobs",
    "imports",
    "outbox",
    "mailpoll",
    # What comes out: the site page, the portfolio, alerts. Above every app that brings data in; none imports it.
    "insight",
]
# Django's task API: built into Django 6, the django-tasks backport (an app of its own) on 5.2.
if find_spec("django.tasks") is None:
    INSTALLED_APPS.append("django_tasks")

# @task functions run as jobs of the queue (jobs.tasks); QUEUES, if set, lists the queue names tasks may use.
TASKS = {"default": {"BACKEND": "jobs.tasks.PostgresBackend"}}

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Before any view or admin list reads request.GET: a NUL or an absurd length is a 400, never a 500.
    "seoinsight.query_guard.QueryGuardMiddleware",
    # Before anything reads request.POST (the CSRF check does): an oversized upload is never spooled.
    "imports.middleware.UploadSizeLimitMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "seoinsight.urls"
WSGI_APPLICATION = "seoinsight.wsgi.application"

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
            ],
        },
    },
]

# --- Database -----------------------------------------------------------------
# PostgreSQL only: SKIP LOCKED, advisory locks and LISTEN/NOTIFY are the design.
if env("DATABASE_URL", default=""):
    DATABASES = {"default": env.db("DATABASE_URL")}
    # libpq spells a Unix-socket directory as a percent-encoded host
    # (postgres://user@%2Fvar%2Frun%2Fpostgresql/db); django-environ leaves it encoded.
    DATABASES["default"]["HOST"] = unquote(DATABASES["default"].get("HOST") or "")
else:
    # The embedded server, started or attached by its backend on a process's first connection.
    from seoinsight.embedded_db import settings_entry

    DATABASES = {"default": settings_entry(BASE_DIR / ".data" / "postgres")}
DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=0))
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DATABASES["default"].setdefault("TEST", {})

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = env("TIME_ZONE", default="UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = env.path("STATIC_ROOT", default=BASE_DIR / "static")
MEDIA_ROOT = env.path("MEDIA_ROOT", default=BASE_DIR / ".data" / "media")
MEDIA_URL = "media/"
# Large uploads spool to FILE_UPLOAD_TEMP_DIR; on a full disk that ends the upload with a clear answer, not a 500.
FILE_UPLOAD_HANDLERS = [
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "seoinsight.storage.SpoolUploadHandler",
]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "imports:index"
LOGOUT_REDIRECT_URL = "login"

# --- Production hardening (all on when DEBUG is off) --------------------------
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=not DEBUG)
# Probes (a load balancer's, the kubelet's) call /health/ over plain HTTP on the replica itself.
SECURE_REDIRECT_EXEMPT = [r"^health/"]
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=not DEBUG)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=not DEBUG)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=not DEBUG)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
# Joining the browsers' HSTS preload list is the domain owner's decision, hard to
# undo; it stays opt-in (SECURE_HSTS_PRELOAD=1), so its reminder is silenced. A deployment may silence
# more, knowingly (e.g. mailpoll.W006 for a mail server on its own premises).
SILENCED_SYSTEM_CHECKS = ["security.W021", *env.list("SILENCED_SYSTEM_CHECKS", default=[])]
if env.bool("BEHIND_TLS_PROXY", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# Fernet keys for secrets at rest, newest first; derived from SECRET_KEY if unset (seoinsight.crypto).
SECRETS_KEYS = env.list("SECRETS_KEYS", default=[])
# Former SECRET_KEYs, still accepted for signatures and still decrypting secrets until rotatesecrets.
SECRET_KEY_FALLBACKS = env.list("SECRET_KEY_FALLBACKS", default=[])
# Where a service-account key may fetch its access tokens (exact URIs); Google's endpoint only by default.
SEARCH_CONSOLE_TOKEN_URIS = env.list("SEARCH_CONSOLE_TOKEN_URIS", default=["https://oauth2.googleapis.com/token"])
# The bearer token /metrics requires (seoinsight.metrics); unset, /metrics answers 404 to everyone.
METRICS_TOKEN = env("METRICS_TOKEN", default="")

# --- Mail sent: the alert digests (insight.alerts.digest) ------------------------------------------------------
# EMAIL_URL: smtp://user:password@host:25, smtp+tls://…:587, smtp+ssl://…:465; the default consolemail:// prints
# each message on the worker's output (what `make run` shows).
_EMAIL = env.email_url("EMAIL_URL", default="consolemail://")
EMAIL_BACKEND = _EMAIL["EMAIL_BACKEND"]
EMAIL_HOST = _EMAIL.get("EMAIL_HOST") or "localhost"
EMAIL_PORT = _EMAIL.get("EMAIL_PORT") or 25
EMAIL_HOST_USER = _EMAIL.get("EMAIL_HOST_USER") or ""
EMAIL_HOST_PASSWORD = _EMAIL.get("EMAIL_HOST_PASSWORD") or ""
EMAIL_USE_TLS = _EMAIL.get("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = _EMAIL.get("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = 30  # seconds: a server that stops answering fails the send (retried), it never holds a worker
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", default="seoinsight <alerts@localhost>")

# --- Logging ------------------------------------------------------------------
LOG_LEVEL = env("LOG_LEVEL", default="INFO")
# "plain" for people, "json" for a log shipper: one object a line, with job, mailbox and org when known.
LOG_FORMAT = env("LOG_FORMAT", default="plain")
if LOG_FORMAT not in ("plain", "json"):
    raise environ.ImproperlyConfigured(f"LOG_FORMAT is {LOG_FORMAT!r}; it must be plain or json")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s pid=%(process)d %(message)s"},
        "json": {"()": "seoinsight.logs.JsonFormatter"},
    },
    "filters": {
        "context": {"()": "seoinsight.logs.ContextFilter"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT, "filters": ["context"]},
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django": {"level": env("DJANGO_LOG_LEVEL", default="INFO"), "propagate": True},
        "pgserver": {"level": "WARNING"},
        # At DEBUG urllib3 logs every request's target, query string included ("POST /ingest?api_key=…"): a key
        # in a configured URL would reach the logs. Its INFO and above name hosts only.
        "urllib3": {"level": "INFO"},
    },
}

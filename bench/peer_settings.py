"""Django settings of the django-tasks-db peer of the queue benchmark: its app, its database backend, nothing else.

``bench.peers`` runs ``python -m django db_worker`` and ``migrate`` with these settings in a
process of their own, on the bench database, which libpq's environment names (PGHOST, PGPORT,
PGUSER, PGPASSWORD, PGDATABASE, set by ``bench.peers``). Never loaded by the app.
"""

import os
from importlib.util import find_spec

SECRET_KEY = "bench-only-key-for-throw-away-databases-never-for-real-data"
DEBUG = False
USE_TZ = True
# Django 6's built-in task API, else the django-tasks backport (Django 5.2), as django-tasks-db itself chooses.
INSTALLED_APPS = ["django_tasks_db"] if find_spec("django.tasks") else ["django_tasks", "django_tasks_db"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("PGDATABASE", ""),
        "HOST": os.environ.get("PGHOST", ""),
        "PORT": os.environ.get("PGPORT", ""),
        "USER": os.environ.get("PGUSER", ""),
        "PASSWORD": os.environ.get("PGPASSWORD", ""),
        # db_worker calls close_old_connections() around every task: with Django's default of 0 it would
        # connect anew for each one. A worker keeps its connection, as runjobs does.
        "CONN_MAX_AGE": None,
    }
}
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}

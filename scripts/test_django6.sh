#!/bin/sh
# make test-django6: the task-backend tests (tests/jobs/test_tasks*.py) on Django 6.1, whose
# built-in django.tasks replaces the django-tasks backport the main venv runs on Django 5.2.
#
# - Python: the newest >= 3.12 found in pyenv's versions, then on PATH; none: one line, exit 0.
# - A venv of its own, .venv-django6, with Django 6.1, the project's dependencies and the project
#   (editable). Rebuilt only when its stamp (interpreter, pyproject.toml, this script) changes.
# - pgserver, the embedded PostgreSQL's wheel, ships no build for Python 3.13 (0.1.4: cp39-cp312),
#   so this venv goes without it: its tests use the embedded server of the main venv (.venv, which
#   `make setup` builds), started or attached here and named in DATABASE_URL. Each pytest process
#   creates its own test database there (test_seoinsight_<pid>), so the main suite may run at the
#   same time; tests/support/django6.py names this run's template database apart from the main one.
set -eu
cd "$(dirname "$0")/.."

VENV=.venv-django6
STAMP="$VENV/.installed-stamp"
MAIN_PYTHON=.venv/bin/python

newest_python() {
    for candidate in "$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"/versions/3.*/bin/python3 \
                     $(command -v python3.14 python3.13 python3.12 2>/dev/null || true); do
        [ -x "$candidate" ] || continue
        "$candidate" -c 'import sys; v = sys.version_info; v >= (3, 12) and print(*v[:3], sys.executable)' \
            2>/dev/null || true
    done | sort -n -k1,1 -k2,2 -k3,3 | tail -n 1 | cut -d" " -f4-
}

PYTHON=$(newest_python)
if [ -z "$PYTHON" ]; then
    echo "test-django6: skipped: no Python >= 3.12 found (pyenv versions, python3.12+ on PATH)"
    exit 0
fi
if [ ! -x "$MAIN_PYTHON" ]; then
    echo "test-django6: $MAIN_PYTHON is missing: run 'make setup' first" >&2
    exit 1
fi

WANT="$PYTHON $(cat pyproject.toml scripts/test_django6.sh | sha256sum | cut -c1-16)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
    echo "test-django6: building $VENV with $PYTHON"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip > "$VENV/install.log" 2>&1 || { cat "$VENV/install.log" >&2; exit 1; }
    # The project's requirements (and its test tools), with Django 6.1 and without pgserver.
    "$VENV/bin/python" - > "$VENV/requirements.txt" <<'EOF'
import re
import tomllib

project = tomllib.load(open("pyproject.toml", "rb"))["project"]
skip = {"pgserver", "playwright", "ruff", "pytest-xdist"}
for requirement in project["dependencies"] + project["optional-dependencies"]["dev"]:
    name = re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower()
    if name == "django":
        print("django>=6.1,<6.2")
    elif name not in skip:
        print(requirement)
EOF
    # pip's warnings (an index folder this machine lacks, setuptools on editable installs) go to a log,
    # shown if the install fails.
    if ! { "$VENV/bin/python" -m pip install --quiet -r "$VENV/requirements.txt" &&
           "$VENV/bin/python" -m pip install --quiet --no-deps -e .; } > "$VENV/install.log" 2>&1; then
        cat "$VENV/install.log" >&2
        echo "test-django6: installing into $VENV failed (log above)" >&2
        exit 1
    fi
    echo "$WANT" > "$STAMP"
fi

if [ -z "${DATABASE_URL:-}" ]; then
    DATABASE_URL=$("$MAIN_PYTHON" -c '
from pathlib import Path
from urllib.parse import quote

from seoinsight.embedded_db import attach

host, port = attach(Path(".data/postgres").resolve())
print(f"postgres://postgres@{quote(host, safe=str())}:{port}/seoinsight")
')
    export DATABASE_URL
fi

echo "test-django6: $("$VENV/bin/python" -c 'import django, sys; print(f"Django {django.get_version()}, Python {sys.version.split()[0]}")')"
exec "$VENV/bin/python" -m pytest -p tests.support.django6 -p no:cacheprovider -q "$@" \
    tests/jobs/test_tasks.py tests/jobs/test_tasks_worker.py tests/jobs/test_tasks_processes.py \
    tests/jobs/test_tasks_event_loop.py

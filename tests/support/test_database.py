"""Each pytest process's test database, cloned from one migrated template.

``make test`` runs pytest in several processes (pytest-xdist), each with a test database of its own
on the shared embedded server. Migrating each one from nothing costs every process the same
half-minute of CPU at once; instead the first process to get here migrates a template database
(``manage.py migrate`` in a subprocess, as production does it) and every process copies it with
``CREATE DATABASE … TEMPLATE``, which takes a second. The template's name carries a digest of the
migrations and the Django version, so a changed migration builds a new one; a stale template is
dropped when the next one is built.

One file lock (``.data/test-template.lock``) orders builds and copies across every pytest process
of this work tree: PostgreSQL refuses to copy a database that another session is connected to.
"""

from __future__ import annotations

import fcntl
import hashlib
import subprocess
import sys
from contextlib import contextmanager

import django
import psycopg
from psycopg import sql

from tests.support.processes import ROOT, database_url, process_env

TEMPLATE_PREFIX = "test_seoinsight_template_"
LOCK_PATH = ROOT / ".data" / "test-template.lock"


def migrations_digest() -> str:
    """What the template's schema depends on: every migration file's bytes, and Django's version."""
    digest = hashlib.sha256(django.get_version().encode())
    for path in sorted(ROOT.glob("*/migrations/*.py")):
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


@contextmanager
def _locked():
    LOCK_PATH.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK_PATH, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _admin(settings_dict: dict) -> psycopg.Connection:
    return psycopg.connect(host=settings_dict["HOST"] or "localhost", port=settings_dict["PORT"] or 5432,
                           user=settings_dict["USER"], password=settings_dict["PASSWORD"] or None,
                           dbname="postgres", autocommit=True, connect_timeout=10)


def _exists(conn: psycopg.Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is not None


def _drop(conn: psycopg.Connection, name: str) -> None:
    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _build_template(conn: psycopg.Connection, settings_dict: dict, name: str) -> None:
    """Migrate a new database and only then give it the template's name: a build cut short is never copied."""
    building = f"{name}_building"
    _drop(conn, building)
    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(building)))
    result = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "--skip-checks"],
        cwd=ROOT, env=process_env(DATABASE_URL=database_url({**settings_dict, "NAME": building})),
        capture_output=True, text=True, timeout=300,
    )
    if result.returncode:
        _drop(conn, building)
        raise RuntimeError(f"migrating the test template failed:\n{result.stdout}\n{result.stderr}")
    conn.execute(sql.SQL("ALTER DATABASE {} RENAME TO {}").format(sql.Identifier(building), sql.Identifier(name)))
    stale = conn.execute("SELECT datname FROM pg_database WHERE datname LIKE %s AND datname <> %s",
                         (TEMPLATE_PREFIX.replace("_", r"\_") + "%", name)).fetchall()
    for (old,) in stale:
        try:
            _drop(conn, old)
        except psycopg.Error:
            pass  # another work tree's run may be copying it right now; the next build tries again


def clone_test_database(settings_dict: dict, test_name: str) -> None:
    """Create ``test_name`` as a copy of the current template (built first if missing)."""
    template = TEMPLATE_PREFIX + migrations_digest()
    with _locked(), _admin(settings_dict) as conn:
        if not _exists(conn, template):
            _build_template(conn, settings_dict, template)
        _drop(conn, test_name)  # left over from a run that was killed, whose pid this one now has
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(test_name),
                                                                      sql.Identifier(template)))

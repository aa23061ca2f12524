"""The embedded PostgreSQL used when ``DATABASE_URL`` is unset.

A real PostgreSQL 16 from the ``pgserver`` wheel, kept in ``.data/postgres`` and
shared by every local process (web, workers, pollers, tests). The first process
to need it starts it; later ones attach. It is left running on exit on purpose:
other local processes may still be using it (``make stopdb`` stops it).

It listens on a Unix socket only, never on a TCP port.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

DEFAULT_DATABASE = "seoinsight"


def _server(pgdata: Path):
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (root, CI); harmless here.
        warnings.simplefilter("ignore")
        import pgserver

    logging.getLogger("pgserver").setLevel(logging.WARNING)
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    return pgserver.get_server(pgdata, cleanup_mode=None)


def database_settings(pgdata: Path, name: str = DEFAULT_DATABASE) -> dict:
    """Start or attach to the embedded server and return a Django DATABASES entry.

    The application database is created on first use; a concurrent creator is
    not an error (two processes may start at once on a fresh machine).
    """
    server = _server(pgdata)
    info = server.get_postmaster_info()
    host = str(info.socket_dir) if info.socket_dir else "127.0.0.1"
    port = str(info.port or 5432)
    _ensure_database(host, port, name)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": "postgres",
        "PASSWORD": "",
        "HOST": host,
        "PORT": port,
    }


def _ensure_database(host: str, port: str, name: str) -> None:
    import psycopg
    from psycopg import errors, sql

    with psycopg.connect(host=host, port=port, user="postgres", dbname="postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists:
            return
        try:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        except (errors.DuplicateDatabase, errors.UniqueViolation):
            pass


def stop(pgdata: Path) -> bool:
    """Stop the embedded server if it runs. Returns whether it was running."""
    from pgserver import pg_ctl
    from pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata)
    if info is None or not info.is_running():
        return False
    user = "pgserver" if _running_as_root() else None
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user)
    return True


def _running_as_root() -> bool:
    import os

    return hasattr(os, "geteuid") and os.geteuid() == 0

"""The embedded PostgreSQL used when ``DATABASE_URL`` is unset.

A real PostgreSQL 16 from the ``pgserver`` wheel, kept in ``.data/postgres`` and
shared by every local process (web, workers, pollers, tests). The first process
to need it starts it; later ones attach. It is left running on exit on purpose:
other local processes may still be using it (``make stopdb`` stops it).

It listens on a Unix socket only, never on a TCP port.

Nothing starts at import or in the settings: they name this package as the
database ENGINE (``settings_entry``), and its backend (``base.DatabaseWrapper``)
attaches on a process's first connection.
"""

from __future__ import annotations

import logging
import threading
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


_attach_lock = threading.Lock()
_attached: dict[tuple[Path, str], tuple[str, str]] = {}


def settings_entry(pgdata: Path, name: str = DEFAULT_DATABASE) -> dict:
    """A DATABASES entry for the embedded server that starts nothing until a connection is opened."""
    return {
        "ENGINE": "seoinsight.embedded_db",
        "NAME": name,
        "USER": "postgres",
        "PASSWORD": "",
        "HOST": "",  # the server's socket directory, filled in on first connect (base.DatabaseWrapper)
        "PORT": "",
        "EMBEDDED": {"PGDATA": str(pgdata), "DATABASE": name},
    }


def attach(pgdata: Path, name: str = DEFAULT_DATABASE) -> tuple[str, str]:
    """Start or attach to the embedded server, once per process; (host, port) to connect to.

    Threads of one process (pollmail's pollers) connect at once: one of them attaches.
    """
    key = (Path(pgdata), name)
    with _attach_lock:
        if key not in _attached:
            host, port = _address(key[0])
            _ensure_database(host, port, name)
            _attached[key] = host, port
        return _attached[key]


def database_settings(pgdata: Path, name: str = DEFAULT_DATABASE) -> dict:
    """Start or attach to the embedded server now and return a Django DATABASES entry naming it.

    For scripts that need the address at once (the benchmarks); settings use ``settings_entry``.
    """
    host, port = attach(pgdata, name)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": "postgres",
        "PASSWORD": "",
        "HOST": host,
        "PORT": port,
    }


def _address(pgdata: Path) -> tuple[str, str]:
    info = _server(pgdata).get_postmaster_info()
    return (str(info.socket_dir) if info.socket_dir else "127.0.0.1"), str(info.port or 5432)


def _ensure_database(host: str, port: str, name: str) -> None:
    """The application database is created on first use; a concurrent creator is
    not an error (two processes may start at once on a fresh machine)."""
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

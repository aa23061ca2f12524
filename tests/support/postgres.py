"""A private, throw-away PostgreSQL server, for tests that stop or restart the database.

The embedded server in ``.data/postgres`` is shared by the pytest process and every
local process, so it is never restarted by a test. This one lives in a temporary
directory, listens on a Unix socket in its own data directory only, and is
deleted afterwards.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import tempfile
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

from tests.support.processes import ROOT, database_url, process_env

PORT = 5432  # only names the socket file (.s.PGSQL.5432) in the server's own directory


@dataclass
class PrivateServer:
    pgdata: Path
    # Under root, pgserver runs postgres as the system user 'pgserver'; pg_ctl must too.
    system_user: str | None

    @property
    def socket_dir(self) -> Path:
        return self.pgdata

    def url(self, dbname: str) -> str:
        """A DATABASE_URL for a database on this server."""
        return database_url({"HOST": str(self.socket_dir), "PORT": PORT, "USER": "postgres",
                             "PASSWORD": "", "NAME": dbname})

    def connect(self, dbname: str = "postgres") -> psycopg.Connection:
        return psycopg.connect(host=str(self.socket_dir), port=PORT, user="postgres", dbname=dbname,
                               autocommit=True, connect_timeout=5)

    def query(self, dbname: str, statement: str, params=None) -> list | None:
        """Rows of ``statement`` on ``dbname``, or None while the server cannot be reached."""
        try:
            with self.connect(dbname) as conn:
                return conn.execute(statement, params).fetchall()
        except psycopg.OperationalError:
            return None

    def create_database(self, name: str) -> None:
        with self.connect() as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))

    def migrate(self, dbname: str) -> None:
        """Run ``manage.py migrate`` against a database of this server, in a subprocess."""
        result = subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "--skip-checks"],
            cwd=ROOT, env=process_env(DATABASE_URL=self.url(dbname)),
            capture_output=True, text=True, timeout=120,
        )
        assert result.returncode == 0, f"migrate failed:\n{result.stdout}\n{result.stderr}"

    def restart(self) -> None:
        """Stop (fast: every session is terminated) and start again; returns once it accepts connections.

        pg_ctl reuses the options of the previous start (postmaster.opts): same socket, no TCP.
        """
        self._pg_ctl("-w", "-m", "fast", "-l", str(self.pgdata / "log"), "restart")

    def stop(self) -> None:
        """Fast shutdown: sessions are terminated; returns once the server is down."""
        self._pg_ctl("-w", "-m", "fast", "stop")

    def start(self) -> None:
        """Start a stopped server with the options pgserver gave it: no TCP, socket in pgdata."""
        self._pg_ctl("-w", "-l", str(self.pgdata / "log"), "-o", '-h ""', "-o", f"-k {self.socket_dir}", "start")

    def log(self) -> str:
        path = self.pgdata / "log"
        return path.read_text(errors="replace") if path.exists() else ""

    def _pg_ctl(self, *args: str) -> None:
        from pgserver import pg_ctl

        pg_ctl(list(args), pgdata=self.pgdata, user=self.system_user, timeout=60)


@contextmanager
def private_server():
    """Start a PostgreSQL server of our own in a temporary directory; stop and delete it on exit."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs, when XDG_RUNTIME_DIR is unset
        import pgserver
    logging.getLogger("pgserver").setLevel(logging.WARNING)

    base = Path(tempfile.mkdtemp(prefix="seoinsight-pg-"))
    # The server may run as another system user ('pgserver' under root): let it reach pgdata.
    base.chmod(0o755)
    # cleanup_mode="delete" is only the safety net at interpreter exit; stopping and
    # deleting happen here, since pgserver's own cleanup tracks the postmaster it
    # started, which a restart replaces.
    handle = pgserver.get_server(base / "pgdata", cleanup_mode="delete")
    server = PrivateServer(pgdata=handle.pgdata, system_user=handle.system_user)
    try:
        yield server
    finally:
        try:
            server.stop()
        except subprocess.CalledProcessError:
            pass  # not running
        shutil.rmtree(base, ignore_errors=True)


@contextmanager
def migrated_server(request, dbname: str, *, log_chars: int = 4000):
    """``private_server`` with the database ``dbname`` created and migrated, for a fixture.

    ``request`` is the fixture's: when its test failed (``rep_call``), the end of the server's log is printed.
    """
    with private_server() as server:
        server.create_database(dbname)
        server.migrate(dbname)
        yield server
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            print(f"\n----- PostgreSQL log -----\n{server.log()[-log_chars:]}")

"""What the benchmarks share: a throw-away database, the app's processes, peak RSS, the report's table.

Each benchmark works in a database of its own on the server the app uses (the
one ``DATABASE_URL`` names, else the embedded one in ``.data/postgres``),
created fresh and dropped at the end, also when the benchmark fails.
"""

from __future__ import annotations

import datetime
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote, unquote

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 300  # seconds an app process may take, unless a benchmark says otherwise
RSS_POLL = 0.02  # seconds between reads of a process's /proc/<pid>/status
# The app's processes run as production runs them: DEBUG off (no query log growing in
# memory, no debug pages). DEBUG=0 requires a SECRET_KEY of one's own: this one, the same
# in every process of a run (the bench process encrypts what pollmail decrypts), guards
# nothing but throw-away databases.
PRODUCTION_ENV = {"DEBUG": "0", "SECRET_KEY": "bench-only-key-for-throw-away-databases-never-for-real-data",
                  # The benches' Dovecot listens on 127.0.0.1 at a port of its own (mailpoll.providers.destination).
                  "MAILPOLL_ALLOW_PRIVATE_HOSTS": "1", "MAILPOLL_EXTRA_PORTS": "*",
                  "SILENCED_SYSTEM_CHECKS": "mailpoll.W006,mailpoll.W007"}


# -- the database ------------------------------------------------------------------------------

def server_settings() -> dict:
    """Connection settings of the app's server: DATABASE_URL's, else the embedded one (started if need be)."""
    url = os.environ.get("DATABASE_URL")
    if url:
        import environ

        s = environ.Env.db_url_config(url)
        s["HOST"] = unquote(s.get("HOST") or "")
    else:
        from seoinsight.embedded_db import database_settings

        # "postgres" always exists: asking for it creates nothing, it only finds the server.
        s = database_settings(ROOT / ".data" / "postgres", name="postgres")
    return {"host": s.get("HOST") or "localhost", "port": str(s.get("PORT") or 5432),
            "user": s.get("USER") or "postgres", "password": s.get("PASSWORD") or ""}


def database_url(server: dict, dbname: str) -> str:
    """Socket directories go percent-encoded in the host, which settings decode."""
    password = f":{quote(server['password'], safe='')}" if server["password"] else ""
    return f"postgres://{quote(server['user'], safe='')}{password}@{quote(server['host'], safe='')}:{server['port']}/{dbname}"


def connect(server: dict, dbname: str, autocommit: bool = True) -> psycopg.Connection:
    return psycopg.connect(dbname=dbname, autocommit=autocommit, **server)


def recreate_database(server: dict, name: str) -> None:
    """A fresh, empty throw-away database (one a previous run left is dropped first)."""
    drop_database(server, name)
    with connect(server, "postgres") as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def drop_database(server: dict, name: str) -> None:
    with connect(server, "postgres") as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@contextmanager
def app_bench_database(name: str, media_prefix: str):
    """A throw-away database migrated for the app, a temporary MEDIA_ROOT, and Django set up on both, here.

    Yields ``(server, url, media)``. The database is dropped and the directory
    removed at the end, also when the benchmark fails.
    """
    server = server_settings()
    url = database_url(server, name)
    media = Path(tempfile.mkdtemp(prefix=media_prefix))
    recreate_database(server, name)
    try:
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT,
                       env=worker_env(url, media), check=True)
        # This process then works through the ORM, in the bench database only.
        os.environ.update(worker_env(url, media), DJANGO_SETTINGS_MODULE="seoinsight.settings")
        import django

        django.setup()
        yield server, url, media
        from django.db import connection

        connection.close()
    finally:
        drop_database(server, name)
        shutil.rmtree(media, ignore_errors=True)


def settle(db: psycopg.Connection, table: str | None = None) -> None:
    """Same starting state for every timed run: statistics fresh, no dirty pages of the last run.

    ``table`` alone is vacuumed when named, else the whole database.
    """
    if table is None:
        db.execute("VACUUM ANALYZE")
    else:
        db.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(table)))
    try:
        db.execute("CHECKPOINT")  # so no run pays for the previous one's dirty pages
    except psycopg.errors.InsufficientPrivilege:
        pass


def server_version(db: psycopg.Connection) -> str:
    return "PostgreSQL " + db.execute("SHOW server_version").fetchone()[0]


# -- the app's processes -----------------------------------------------------------------------

def worker_env(url: str, media: Path | None = None, extra: dict | None = None) -> dict:
    """The environment of an app process on a bench database (and MEDIA_ROOT): production's, quiet logs.

    Every process a benchmark starts (runjobs, pollmail, migrate) and the benchmark's own
    Django get it, so all run with PRODUCTION_ENV; ``extra`` (a log level, a timer) comes last.
    """
    env = dict(os.environ, **PRODUCTION_ENV, DATABASE_URL=url, LOG_LEVEL="WARNING", DJANGO_LOG_LEVEL="WARNING",
               PYTHONUNBUFFERED="1")
    if media is not None:
        env["MEDIA_ROOT"] = str(media)
    env.update({key: str(value) for key, value in (extra or {}).items()})
    return env


class AppProcess:
    """``manage.py <command> …`` in its own process on a bench database, its output kept for the crash report.

    Never left behind: a worker whose database is dropped waits for it forever,
    so every way out of ``wait`` ends the process, and ``kill`` is for the rest.
    """

    def __init__(self, url: str, command: str, *args: str, media: Path | None = None, env: dict | None = None):
        self.command = command
        with tempfile.NamedTemporaryFile(prefix=f"bench-{command}-", suffix=".log", delete=False) as log:
            self.log = Path(log.name)
            self.started = time.perf_counter()
            self.proc = subprocess.Popen([sys.executable, "manage.py", command, *args], cwd=ROOT,
                                         env=worker_env(url, media, env), stdout=log, stderr=subprocess.STDOUT)
        self.output = ""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait(self, timeout: float = TIMEOUT) -> float:
        """Wall seconds from the start to the exit; raises with the output's tail unless it exited 0."""
        try:
            code = self.proc.wait(timeout=timeout)
            wall = time.perf_counter() - self.started
        finally:
            self._end()
        self._collect(code)
        return wall

    def wait_usage(self, timeout: float = TIMEOUT) -> tuple[float, resource.struct_rusage]:
        """As ``wait``, with the process's resource usage (``os.wait4``: ``Popen.wait`` does not give it)."""
        try:
            deadline = time.monotonic() + timeout
            while not (waited := os.wait4(self.proc.pid, os.WNOHANG))[0]:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.command} still running after {timeout}s")
                time.sleep(0.02)
            self.proc.returncode = os.waitstatus_to_exitcode(waited[1])
        finally:
            self._end()
        wall = time.perf_counter() - self.started
        self._collect(self.proc.returncode)
        return wall, waited[2]

    def stop(self, timeout: float = TIMEOUT) -> None:
        """SIGTERM: a worker finishes its job and exits 0."""
        if self.proc.poll() is None:
            self.proc.terminate()
        self.wait(timeout)

    def kill(self) -> None:
        self._end()
        self.log.unlink(missing_ok=True)

    def _end(self) -> None:
        """Kill it if it still runs (a timeout, an interruption); a no-op once it has exited."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def _collect(self, code: int) -> None:
        self.output = self.log.read_text(errors="replace")
        self.log.unlink()
        if code != 0:
            raise RuntimeError(f"{self.command} exited with {code}:\n{self.output[-4000:]}")


class MemoryWatch(threading.Thread):
    """The peak RSS of a process: its VmHWM, read from /proc/<pid>/status every RSS_POLL seconds.

    VmHWM is the kernel's high-water mark of the process's resident memory, so
    a spike between two reads is still seen at the next one; only growth in the
    last RSS_POLL seconds before exit (interpreter teardown, which frees) could
    be missed. Polling VmRSS (or psutil's rss) would miss spikes between reads.
    Not ru_maxrss from wait4(): Popen forks this process, and the kernel carries
    the high-water mark of the address space replaced at exec into the child's
    ru_maxrss, so it reports at least this benchmark's own RSS (about 88 MB,
    where the idle worker's own peak is about 78 MB).
    """

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.path = Path(f"/proc/{pid}/status")
        self.peak_kb = 0

    def run(self) -> None:
        while True:
            try:
                status = self.path.read_text()
            except (FileNotFoundError, ProcessLookupError):
                return
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            if "VmHWM" not in fields:
                return  # exited: a zombie has no memory left to report
            self.peak_kb = max(self.peak_kb, int(fields["VmHWM"].split()[0]))
            time.sleep(RSS_POLL)


# -- the report --------------------------------------------------------------------------------

def headline(benchmark: str, version: str) -> str:
    """The report's first line: which benchmark, when, and on what."""
    return (f"seoinsight {benchmark} benchmark  {datetime.datetime.now():%Y-%m-%d %H:%M}  "
            f"{os.cpu_count()} CPU(s), {platform.python_implementation()} {platform.python_version()}, {version}")


def table(label_width: int, value_width: int, rule: int):
    """The figures table: a row function (label, value, ratio to the ceiling, goal) and the table's head."""
    def row(label, value, ratio="", goal=""):
        return f"{label:<{label_width}}{value:>{value_width}}{ratio:>12}  {goal}".rstrip()

    return row, [row("figure", "value", "vs ceiling", "goal"), "-" * rule]


def verdict(ok: bool, miss: str = "MISS") -> str:
    return "PASS" if ok else miss


def ratio_goal(ratio: float, goal: float, miss: str = "MISS") -> str:
    return f">= {goal}x  {verdict(ratio >= goal, miss)}"


@contextmanager
def statement_times(into: dict, name_of: Callable[[str], str]):
    """Each statement's wall time in this process's Django connection, added to ``into[name_of(sql)]``."""
    from django.db import connection

    def wrapper(execute, sql_text, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql_text, params, many, context)
        finally:
            into[name_of(sql_text)] += time.perf_counter() - started

    with connection.execute_wrapper(wrapper):
        yield


def time_view(client, path: str, runs: int, name_of: Callable[[str], str]) -> dict:
    """``runs`` timed requests of a page after one warm-up: the totals, each statement's seconds per run (named by
    ``name_of``), and the last response."""
    client.get(path, secure=True)
    totals, per_statement = [], defaultdict(list)
    for _ in range(runs):
        spent = defaultdict(float)
        with statement_times(spent, name_of):
            started = time.perf_counter()
            response = client.get(path, secure=True)
            totals.append(time.perf_counter() - started)
        if response.status_code != 200:
            raise RuntimeError(f"{path} answered {response.status_code}")
        for name, seconds in spent.items():
            per_statement[name].append(seconds)
    return {"totals": totals, "statements": per_statement, "last": response}

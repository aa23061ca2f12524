"""Database timeouts for the background processes (``runjobs``, ``pollmail``), never the web's.

``configure(process)``, called first thing by those commands, gives every
connection the process opens from then on (Django's, in any thread, and the
LISTEN connection built from the same parameters):

- a connect timeout (JOBS_DB_CONNECT_TIMEOUT) and TCP keepalives
  (JOBS_DB_KEEPALIVES_IDLE, then 3 probes 10 s apart; ``tcp_user_timeout`` the
  same, for data the peer never acknowledges): a vanished server or network
  ends in an error, not an endless wait;
- ``statement_timeout`` and ``lock_timeout`` (JOBS_DB_STATEMENT_TIMEOUT,
  JOBS_DB_LOCK_TIMEOUT), set at connect through the startup ``options``: a
  statement stuck behind a table lock, or running away, is cancelled by the
  server with an error that names the timeout; ``plan_cache_mode`` too, so the
  queue's prepared statements are planned once per connection (JOBS_PREPARED_STATEMENTS);
- a client-side deadline for a server that stops answering altogether (a
  stopped process, a proxy that swallows packets), which no server-side timeout
  and no keepalive can see: a connection still waiting for an answer
  ANSWER_GRACE seconds past the statement timeout is shut down, with a log line
  naming the job (or the thread) it was for; the caller sees a lost connection
  and goes through its outage path.

The web keeps the settings' own OPTIONS (none of these): a request has its own
limits, and a long admin query is an operator's choice.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import weakref

import psycopg
from django.db import connections
from psycopg import errors, pq
from django.db.backends.signals import connection_created

from seoinsight.exc_chain import chain

from . import conf

log = logging.getLogger(__name__)

# Seconds past the statement timeout before the client gives up on an answer:
# the server's own cancellation, when it can answer, comes first.
ANSWER_GRACE = 5.0
KEEPALIVE_INTERVAL = 10
KEEPALIVE_COUNT = 3
WATCH_INTERVAL = 0.5


def connection_options() -> dict:
    """The libpq parameters ``configure`` adds to the database OPTIONS (0 turns one off)."""
    options = {}
    connect = float(conf.get("JOBS_DB_CONNECT_TIMEOUT"))
    if connect > 0:
        options["connect_timeout"] = max(1, round(connect))
    idle = float(conf.get("JOBS_DB_KEEPALIVES_IDLE"))
    if idle > 0:
        options.update(
            keepalives=1,
            keepalives_idle=max(1, round(idle)),
            keepalives_interval=KEEPALIVE_INTERVAL,
            keepalives_count=KEEPALIVE_COUNT,
            tcp_user_timeout=int((idle + KEEPALIVE_INTERVAL * KEEPALIVE_COUNT) * 1000),
        )
    server = []
    for name, setting in (("statement_timeout", "JOBS_DB_STATEMENT_TIMEOUT"), ("lock_timeout", "JOBS_DB_LOCK_TIMEOUT")):
        seconds = float(conf.get(setting))
        if seconds > 0:
            server.append(f"-c {name}={int(seconds * 1000)}")
    if conf.get("JOBS_PREPARED_STATEMENTS"):
        # The queue's prepared statements (jobs.rows) keep one plan per connection instead of planning
        # again at each call, as the planner's own choice did for the claim (docs/benchmarks.md);
        # tests/jobs/test_lean_path.py holds that generic plan to the claim's index. Only those are
        # prepared: Django binds its own queries on the client.
        server.append("-c plan_cache_mode=force_generic_plan")
    if server:
        options["options"] = " ".join(server)
    return options


_watchdog: AnswerWatchdog | None = None


def watch(conn) -> None:
    """Put a psycopg connection opened outside Django (the LISTEN one) under the answer deadline."""
    if _watchdog is not None:
        _watchdog.add(conn)


def configure(process: str) -> None:
    """Apply the background timeouts to this process's connections; see the module docstring."""
    db = connections.settings["default"]
    extra = connection_options()
    current = dict(db.get("OPTIONS") or {})
    if "options" in extra and current.get("options"):
        extra["options"] = f"{current['options']} {extra['options']}"
    current.update(extra)
    db["OPTIONS"] = current
    for conn in connections.all(initialized_only=True):
        conn.settings_dict["OPTIONS"] = current
        conn.close()  # reopened with the options at the next query
    global _watchdog
    statement = float(conf.get("JOBS_DB_STATEMENT_TIMEOUT"))
    if statement > 0 and _watchdog is None:
        _watchdog = AnswerWatchdog(statement + ANSWER_GRACE, process)
        _watchdog.start()
        connection_created.connect(_watchdog.on_connection_created, weak=False, dispatch_uid="jobs.dbsession")
    log.info("%s database timeouts: connect=%ss statement=%ss lock=%ss keepalives_idle=%ss",
             process, conf.get("JOBS_DB_CONNECT_TIMEOUT"), conf.get("JOBS_DB_STATEMENT_TIMEOUT"),
             conf.get("JOBS_DB_LOCK_TIMEOUT"), conf.get("JOBS_DB_KEEPALIVES_IDLE"))


def timeout_fired(exc: BaseException) -> str | None:
    """The setting whose timeout ended ``exc`` (or one of its causes), if any."""
    for seen in chain(exc):
        if isinstance(seen, errors.LockNotAvailable):
            return "JOBS_DB_LOCK_TIMEOUT"
        if isinstance(seen, errors.QueryCanceled) and "statement timeout" in str(seen):
            return "JOBS_DB_STATEMENT_TIMEOUT"
        if isinstance(seen, psycopg.OperationalError) and "timeout expired" in str(seen):
            return "JOBS_DB_CONNECT_TIMEOUT"
    return None


def close_quietly() -> None:
    """Drop this thread's Django connection, whatever state it is in: the next query reconnects."""
    try:
        connections["default"].close()
    except Exception:
        pass


def first_line(exc: BaseException) -> str:
    """The first line of an error's text: PostgreSQL's messages run on with DETAIL and HINT lines."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ""


# -- what each thread is doing, for the watchdog's log line --------------------------

_labels: dict[int, str] = {}


def set_label(text: str | None) -> None:
    """Name what this thread's statements are for (``job=<id>``, ``mailbox=<id>``) in timeout logs."""
    if text:
        _labels[threading.get_ident()] = text
    else:
        _labels.pop(threading.get_ident(), None)


def current_label() -> str:
    return _labels.get(threading.get_ident()) or threading.current_thread().name


class AnswerWatchdog(threading.Thread):
    """Shuts down a connection that has waited ``deadline`` seconds for the server's answer.

    It samples each connection's libpq status twice a second: a connection
    busy with a command (a statement, a COMMIT) at every sample for longer than
    the deadline is one the server stopped answering, since the server itself
    cancels any statement at the statement timeout. No per-statement cost.
    """

    def __init__(self, deadline: float, process: str):
        super().__init__(name="db-answer-watchdog", daemon=True)
        self.deadline = deadline
        self.process = process
        self._lock = threading.Lock()
        self._watched: list[list] = []  # [weakref to the psycopg connection, thread ident, thread name, busy since]

    def on_connection_created(self, sender, connection, **kwargs) -> None:
        self.add(connection.connection)

    def add(self, conn) -> None:
        thread = threading.current_thread()
        with self._lock:
            self._watched.append([weakref.ref(conn), thread.ident, thread.name, None])

    def run(self) -> None:
        while True:
            time.sleep(WATCH_INTERVAL)
            now = time.monotonic()
            with self._lock:
                watched = list(self._watched)
            for entry in watched:
                conn = entry[0]()
                if conn is None or conn.closed:
                    with self._lock:
                        if entry in self._watched:
                            self._watched.remove(entry)
                    continue
                try:
                    busy = conn.pgconn.transaction_status == pq.TransactionStatus.ACTIVE
                except Exception:
                    continue
                if not busy:
                    entry[3] = None
                elif entry[3] is None:
                    entry[3] = now
                elif now - entry[3] > self.deadline:
                    log.warning("%s %s: no answer from the database for %.0fs (statement timeout + %.0fs); "
                                "closing the connection", _labels.get(entry[1]) or entry[2], self.process,
                                now - entry[3], ANSWER_GRACE)
                    entry[3] = None
                    try:
                        _shut_down(conn.pgconn.socket)
                    except Exception:
                        pass


def _shut_down(fd: int) -> None:
    """End the connection under ``fd`` for whoever waits on it: their read returns at once."""
    try:
        sock = socket.socket(fileno=os.dup(fd))
    except OSError:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        sock.close()

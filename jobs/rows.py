"""Running ``jobs.sql`` statements: a returned row as a Job, a fenced update, a list of ids.

Shared by the queue's modules (``queue``, ``finish``, ``operator_actions``); no state
decision is taken here. The statements go through Django's cursor wrapper (its error
mapping, ``execute_wrappers`` — the run fences — and query logging), on a cursor that binds
parameters on the server and prepares each statement once per connection
(``JOBS_PREPARED_STATEMENTS``): a claim or a finish is then executed, not parsed and planned,
at every call. Django's own cursors bind on the client and never prepare.
"""

from __future__ import annotations

import functools
import json

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection
from django.db.backends.postgresql.base import ServerBindingCursor

from . import conf, sql
from .models import Job

ENQUEUE_TRIES = 3
# Django opens connections with psycopg's prepare_threshold None, which prepares nothing, not even on
# request. A threshold no statement reaches prepares only what asks (PreparingCursor): Django's own
# cursors bind on the client and never ask.
ONLY_ON_REQUEST = 2**31 - 1
UNIQUE_VIOLATION = "23505"


class EnqueueRace(Exception):
    """The dedup_key kept changing hands between insert and re-read (3 tries)."""


class PreparingCursor(ServerBindingCursor):
    """A psycopg cursor that prepares what it executes (psycopg keeps the last 100 per connection)."""

    def execute(self, query, params=None, *, prepare=None, binary=None):
        result = super().execute(query, params, prepare=True if prepare is None else prepare, binary=binary)
        if self._query is None:
            # psycopg keeps no query text for an execution of a prepared statement; Django's query
            # log (DEBUG, CaptureQueriesContext) reads it from here, so it names the statement.
            self._query = _Sent(query.encode() if isinstance(query, str) else query)
        return result


class _Sent:
    """The one attribute of psycopg's query record that Django's ``last_executed_query`` reads."""

    __slots__ = ("query",)

    def __init__(self, query: bytes):
        self.query = query


def queue_cursor():
    """A cursor for the queue's statements: Django's wrapper, around a preparing cursor when that is on."""
    if not conf.get("JOBS_PREPARED_STATEMENTS"):
        return connection.cursor()
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    with connection.wrap_database_errors:
        raw = connection.connection
        if raw.prepare_threshold is None:
            raw.prepare_threshold = ONLY_ON_REQUEST
        # What connection.cursor() does, with our cursor class in place of the connection's.
        return connection._prepare_cursor(PreparingCursor(raw))


def ids(statement: str, params: dict) -> list:
    with queue_cursor() as cursor:
        cursor.execute(statement, params)
        return [row[0] for row in cursor.fetchall()]


def update(statement: str, job: Job, **params) -> bool:
    with queue_cursor() as cursor:
        cursor.execute(statement, {"id": job.id, "attempt": job.attempts, **params})
        return cursor.rowcount == 1


_JOB_FIELDS = [c.strip() for c in sql.JOB_COLUMNS.split(",")]


def one(statement: str, params: dict) -> Job | None:
    """The row a statement returns (``sql.JOB_COLUMNS`` first, in order) as a Job, or None.

    Not ``Job.objects.raw``: it maps columns and looks up converters on every
    call, about 0.1 ms of CPU per claim and per enqueue (bench/queue.py).
    """
    with queue_cursor() as cursor:
        cursor.execute(statement, params)
        row = cursor.fetchone()
    return None if row is None else _as_job(row)


def many(statement: str, params: dict) -> list[Job]:
    """Every row a statement returns, in order, each as ``one`` returns its row."""
    with queue_cursor() as cursor:
        cursor.execute(statement, params)
        return [_as_job(row) for row in cursor.fetchall()]


def _as_job(row) -> Job:
    values = list(row)
    for i, convert in _converters():
        if values[i] is not None:
            values[i] = convert(values[i], None, connection)
    return Job.from_db(connection.alias, _JOB_FIELDS, values)


@functools.cache
def _converters() -> list:
    """``(position, from_db_value)`` of the ``_JOB_FIELDS`` that convert what the driver returns (the JSON ones)."""
    fields = [Job._meta.get_field(name) for name in _JOB_FIELDS]
    return [(i, f.from_db_value) for i, f in enumerate(fields) if hasattr(f, "from_db_value")]


def to_json(value) -> str:
    return json.dumps(value, cls=DjangoJSONEncoder)

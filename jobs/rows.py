"""Running ``jobs.sql`` statements: a returned row as a Job, a fenced update, a list of ids.

Shared by the queue's modules (``queue``, ``finish``, ``operator_actions``); no state
decision is taken here. The statements go through Django's cursor wrapper (its error
mapping, ``execute_wrappers`` — the run fences — and query logging), on a cursor that binds
parameters on the server and prepares each statement once per connection
(``JOBS_PREPARED_STATEMENTS``): a claim or a finish is then executed, not parsed and planned,
at every call. Django's own cursors bind on the client and never prepare. A closed one is kept
for the connection's next statement (``PreparingCursor.close``).
"""

from __future__ import annotations

import functools
import json

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.core.signals import setting_changed
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.backends.postgresql.base import ServerBindingCursor
from django.db.models.base import ModelState
from django.dispatch import receiver
from psycopg.types.datetime import TimestamptzLoader

from . import conf, sql
from .models import Job

ENQUEUE_TRIES = 3
# Django opens connections with psycopg's prepare_threshold None, which prepares nothing, not even on
# request. A threshold no statement reaches prepares only what asks (PreparingCursor): Django's own
# cursors bind on the client and never ask.
ONLY_ON_REQUEST = 2**31 - 1
UNIQUE_VIOLATION = "23505"
# The attribute of a psycopg connection that lists its free PreparingCursors.
FREE_CURSORS = "_seoinsight_free_cursors"


class EnqueueRace(Exception):
    """The dedup_key kept changing hands between insert and re-read (3 tries)."""


class PreparingCursor(ServerBindingCursor):
    """A psycopg cursor that prepares what it executes (psycopg keeps the last 100 per connection).

    Closing one puts it back among its connection's free cursors, which ``queue_cursor`` hands out
    again: a new psycopg cursor starts with empty caches of the dumpers and loaders its statement
    needs, about 0.02 ms of CPU per statement (docs/benchmarks.md, enqueue). One is never used by
    two statements at once: a statement sent while another's cursor is out (a run fence's
    heartbeat) takes another cursor.
    """

    def close(self) -> None:
        free = getattr(self._conn, FREE_CURSORS, None)
        if free is None:
            free = []
            setattr(self._conn, FREE_CURSORS, free)
        free.append(self)

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
    # The wrapper itself, once: every attribute read through django.db.connection looks the alias up
    # again in the thread's connections (a few microseconds each, six of them per statement).
    db = connections[DEFAULT_DB_ALIAS]
    if not _preparing():
        return db.cursor()
    db.close_if_health_check_failed()
    db.ensure_connection()
    with db.wrap_database_errors:
        raw = db.connection
        if raw.prepare_threshold is None:
            raw.prepare_threshold = ONLY_ON_REQUEST
        free = getattr(raw, FREE_CURSORS, None)
        # What connection.cursor() does, with our cursor class in place of the connection's.
        return db._prepare_cursor(free.pop() if free else _new_cursor(db, raw))


@functools.cache
def _preparing() -> bool:
    """``JOBS_PREPARED_STATEMENTS``, read once (~3 µs a read, and every queue statement asks); a change of the
    Django setting (a test's ``settings``) is seen at once."""
    return bool(conf.get("JOBS_PREPARED_STATEMENTS"))


@receiver(setting_changed)
def _forget_preparing(setting, **kwargs) -> None:
    if setting == "JOBS_PREPARED_STATEMENTS":
        _preparing.cache_clear()


def _new_cursor(db, raw) -> PreparingCursor:
    """A PreparingCursor that reads timestamptz with psycopg's own loader (C) when Django's would give the same.

    Django reads timestamptz through a subclass of psycopg's Python loader, which psycopg cannot swap
    for its C one: ~3 µs a value against ~1, two or three values a claimed job. On a UTC session both
    give aware datetimes in ``datetime.timezone.utc`` (tests/jobs/test_enqueue_paths.py holds a claimed
    job equal to Django's); on any other zone Django's stays.
    """
    cursor = PreparingCursor(raw)
    if settings.USE_TZ and db.timezone_name == "UTC":
        cursor.adapters.register_loader("timestamptz", TimestamptzLoader)
    return cursor


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
    row = first(statement, params)
    return None if row is None else _as_job(row)


def claimed(statement: str, params: dict) -> tuple[list[Job], float | None]:
    """The jobs a claim returns, in order, and the server's seconds into the statement at its last claim (None
    when it claimed none). Each row is a job's ``sql.JOB_COLUMNS``, then ``sql.SERVER_SECONDS``."""
    with queue_cursor() as cursor:
        cursor.execute(statement, params)
        found = cursor.fetchall()
    return [_as_job(row) for row in found], max((row[-1] for row in found), default=None)


def finished_and_claimed(statement: str, params: dict) -> tuple[set, list[Job], float | None]:
    """What ``sql.FINISH_AND_CLAIM`` answers: the ids of the runs it recorded, the jobs it claimed, in order, and
    the server's seconds as ``claimed`` gives them.

    Each row is the recorded ids, then a claimed job's ``sql.JOB_COLUMNS`` and ``sql.SERVER_SECONDS`` (NULL
    when none was claimed).
    """
    with queue_cursor() as cursor:
        cursor.execute(statement, params)
        found = cursor.fetchall()
    jobs = [row[1:] for row in found if row[1] is not None]
    return set(found[0][0]), [_as_job(row) for row in jobs], max((row[-1] for row in jobs), default=None)


def _as_job(row) -> Job:
    """The Job ``Job.from_db`` would make of a row that starts with ``sql.JOB_COLUMNS`` (what follows them is not
    the Job's); the fields not read stay deferred."""
    values = dict(zip(_JOB_FIELDS, row[:len(_JOB_FIELDS)], strict=True))
    for name, convert in _converters():
        if values[name] is not None:
            values[name] = convert(values[name], None, connection)
    return _loaded(values, DEFAULT_DB_ALIAS)  # the queue's cursor is always the default database's (queue_cursor)


def _loaded(values: dict, alias: str) -> Job:
    """A Job as ``Job.from_db`` makes it, from its fields' values by attname, in a fifth of its time (~3 µs against ~15).

    Every claimed and every enqueued job is made here, in a worker's loop between two statements or
    in a producer's. ``from_db`` goes through ``Model.__init__``, which sets each field by name and
    sends pre_init and post_init (no receiver listens for Job). The values go straight into the
    instance's ``__dict__`` instead, as ``__init__`` leaves them; a field without a value stays
    absent, which is how Django marks a deferred field (read on first access).
    tests/jobs/test_enqueue_paths.py holds both kinds equal to Django's.
    """
    job = _new_job(Job)
    job.__dict__.update(values)
    state = job.__dict__["_state"] = ModelState()
    state.adding = False
    state.db = alias
    return job


_new_job = object.__new__


@functools.cache
def _converters() -> list:
    """``(name, from_db_value)`` of the ``_JOB_FIELDS`` that convert what the driver returns (the JSON ones)."""
    fields = [Job._meta.get_field(name) for name in _JOB_FIELDS]
    return [(f.attname, f.from_db_value) for f in fields if hasattr(f, "from_db_value")]


def first(statement: str, params: dict) -> tuple | None:
    """The first row a statement returns, as the driver gives it, or None."""
    with queue_cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchone()


def queued_job(row: tuple, params: dict) -> Job:
    """The job ``sql.ENQUEUE`` just inserted, from its row (created_at, the notification, the payload when one
    was given) and the statement's ``params``.

    The rest of the row is known without reading it: what enqueue gave, and the other columns'
    defaults (``Job``'s ``db_default``, else NULL). Every field is set, none deferred (a Job from
    ``sql.JOB_COLUMNS`` reads the six others with a query of its own when asked), as a read of the
    row would give them: tests/jobs/test_enqueue_paths.py holds the two equal.
    """
    created_at, run_after = row[0], params["run_after"]
    fresh = {
        "id": params["id"], "org_id": params["org_id"], "type": params["type"], "status": "queued",
        "attempts": 0, "uncounted_attempts": 0, "outages": 0,
        "dedup_key": params["dedup_key"], "enqueued_key": params["dedup_key"],
        # The database's own value: jsonb orders keys and writes numbers its way. None given: the default, {}.
        "payload": json.loads(row[2]) if len(row) > 2 else {},
        "progress": None, "report": None, "error": None, "traceback": None,
        "created_at": created_at, "started_at": None, "finished_at": None,
        # In the zone the database answers in, as a read would give it.
        "run_after": None if run_after is None else run_after.astimezone(created_at.tzinfo),
        "priority": params["priority"], "queue_name": params["queue_name"], "cancel_requested_at": None,
        "worker_ids": [],
    }
    return _loaded(fresh, DEFAULT_DB_ALIAS)


# One encoder for every call: json.dumps(cls=...) builds one per call. Same text.
_encoder = DjangoJSONEncoder()


def to_json(value) -> str:
    return _encoder.encode(value)


def array_text(values) -> str:
    """``values`` (str or None each) as PostgreSQL's text for an array, for a parameter the statement casts
    (``%(x)s::text[]``, ``::uuid[]``, ``::int[]``): every element quoted, backslashes and quotes escaped,
    None as NULL.

    psycopg sends a list through its array dumper, in Python, element by element: with eight slots,
    dumping a turn's five lists took 15 % of the loop thread's samples (py-spy; docs/benchmarks.md).
    One string goes out as it is, and the server parses it.
    """
    return "{" + ",".join("NULL" if v is None else '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
                          for v in values) + "}"

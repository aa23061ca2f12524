"""Running ``jobs.sql`` statements: a returned row as a Job, a fenced update, a list of ids.

Shared by the queue's modules (``queue``, ``finish``, ``operator_actions``); no state
decision is taken here.
"""

from __future__ import annotations

import functools
import json

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection

from . import sql
from .models import Job

ENQUEUE_TRIES = 3
UNIQUE_VIOLATION = "23505"


class EnqueueRace(Exception):
    """The dedup_key kept changing hands between insert and re-read (3 tries)."""


def ids(statement: str, params: dict) -> list:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return [row[0] for row in cursor.fetchall()]


def update(statement: str, job: Job, **params) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(statement, {"id": job.id, "attempt": job.attempts, **params})
        return cursor.rowcount == 1


_JOB_FIELDS = [c.strip() for c in sql.JOB_COLUMNS.split(",")]


def one(statement: str, params: dict) -> Job | None:
    """The row a statement returns (``sql.JOB_COLUMNS`` first, in order) as a Job, or None.

    Not ``Job.objects.raw``: it maps columns and looks up converters on every
    call, about 0.1 ms of CPU per claim and per enqueue (bench/queue.py).
    """
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        row = cursor.fetchone()
    return None if row is None else _as_job(row)


def many(statement: str, params: dict) -> list[Job]:
    """Every row a statement returns, in order, each as ``one`` returns its row."""
    with connection.cursor() as cursor:
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

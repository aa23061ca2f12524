"""Retention: finished jobs are deleted once old enough (``manage.py prunejobs``, and an opt-in duty).

What is deleted: ``done`` jobs finished more than JOBS_PRUNE_DONE_AFTER ago and
``failed`` ones finished more than JOBS_PRUNE_FAILED_AFTER ago (a command's
flags may say otherwise). What never is: a queued or running job; a job of a
kept type (``ALWAYS_KEPT``, the Imports page's event log, plus the deployment's
JOBS_PRUNE_KEEP_TYPES); a job another table's row still points at (an Import's
job carries that import's report), unless the database clears that pointer
itself (a schedule's last job: ON DELETE SET NULL).

How, without holding the queue. Each batch is one statement in its own short
transaction: it locks up to JOBS_PRUNE_BATCH finished rows with SKIP LOCKED
(it never waits on anyone: a row an operator is acting on is left for the next
prune) and deletes them. Claims lock queued rows only, so neither ever waits on
the other. A batch walks the primary key in order from where the last one
stopped, and only below the first id of the cutoff's millisecond: ids are
UUIDv7, made at enqueue (created, then claimed, then finished), so a job
finished before the cutoff has a smaller id. No batch reads the table's newer
part or rereads what an earlier batch passed. Every batch also checks
finished_at against the cutoff, so an id newer than its finish (a hand-made
one, or one made by an enqueuing host whose clock ran ahead of the
database's: jobs.ids) only keeps its row longer, never deletes it early.

The periodic prune (``PeriodicPrune``, a duty of every long-running worker)
is off unless JOBS_PRUNE_EVERY > 0. One worker at a time holds a session
advisory lock and prunes every JOBS_PRUNE_EVERY seconds; the others try the
lock at the same pace and take over when its holder's connection ends (exit,
kill -9, lost database). A long prune is done in slices of SLICE_SECONDS so
the other duties of its thread still run between them.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.apps import apps
from django.core import checks
from django.db import connection

from . import conf
from .models import Job

log = logging.getLogger(__name__)

# Kept whatever their age and whatever the settings say. map_reconcile rows are
# the Imports page's event log (imports.views.reconcile_events), so no purge
# ever takes them.
ALWAYS_KEPT = ("map_reconcile",)

# The periodic prune's advisory lock (two-int form): the claim guard has 0x5E01, live mail 0x5E12.
LOCK_NAMESPACE = 0x5E21
LOCK_KEY = 1
# Longest one turn of the periodic prune deletes before giving its thread back to the other duties.
SLICE_SECONDS = 1.0
# How often a worker looks at JOBS_PRUNE_EVERY again while the prune is off.
OFF_RECHECK_SECONDS = 60.0

FINISHED = ("done", "failed")
_UNITS = {"w": timedelta(weeks=1), "d": timedelta(days=1), "h": timedelta(hours=1), "m": timedelta(minutes=1),
          "s": timedelta(seconds=1)}
_AGE = re.compile(r"(\d+)\s*([wdhms])")
NEVER = "never"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# -- pure rules ----------------------------------------------------------------------------------

def parse_age(text: str) -> timedelta | None:
    """An age as operators write it: ``14d``, ``12h``, ``30m``, ``2w``, ``90s``, or ``1d12h``; ``never``: None.

    >>> parse_age("14d")
    datetime.timedelta(days=14)
    >>> parse_age("1d12h")
    datetime.timedelta(days=1, seconds=43200)
    >>> parse_age("never") is None
    True

    Raises ValueError, saying what is accepted, for anything else (a bare number, a
    unit it does not know, zero: "delete everything finished" is never a typo away).
    """
    value = str(text).strip().lower()
    if value == NEVER:
        return None
    parts = _AGE.findall(value)
    if not value or "".join(n + u for n, u in parts) != re.sub(r"\s+", "", value):
        raise ValueError(f"{text!r} is not an age: write a number and a unit (w, d, h, m, s), e.g. 14d, 12h, "
                         f"30m or 1d12h, or {NEVER!r}")
    age = sum((int(n) * _UNITS[u] for n, u in parts), timedelta())
    if age <= timedelta():
        raise ValueError(f"{text!r} is no age: it must be more than zero (or {NEVER!r})")
    return age


def format_age(age: timedelta | None) -> str:
    """The text ``parse_age`` reads back as ``age``, in the largest unit up to days: 14d, 36h, 90m…

    >>> format_age(timedelta(days=14)), format_age(timedelta(hours=36)), format_age(None)
    ('14d', '36h', 'never')
    """
    if age is None:
        return NEVER
    seconds = int(age.total_seconds())
    for unit in "dhms":
        step = int(_UNITS[unit].total_seconds())
        if seconds % step == 0:
            return f"{seconds // step}{unit}"
    return f"{seconds}s"  # pragma: no cover (every whole number of seconds is caught by "s")


def ids_before(moment: datetime) -> uuid.UUID:
    """The smallest UUIDv7 of the millisecond after ``moment``: every id made at or before it is smaller.

    A UUIDv7's first 48 bits are its Unix time in milliseconds, and PostgreSQL
    orders uuids byte by byte, so ids order by the millisecond they were made in.
    """
    millis = (moment - EPOCH) // timedelta(milliseconds=1) + 1  # in integers: a float timestamp may round
    return uuid.UUID(bytes=millis.to_bytes(6, "big") + bytes(10))


@dataclass(frozen=True)
class Pass:
    """One status's share of a prune: its rows finished before ``cutoff``, looked for below ``id_below``."""

    status: str
    older_than: timedelta
    cutoff: datetime
    id_below: uuid.UUID


def plan(*, now: datetime, done_after: timedelta | None, failed_after: timedelta | None) -> list[Pass]:
    """The passes of a prune at ``now`` (the database's clock): one per status with an age, done first.

    >>> from datetime import UTC
    >>> [p.status for p in plan(now=datetime(2026, 1, 31, tzinfo=UTC), done_after=timedelta(days=14),
    ...                         failed_after=None)]
    ['done']
    """
    passes = []
    for status, age in (("done", done_after), ("failed", failed_after)):
        if age is not None:
            cutoff = now - age
            passes.append(Pass(status, age, cutoff, ids_before(cutoff)))
    return passes


# -- the statements ------------------------------------------------------------------------------

def referencing_columns() -> list[tuple[str, str]]:
    """(table, column) of every model field that points at a job: such a job is kept while a row points at it.

    Read from the installed models, not imported (jobs knows no app above it):
    today ``imports_import.job_id``, whose job's report is the import's counts. A
    reference the database clears itself when its job goes (ON DELETE SET NULL:
    ``jobs_schedule.last_job_id``) keeps no job.
    """
    cleared = cleared_by_database()
    found = []
    for model in apps.get_models(include_auto_created=True):
        for f in model._meta.local_fields:
            if f.is_relation and f.related_model is Job and model is not Job:
                found.append((model._meta.db_table, f.column))
    return sorted(ref for ref in found if ref not in cleared)


# The foreign keys to jobs whose constraint sets the column to NULL on delete (pg_constraint's
# confdeltype 'n'), as (table, column).
CLEARED_REFERENCES = """
SELECT c.conrelid::regclass::text, a.attname
FROM pg_constraint AS c
JOIN pg_attribute AS a ON a.attrelid = c.conrelid AND a.attnum = ANY(c.conkey)
WHERE c.contype = 'f' AND c.confrelid = 'jobs'::regclass AND c.confdeltype = 'n'
"""


def cleared_by_database() -> set[tuple[str, str]]:
    with connection.cursor() as cursor:
        cursor.execute(CLEARED_REFERENCES)
        return {(table, column) for table, column in cursor.fetchall()}


def prunable_where(references: list[tuple[str, str]]) -> str:
    """One pass's rows, as a WHERE over ``j``: the id range first, so the primary key serves the walk.

    A reference is checked through its column's index (Django indexes foreign keys).
    """
    quote = connection.ops.quote_name
    unreferenced = "".join(f"\n      AND NOT EXISTS (SELECT 1 FROM {quote(table)} AS r WHERE r.{quote(column)} = j.id)"
                           for table, column in references)
    return f"""j.id > %(after)s AND j.id < %(below)s
      AND j.status = %(status)s AND j.finished_at < %(cutoff)s
      AND j.type <> ALL(%(kept)s::text[]){unreferenced}"""


# One batch: lock the next rows of the pass in id order, skipping any row someone
# holds (an operator requeueing it: theirs to keep), and delete them. FOR UPDATE
# re-reads a row that changed since the statement began against the WHERE, so a
# row requeued meanwhile is no longer finished and is left alone. The deleted
# rows come back counted by type, with the largest id: the next batch starts after it.
# The delete finds them by primary key (= ANY of an array, as the claim does): a
# join would let the planner pick a scan of the whole table once batches are large.
DELETE_BATCH = """
WITH doomed AS MATERIALIZED (
    SELECT j.id FROM jobs AS j
    WHERE {prunable}
    ORDER BY j.id
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
),
gone AS (
    DELETE FROM jobs AS d WHERE d.id = ANY(ARRAY(SELECT id FROM doomed))
    RETURNING d.id, d.type
)
SELECT type, count(*), max(id::text) FROM gone GROUP BY type
"""

# --dry-run: what one pass would delete, by type; reads, locks nothing.
COUNT_PASS = """
SELECT j.type, count(*) FROM jobs AS j
WHERE {prunable}
GROUP BY j.type
"""

# The periodic pruner's lock: already ours on this connection (a session lock
# outlives our turns), else tried once. CASE, unlike OR, evaluates in order: a
# holder never takes the lock a second time.
HOLD_LOCK = """
SELECT CASE WHEN EXISTS (
           SELECT 1 FROM pg_locks
           WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted
             AND classid = %(namespace)s::int::oid AND objid = %(key)s::int::oid AND objsubid = 2)
       THEN true
       ELSE pg_try_advisory_lock(%(namespace)s, %(key)s) END
"""
RELEASE_LOCK = "SELECT pg_advisory_unlock(%(namespace)s, %(key)s)"

FIRST_ID = uuid.UUID(int=0)


# -- a prune run ---------------------------------------------------------------------------------

def kept_types() -> tuple[str, ...]:
    extra = [t.strip() for t in conf.get("JOBS_PRUNE_KEEP_TYPES") if t and t.strip()]
    return tuple(dict.fromkeys([*ALWAYS_KEPT, *extra]))


def database_now() -> datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]


@dataclass
class Prune:
    """One prune: its passes planned once, on the database's clock, then deleted batch by batch.

    ``step`` runs one batch; a Prune can be driven to the end (``run``) or in
    slices (``run(budget=…)``), resuming where it stopped.
    """

    passes: list[Pass]
    batch_size: int
    kept: tuple[str, ...]
    references: list[tuple[str, str]]
    deleted: Counter = field(default_factory=Counter)  # (status, type) -> rows
    batches: int = 0
    seconds: float = 0.0
    _pass: int = 0
    _after: uuid.UUID = FIRST_ID

    @classmethod
    def start(cls, *, done_after: timedelta | None, failed_after: timedelta | None, batch_size: int | None = None,
              now: datetime | None = None) -> Prune:
        batch_size = int(batch_size or conf.get("JOBS_PRUNE_BATCH"))
        if batch_size < 1:
            raise ValueError(f"the batch size must be at least 1, not {batch_size}")
        now = now or database_now()
        return cls(plan(now=now, done_after=done_after, failed_after=failed_after), batch_size, kept_types(),
                   referencing_columns())

    @classmethod
    def from_settings(cls) -> Prune:
        return cls.start(done_after=parse_age(conf.get("JOBS_PRUNE_DONE_AFTER")),
                         failed_after=parse_age(conf.get("JOBS_PRUNE_FAILED_AFTER")))

    @property
    def finished(self) -> bool:
        return self._pass >= len(self.passes)

    @property
    def total(self) -> int:
        return sum(self.deleted.values())

    def _params(self, current: Pass, after: uuid.UUID) -> dict:
        return {"after": after, "below": current.id_below, "status": current.status, "cutoff": current.cutoff,
                "kept": list(self.kept), "batch": self.batch_size}

    def next_batch(self) -> tuple[str, dict]:
        """The statement and parameters of the next batch (``step`` runs them; tests EXPLAIN them)."""
        current = self.passes[self._pass]
        return DELETE_BATCH.format(prunable=prunable_where(self.references)), self._params(current, self._after)

    def step(self) -> int:
        """Delete the next batch (its own transaction, in autocommit); rows deleted."""
        if self.finished:
            return 0
        current = self.passes[self._pass]
        started = time.monotonic()
        with connection.cursor() as cursor:
            cursor.execute(*self.next_batch())
            rows = cursor.fetchall()
        self.seconds += time.monotonic() - started
        self.batches += 1
        count = 0
        for job_type, n, _last in rows:
            self.deleted[(current.status, job_type)] += n
            count += n
        if count < self.batch_size:
            # Fewer than a batch: nothing of this pass is left below id_below (but rows
            # skipped as locked, or changed meanwhile: the next prune's).
            self._pass, self._after = self._pass + 1, FIRST_ID
        else:
            self._after = uuid.UUID(max(last for _t, _n, last in rows))
        return count

    def run(self, budget: float | None = None) -> bool:
        """Batches until the prune is finished (True) or ``budget`` seconds have gone (False)."""
        ends = None if budget is None else time.monotonic() + budget
        while not self.finished:
            self.step()
            if ends is not None and time.monotonic() >= ends:
                break
        return self.finished

    def count(self) -> Counter:
        """What the whole prune would delete, (status, type) -> rows, deleting nothing (``--dry-run``)."""
        found = Counter()
        with connection.cursor() as cursor:
            for current in self.passes:
                cursor.execute(COUNT_PASS.format(prunable=prunable_where(self.references)),
                               self._params(current, FIRST_ID))
                for job_type, n in cursor.fetchall():
                    found[(current.status, job_type)] = n
        return found

    def summary(self) -> str:
        rate = self.total / self.seconds if self.seconds > 0 else 0.0
        by_status = ", ".join(f"{status} {sum(n for (s, _t), n in self.deleted.items() if s == status)}"
                              for status in FINISHED)
        return (f"deleted {self.total} job(s) ({by_status}) in {self.batches} batch(es), "
                f"{self.seconds:.2f} s ({rate:.0f} jobs/s)")


@checks.register()
def check_prune_settings(app_configs=None, **kwargs):
    """jobs.E020: an age the prune cannot read (the periodic prune would fail at every turn); jobs.E021: a batch
    size below one."""
    if conf.SETTINGS.unparsable():
        return []  # jobs.E002 names them
    errors = []
    for name in ("JOBS_PRUNE_DONE_AFTER", "JOBS_PRUNE_FAILED_AFTER"):
        try:
            parse_age(conf.get(name))
        except ValueError as exc:
            meaning = next(s.meaning for s in conf.SETTINGS if s.name == name)
            errors.append(checks.Error(f"{name}: {exc}.", hint=f"{name}: {meaning}.", id="jobs.E020"))
    if int(conf.get("JOBS_PRUNE_BATCH")) < 1:
        errors.append(checks.Error(f"JOBS_PRUNE_BATCH is {conf.get('JOBS_PRUNE_BATCH')!r}; it must be at least 1.",
                                   id="jobs.E021"))
    return errors


# -- the periodic prune --------------------------------------------------------------------------

class PeriodicPrune:
    """The duty ``jobs.prune``: with JOBS_PRUNE_EVERY > 0, the worker holding the lock prunes at that pace.

    Called from the duty thread (its own connection: the session lock lives on
    it, and is gone with it). ``interval`` is the duty's: JOBS_PRUNE_EVERY, or a
    tick while a prune is halfway, so it resumes at once after the other duties.
    """

    def __init__(self):
        self.current: Prune | None = None
        self.holding = False

    @staticmethod
    def every() -> float:
        return float(conf.get("JOBS_PRUNE_EVERY") or 0)

    def interval(self) -> float:
        if self.current is not None:
            return 0.0  # the duties' tick
        every = self.every()
        return every if every > 0 else OFF_RECHECK_SECONDS

    def __call__(self) -> int:
        """One turn; returns the rows it deleted."""
        if self.every() <= 0:
            self.release()
            return 0
        try:
            if not self._hold():
                self.current = None
                return 0
            if self.current is None:
                self.current = Prune.from_settings()
                log.debug("prune started: %s", ", ".join(f"{p.status} before {p.cutoff:%Y-%m-%d %H:%M:%S%z}"
                                                         for p in self.current.passes))
            before = self.current.total
            if self.current.run(budget=SLICE_SECONDS):
                done, self.current = self.current, None
                log.info("prune: %s", done.summary())
                return done.total - before
            return self.current.total - before
        except BaseException:
            # The next turn starts over: on a new connection, the lock may be someone else's.
            self.current, self.holding = None, False
            raise

    def _hold(self) -> bool:
        with connection.cursor() as cursor:
            cursor.execute(HOLD_LOCK, {"namespace": LOCK_NAMESPACE, "key": LOCK_KEY})
            held = bool(cursor.fetchone()[0])
        if held and not self.holding:
            log.info("prune: this worker prunes finished jobs every %.0f s from now on", self.every())
        self.holding = held
        return held

    def release(self) -> None:
        """Give the lock back (the prune was turned off, a test ends); a no-op when not held."""
        self.current = None
        if self.holding:
            self.holding = False
            with connection.cursor() as cursor:
                cursor.execute(RELEASE_LOCK, {"namespace": LOCK_NAMESPACE, "key": LOCK_KEY})


periodic = PeriodicPrune()

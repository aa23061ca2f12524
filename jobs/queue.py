"""Enqueue, claim and finish: the queue's transitions, run through ``jobs.sql``.

``enqueue`` is meant to run inside the caller's transaction: the job exists if
and only if the business row that asked for it does, and workers are notified
only when that transaction commits.
"""

from __future__ import annotations

import functools
import json
import logging
import math
from dataclasses import dataclass, field

from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, connection, transaction

from . import conf, registry, sql
from .models import DedupScope, Job, JobStatus

log = logging.getLogger(__name__)

ENQUEUE_TRIES = 3
UNIQUE_VIOLATION = "23505"


class JobLost(Exception):
    """This run no longer owns its job: it was swept and re-claimed, or failed by an operator."""


class EnqueueRace(Exception):
    """The dedup_key kept changing hands between insert and re-read (3 tries)."""


def enqueue(type: str, *, org_id: str, payload: dict | None = None, dedup_key: str | None = None) -> Job:
    """Queue a job of a registered ``type`` and return it.

    With a ``dedup_key`` (convention ``"<type>:<scope>"``), while a live job holds
    the key, that job is returned instead of a new one. If the holder finishes
    between our conflict and our re-read, the key is free again: insert again
    (seed 001: bounded, 3 tries) rather than report an error.
    """
    registry.get(type)  # fail early, in the caller, on a typo
    if not org_id:
        raise ValueError("org_id is required")
    params = {
        "org_id": org_id,
        "type": type,
        "payload": _json(payload or {}),
        "dedup_key": dedup_key,
        "channel": conf.NOTIFY_CHANNEL,
    }
    for _ in range(ENQUEUE_TRIES):
        job = _one(sql.ENQUEUE, params)
        if job is not None:
            return job
        job = _one(sql.FIND_BY_DEDUP_KEY, params)
        if job is not None:
            return job
    raise EnqueueRace(f"could not enqueue {type} with dedup_key={dedup_key!r} after {ENQUEUE_TRIES} tries")


def enqueue_many(type: str, *, org_id: str, items: list[tuple[dict, str | None]]) -> int:
    """Queue one job of ``type`` per ``(payload, dedup_key)`` in one statement; returns how many were queued.

    For producers that create many rows in one transaction. An item whose key a
    live job holds is skipped (that job already covers it); unlike ``enqueue``
    there is no re-read, so nothing is returned for it.
    """
    registry.get(type)
    if not org_id:
        raise ValueError("org_id is required")
    if not items:
        return 0
    params = {
        "org_id": org_id,
        "type": type,
        "payloads": [_json(payload or {}) for payload, _ in items],
        "dedup_keys": [dedup_key for _, dedup_key in items],
        "channel": conf.NOTIFY_CHANNEL,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql.ENQUEUE_MANY, params)
        return len(cursor.fetchall())


@dataclass(frozen=True)
class ClaimPlan:
    """What a claim sends, derived from the registry once per registry generation."""

    params: dict
    guards: dict  # type -> its one_running_per key, for the guarded types
    guarded: str | None  # the type-by-type claim (sql.claim_guarded); None: no guarded type


@functools.lru_cache(maxsize=1)
def _plan(generation: int) -> ClaimPlan:
    types = registry.all_types().values()
    guards = {t.name: t.one_running_per for t in types if t.one_running_per}
    params = {
        "types": [t.name for t in types],
        "plain_types": [t.name for t in types if not t.one_running_per],
        "guard_types": list(guards),
        "guard_keys": list(guards.values()),
        "active_scoped": [t.name for t in types if t.dedup_scope == DedupScope.ACTIVE],
    }
    return ClaimPlan(params, guards, sql.claim_guarded(tuple(guards.items())) if guards else None)


def claim_plan() -> ClaimPlan:
    return _plan(registry.generation())


def claim() -> Job | None:
    """Take the oldest runnable job of a registered type, mark it running, commit. None if there is none.

    Short on purpose: the transaction ends before the handler starts, so no row
    stays locked while work happens. None means nothing is claimable now: a
    claim that loses a guard race looks again (the next statement sees the
    winner running), it never gives up with claimable work queued.
    """
    plan = claim_plan()
    if plan.guarded is None:
        # One statement is its own transaction: no BEGIN/COMMIT round trips.
        return _one(sql.CLAIM_UNGUARDED, plan.params)
    while True:
        with transaction.atomic():
            # The front of the queue first; type by type only when it is all blocked.
            job = _one(sql.CLAIM_WINDOWED, plan.params) or _one(plan.guarded, plan.params)
            if job is None:
                return None
            key = plan.guards.get(job.type)
            if not key or not _guard_conflict(job, key):
                return job
            # Another worker claimed a job with the same value while our snapshot
            # was taken: give this one back and choose again.
            transaction.set_rollback(True)
            log.info("job=%s claim yielded: a %s with the same %s started meanwhile", job.id, job.type, key)


def _guard_conflict(job: Job, key: str) -> bool:
    """Under the value's advisory lock, is another job of the type with this value running?"""
    args = {"namespace": sql.GUARD_LOCK_NAMESPACE, "key": key, "id": job.id}
    with connection.cursor() as cursor:
        cursor.execute(sql.GUARD_LOCK, args)
        if cursor.fetchone() is None:
            return False  # no value (missing or null): the guard does not apply
        cursor.execute(sql.GUARD_CONFLICT, args)
        return cursor.fetchone()[0]


def report_progress(job: Job, done=None, total=None, **fields) -> None:
    if done is not None:
        fields["done"] = done
    if total is not None:
        fields["total"] = total
    fields.pop("updated_at", None)  # the database clock writes the heartbeat
    encoded = _json(storable(fields))
    if len(encoded) > MAX_REPORT_BYTES:
        raise ValueError(f"progress of {len(encoded)} bytes is over the {MAX_REPORT_BYTES} byte limit")
    if not _update(sql.PROGRESS, job, fields=encoded):
        raise JobLost(f"job {job.id} attempt {job.attempts} is no longer running here")
    job.progress = {**(job.progress or {}), **fields}


def heartbeat(job: Job) -> bool:
    """Refresh ``progress.updated_at`` only. False if the job is no longer ours."""
    return _update(sql.PROGRESS, job, fields="{}")


# -- what a run produced, made storable ------------------------------------------------
# PostgreSQL refuses NUL in text and jsonb, NaN/Infinity and lone surrogates in
# jsonb; a huge value costs every page that shows it. A finish must land whatever
# the handler produced, so each value is cleaned and capped before it is written.

MAX_ERROR_CHARS = 2000
MAX_TRACEBACK_CHARS = 20_000
MAX_REPORT_BYTES = 1_000_000
MAX_REPORT_DEPTH = 64
REPLACEMENT = "\ufffd"


class UnstorableReport(ValueError):
    """The handler's report is not JSON at all (a set, an object); the message says what."""


def storable_text(text, limit: int, *, keep: str = "head") -> str:
    """``text`` without what PostgreSQL refuses (NUL, lone surrogates), at most ``limit`` characters.

    >>> storable_text("a\\x00b", 10) == "a\\ufffdb"
    True
    >>> storable_text("x" * 20, 8), storable_text("x" * 20 + "END", 8, keep="tail")
    ('xxxxxxx…', '…xxxxEND')
    """
    text = str(text)
    if len(text) > limit:
        text = text[: limit - 1] + "…" if keep == "head" else "…" + text[-(limit - 1):]
    return _clean_str(text)


def storable(value, depth: int = 0):
    """A copy of a JSON-able ``value`` that jsonb accepts.

    NUL and lone surrogates in strings (and keys) become U+FFFD, NaN and ±Infinity
    become null (JSON has neither), nesting deeper than MAX_REPORT_DEPTH becomes
    the string "…". Types the encoder knows (dates, UUIDs, Decimals) pass through.
    """
    if isinstance(value, str):
        return _clean_str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        if depth >= MAX_REPORT_DEPTH:
            return "…"
        return {(_clean_str(k) if isinstance(k, str) else k): storable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if depth >= MAX_REPORT_DEPTH:
            return "…"
        return [storable(v, depth + 1) for v in value]
    return value


def _clean_str(text: str) -> str:
    if "\x00" in text:
        text = text.replace("\x00", REPLACEMENT)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a str holds surrogates only unpaired: UTF-8 cannot carry them
        text = "".join(REPLACEMENT if "\ud800" <= ch <= "\udfff" else ch for ch in text)
    return text


def storable_report(report: dict | None) -> str | None:
    """The report as jsonb text: cleaned, and replaced by a note when over MAX_REPORT_BYTES.

    Raises ``UnstorableReport`` for a value that is not JSON at all.
    """
    if report is None:
        return None
    try:
        encoded = json.dumps(storable(report), cls=DjangoJSONEncoder, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise UnstorableReport(str(exc)) from None
    if len(encoded) > MAX_REPORT_BYTES:
        return json.dumps({"report_dropped": f"the handler's report of {len(encoded)} bytes is over the "
                                             f"{MAX_REPORT_BYTES} byte limit"})
    return encoded


def describe(exc: BaseException) -> str:
    """``"Type: message"`` for an error column, even when the exception's ``str()`` raises."""
    try:
        message = str(exc)
    except Exception:
        message = "<the exception's message could not be read>"
    name = type(exc).__name__
    return f"{name}: {message}" if message else name


# -- finishing --------------------------------------------------------------------------

def finish_done(job: Job, report: dict | None) -> bool:
    """Record the handler's result; False if this run no longer owns the job."""
    return _update(sql.FINISH_DONE, job, report=storable_report(report))


def finish_failed(job: Job, error: str, traceback: str | None = None) -> bool:
    """Fail the run and run ``on_fail``, in one transaction; False if this run no longer owns the job.

    A crash or a lost connection before the commit leaves the job running (the
    sweep or this worker's retry takes it from there), never failed with its
    domain row still untouched.
    """
    with transaction.atomic():
        failed = _update(sql.FINISH_FAILED, job, error=storable_text(error, MAX_ERROR_CHARS),
                         traceback=storable_text(traceback, MAX_TRACEBACK_CHARS, keep="tail")
                         if traceback is not None else None)
        if failed:
            call_on_fail(job)
    return failed


# Runs the database may cut off (connection lost, server shut down) before
# further ones count against max_attempts: a job that kills its own database
# (a query that crashes the server) must still end.
FREE_OUTAGES = 5


def retry_or_fail(attempts: int, max_attempts: int) -> str:
    """What becomes of an interrupted run, given the claims counted against its budget.

    The run that was interrupted already counted as an attempt at its claim:

    >>> retry_or_fail(1, 3), retry_or_fail(2, 3), retry_or_fail(3, 3), retry_or_fail(1, 1)
    ('queued', 'queued', 'failed', 'failed')
    """
    return "queued" if attempts < max_attempts else "failed"


def after_interruption(attempts: int, uncounted: int, outages: int, max_attempts: int, *,
                       by_database: bool) -> tuple[str, bool]:
    """``(new status, spared)`` for a run cut off by a dead worker or by the database.

    A crash counts. A run the database cut off is spared (not counted) for the
    first FREE_OUTAGES outages of the job; later ones count like crashes.

    >>> after_interruption(3, 0, 0, 3, by_database=False), after_interruption(3, 0, 0, 3, by_database=True)
    (('failed', False), ('queued', True))
    >>> after_interruption(7, 5, 5, 3, by_database=True)  # spared 5 times already: this one counts
    ('queued', False)
    """
    spared = by_database and outages < FREE_OUTAGES
    counted = attempts - uncounted - (1 if spared else 0)
    return retry_or_fail(counted, max_attempts), spared


def exhausted_error(outages: int) -> str:
    """``error`` of a job out of attempts.

    >>> exhausted_error(0), exhausted_error(3)
    ('max attempts exceeded', 'max attempts exceeded; interrupted by database outages (3)')
    """
    return "max attempts exceeded" + (f"; interrupted by database outages ({outages})" if outages else "")


def interrupt(job: Job, max_attempts: int, *, by_database: bool = False) -> str | None:
    """Put an interrupted run back in the queue, or fail it if it has no attempts left.

    ``by_database``: the worker itself saw the database cut the run off (see
    ``after_interruption``). Back in the queue, the job holds its key again; if a
    newer queued job holds it, this one is folded into that one (``done``,
    ``report.superseded_by``). A failure runs ``on_fail`` in the same transaction.
    Returns the new status, or None if the run no longer owned the job.
    """
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(sql.INTERRUPTED_RUN, {"id": job.id, "attempt": job.attempts})
            row = cursor.fetchone()
        if row is None:
            return None
        attempts, uncounted, outages = row
        outcome, spared = after_interruption(attempts, uncounted, outages, max_attempts, by_database=by_database)
        outage = 1 if by_database else 0
        if outcome == "failed":
            _update(sql.FAIL_EXHAUSTED, job, error=exhausted_error(outages + outage), outage=outage)
            call_on_fail(job)
            return "failed"
        return _put_back(job, sql.REQUEUE_INTERRUPTED, spared=int(spared), outage=outage)[0]


def _put_back(job: Job, statement: str, **params):
    """Run a put-back statement, the job taking its key back; ``(status, holder)``.

    If another job holds the key (a queued one, enqueued while this one ran),
    this one is folded into it: ``("done", holder)``. ``(None, None)`` if the run
    no longer owned the job.
    """
    for _ in range(ENQUEUE_TRIES):
        try:
            with transaction.atomic():
                return ("queued" if _update(statement, job, **params) else None), None
        except IntegrityError as exc:
            if getattr(exc.__cause__, "sqlstate", None) != UNIQUE_VIOLATION:
                raise
        holder = _holder_of(job)
        if holder is not None:
            folded = _update(sql.SUPERSEDE, job, holder=str(holder), outage=params.get("outage", 0))
            log.warning("job=%s folded into job=%s, which holds its key %r", job.id, holder, job.enqueued_key)
            return ("done" if folded else None), holder
        # The holder finished meanwhile: the key is free again.
    raise EnqueueRace(f"job {job.id}: its key {job.enqueued_key!r} kept changing hands")


def _holder_of(job: Job):
    """The other job holding this job's key, if any."""
    if job.enqueued_key is None:
        job.enqueued_key = Job.objects.filter(pk=job.pk).values_list("enqueued_key", flat=True).first()
    if job.enqueued_key is None:
        return None
    return Job.objects.filter(dedup_key=job.enqueued_key).exclude(pk=job.pk).values_list("pk", flat=True).first()


def call_on_fail(job: Job) -> None:
    """Run the type's ``on_fail`` inside the failing transaction, under a savepoint.

    Its own errors are logged and undo only its own writes, never the failure;
    a lost connection undoes both, and whoever failed the job retries.
    """
    try:
        job_type = registry.get(job.type)
    except registry.UnknownJobType:
        return
    if job_type.on_fail is None:
        return
    try:
        with transaction.atomic():
            job.refresh_from_db()
            job_type.on_fail(job)
    except Exception:
        if connection.needs_rollback:
            # The savepoint could not be restored (the connection is gone), so
            # the failure cannot commit either: let the caller see it.
            raise
        log.exception("job=%s on_fail of %s raised", job.id, job.type)


# -- operator actions -------------------------------------------------------------------

REQUEUE = "requeue"
FAIL = "fail"
NOT_REQUEUEABLE = "only failed jobs and zombies can be requeued: not done, queued or live running jobs"
NO_BUDGET = "no attempts left: use Requeue with a fresh budget"


def operator_requeue(status: str, counted: int, max_attempts: int, *, stale: bool, fresh: bool) -> str:
    """What an operator's requeue does to a job: REQUEUE, FAIL, or the reason it is refused.

    The sweep's rules: a zombie with attempts left goes back, without goes to
    failed. A failed job runs again only with attempts left, unless the operator
    gives it a fresh budget.

    >>> operator_requeue("failed", 1, 3, stale=False, fresh=False)
    'requeue'
    >>> operator_requeue("failed", 3, 3, stale=False, fresh=False) == NO_BUDGET
    True
    >>> operator_requeue("running", 3, 3, stale=True, fresh=False)
    'fail'
    >>> operator_requeue("running", 3, 3, stale=True, fresh=True)
    'requeue'
    """
    if status == JobStatus.FAILED:
        return REQUEUE if fresh or counted < max_attempts else NO_BUDGET
    if status == JobStatus.RUNNING and stale:
        return REQUEUE if fresh or counted < max_attempts else FAIL
    return NOT_REQUEUEABLE


@dataclass
class RequeueResult:
    requeued: list = field(default_factory=list)
    failed: list = field(default_factory=list)  # zombies out of attempts, failed as the sweep would
    folded: dict = field(default_factory=dict)  # zombie id -> the queued job holding its key
    refused: dict = field(default_factory=dict)  # id -> why


def requeue(job_ids, *, fresh_budget: bool = False) -> RequeueResult:
    """Operator action: failed jobs run again; zombies go back now, by the sweep's rules.

    ``fresh_budget``: the claims so far stop counting against ``max_attempts``.
    Each job is judged and moved under its row lock, in a transaction of its
    own; one that moved meanwhile, or whose key a live job holds, is refused
    with the reason. A failed job's ``on_requeue`` runs in its transaction: if
    it raises, that requeue is undone.
    """
    result = RequeueResult()
    for job_id in job_ids:
        try:
            with transaction.atomic():
                _requeue_one(job_id, fresh_budget, result)
        except _Refused as refused:
            result.refused[job_id] = str(refused)
    return result


class _Refused(Exception):
    pass


def _requeue_one(job_id, fresh: bool, result: RequeueResult) -> None:
    job = Job.objects.filter(pk=job_id).only("id", "type").first()
    if job is None:
        raise _Refused("no such job")
    job_type = registry.all_types().get(job.type)
    max_attempts = job_type.max_attempts if job_type else registry.default_max_attempts()
    stale_after = job_type.stale_after if job_type else registry.default_stale_after()
    with connection.cursor() as cursor:
        cursor.execute(sql.OPERATOR_INSPECT, {"id": job.id, "stale_after": stale_after})
        status, attempts, uncounted, outages, enqueued_key, stale = cursor.fetchone()
    job.attempts, job.uncounted_attempts, job.enqueued_key = attempts, uncounted, enqueued_key
    verdict = operator_requeue(status, attempts - uncounted, max_attempts, stale=stale, fresh=fresh)
    if verdict == FAIL:
        _update(sql.FAIL_EXHAUSTED, job, error=exhausted_error(outages), outage=0)
        call_on_fail(job)
        result.failed.append(job_id)
    elif verdict != REQUEUE:
        raise _Refused(verdict)
    elif status == JobStatus.RUNNING:
        status, holder = _put_back(job, sql.OPERATOR_REQUEUE_STALE, fresh=fresh)
        if status == "done":
            result.folded[job_id] = holder
        else:
            result.requeued.append(job_id)
    else:
        try:
            with transaction.atomic():
                _update(sql.OPERATOR_REQUEUE_FAILED, job, fresh=fresh)
        except IntegrityError:
            holder = _holder_of(job)
            raise _Refused(f"job {holder} holds its key {enqueued_key!r} and covers the same work") from None
        if job_type is not None and job_type.on_requeue is not None:
            try:
                job.refresh_from_db()
                job_type.on_requeue(job)
            except Exception as exc:
                log.exception("job=%s on_requeue of %s raised; requeue undone", job.id, job.type)
                raise _Refused(f"on_requeue raised {describe(exc)}") from None
        result.requeued.append(job_id)


def mark_failed(job_ids, reason: str) -> list:
    """Operator action: fail queued or running jobs with ``reason``; each one's ``on_fail`` runs in that transaction."""
    with transaction.atomic():
        changed = _ids(sql.OPERATOR_FAIL, {"ids": [str(i) for i in job_ids],
                                           "error": storable_text(reason, MAX_ERROR_CHARS)})
        for job in Job.objects.filter(pk__in=changed):
            call_on_fail(job)
    return changed


def _ids(statement: str, params: dict) -> list:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return [row[0] for row in cursor.fetchall()]


def _update(statement: str, job: Job, **params) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(statement, {"id": job.id, "attempt": job.attempts, **params})
        return cursor.rowcount == 1


_JOB_FIELDS = [c.strip() for c in sql.JOB_COLUMNS.split(",")]


def _one(statement: str, params: dict) -> Job | None:
    """The row a statement returns (``sql.JOB_COLUMNS`` first, in order) as a Job, or None.

    Not ``Job.objects.raw``: it maps columns and looks up converters on every
    call, about 0.1 ms of CPU per claim and per enqueue (bench/queue_bench.py).
    """
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        row = cursor.fetchone()
    if row is None:
        return None
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


def _json(value) -> str:
    return json.dumps(value, cls=DjangoJSONEncoder)

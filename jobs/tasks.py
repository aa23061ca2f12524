"""The queue as Django's task backend: ``TASKS = {"default": {"BACKEND": "jobs.tasks.PostgresBackend"}}``.

A ``@task`` function becomes a job type named by the task's import path (``module_path``),
registered when Django validates the task (when ``@task`` creates it, and at every enqueue). Its
jobs are rows of ``jobs`` like any other: run by ``runjobs``, swept when their worker dies, shown
by the admin, ``/jobs/<id>`` and ``/metrics``. A worker knows the tasks of every installed app's
``tasks`` module and of the modules in ``JOBS_HANDLER_MODULES`` (``registry.autodiscover``).

The row: ``payload = {"args": [...], "kwargs": {...}}`` (JSON-normalized at enqueue, as the API
requires; ``InvalidTask`` for arguments jsonb would not give back unchanged, or over
JOBS_TASK_MAX_ARGS_BYTES), ``report = {"return_value": ...}`` once done (a return value that
would not come back unchanged fails its run), ``error``/``traceback`` when a run
failed. ``get_result`` reads the row back; the task of a result is the decorated task placed as
the row says (priority, queue, run_after, org).

The models load lazily (imports inside the functions that need them): Django may create this
backend while the app registry is still loading, for a ``@task`` met at import time.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace

from django.utils import timezone
from django.utils.module_loading import import_string

from . import conf, event_loop, registry
from .errors import CANCELLED, TIMED_OUT, JobCancelled, JobTimedOut, Retry
from .storable import MAX_REPORT_BYTES, JSONRoundTripError, check_round_trip
from .system import SYSTEM_ORG
from .tasks_compat import (
    TASK_REFRESH_ATTRS,
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskContext,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    normalize_json,
    task,
    task_enqueued,
    task_finished,
    task_started,
)

__all__ = ["PostgresBackend", "PostgresTask", "PostgresTaskContext", "PostgresTaskResult", "TaskRunFailed", "task"]

STATUSES = {
    "queued": TaskResultStatus.READY,  # run_after in the future (scheduled, or waiting to retry) included
    "running": TaskResultStatus.RUNNING,
    "done": TaskResultStatus.SUCCESSFUL,
    "failed": TaskResultStatus.FAILED,
}

# The line a failed run's exception carries into its traceback (a note, printed after its
# message): its class's import path, which TaskError.exception_class_path is read from. The
# worker stores the traceback's tail, so the line survives a long traceback being cut.
EXCEPTION_NOTE = "task exception class: "


class TaskRunFailed(Exception):
    """The class of a task's error when no exception of the task ended it.

    Its workers died more than ``max_attempts`` times, an operator failed it, or its result
    could not be stored. ``TaskError.traceback`` then holds the job's ``error``.
    """


RUN_FAILED = f"{TaskRunFailed.__module__}.{TaskRunFailed.__qualname__}"
# Errors the queue itself writes (jobs.cancel, timeouts) and the exception each stands for.
QUEUE_ERRORS = {error: f"{cls.__module__}.{cls.__qualname__}" for error, cls in ((CANCELLED, JobCancelled), (TIMED_OUT, JobTimedOut))}


@dataclass(frozen=True, slots=True, kw_only=True)
class PostgresTask(Task):
    """A task of ``PostgresBackend``: Django's options, and the queue's, all set through ``@task(...)``.

    Rules of the task's job type (as ``jobs.registry.register``'s): ``max_attempts``, ``retry_on``
    (exception classes retried with backoff; ``jobs.Retry(after=)`` works too), ``timeout`` and
    ``stale_after`` (seconds), ``dedup_scope``, ``one_running_per`` (the name of one of the
    function's parameters: never two running with the same value), ``on_fail`` (called with the
    failed ``TaskResult``, in the transaction that fails it).

    Per enqueue, also through ``.using(...)``: ``org_id``, the org whose job it is (its
    ``/jobs/<id>`` and admin rows; default the system org, which no user reaches), and
    ``dedup_key``: a string, or a function of the task's arguments returning one (or None: no
    key). It is stored prefixed with the task's path; while a job holds it, enqueue returns that
    job's result instead of a new one.
    """

    max_attempts: int = 3
    retry_on: tuple = ()
    timeout: float | None = None
    stale_after: float | None = None
    dedup_scope: str = "queue"
    one_running_per: str | None = None
    on_fail: Callable | None = field(default=None, repr=False)
    org_id: str = SYSTEM_ORG
    dedup_key: str | Callable | None = None

    def using(self, *, priority=None, queue_name=None, run_after=None, backend=None, org_id=None,
              dedup_key=None):
        """Django's ``using()``, plus the queue's per-enqueue options ``org_id`` and ``dedup_key``."""
        changes = {"priority": priority, "queue_name": queue_name, "run_after": run_after, "backend": backend,
                   "org_id": org_id, "dedup_key": dedup_key}
        return replace(self, **{name: value for name, value in changes.items() if value is not None})


# A task of another class (one made for another backend, then ``.using(backend=...)`` ours) has the defaults.
_DEFAULTS = {f.name: f.default for f in fields(PostgresTask)}


def _option(task, name):
    return getattr(task, name, _DEFAULTS[name])


@dataclass(frozen=True, slots=True, kw_only=True)
class PostgresTaskResult(TaskResult):
    """Django's ``TaskResult``, read from the job's row.

    ``attempts`` is the job's claims so far (``jobs.attempts``), which ``context.attempt`` also
    says: the API's default, ``len(worker_ids)``, would miss a claim that recorded no worker.
    """

    attempts: int = 0

    def refresh(self):
        self._take(self.task.get_backend().get_result(self.id))

    async def arefresh(self):
        self._take(await self.task.get_backend().aget_result(self.id))

    def _take(self, fresh):
        for attr in (*TASK_REFRESH_ATTRS, "attempts"):
            object.__setattr__(self, attr, getattr(fresh, attr))


@dataclass(frozen=True, slots=True, kw_only=True)
class PostgresTaskContext(TaskContext):
    """What a ``takes_context=True`` task gets: Django's context, plus the queue's hooks of its run."""

    job: object = field(repr=False, compare=False)

    def report_progress(self, done: int | None = None, total: int | None = None, **fields) -> None:
        """``job.report_progress``: progress for ``/jobs/<id>`` and a heartbeat; per batch, never per row."""
        self.job.report_progress(done, total, **fields)

    @property
    def stop_requested(self):
        """The worker's stop request (a ``threading.Event``): a long task may end early when it is set."""
        return getattr(self.job, "stop_requested", None)


class PostgresBackend(BaseTaskBackend):
    """Tasks as jobs: enqueued in the caller's transaction, run by ``runjobs``, read back from the row."""

    task_class = PostgresTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def validate_task(self, task):
        """Django's checks, the queue's options, then the task's job type registered (or kept, if unchanged)."""
        super().validate_task(task)
        try:
            job_type = job_type_of(task)
            if _option(task, "org_id") in (None, "") or not isinstance(_option(task, "org_id"), str):
                raise ValueError(f"org_id must be a non-empty string, not {_option(task, 'org_id')!r}")
            key = _option(task, "dedup_key")
            if key is not None and not (isinstance(key, str) or callable(key)):
                raise ValueError(f"dedup_key must be a string or a function of the task's arguments, not {key!r}")
            registry.check_queue(task.queue_name)
            _register(job_type)
        except ValueError as exc:
            raise InvalidTask(str(exc)) from None

    def enqueue(self, task, args, kwargs):
        """Insert the task's job in the caller's transaction (a rollback takes it back) and return its result.

        One statement, no commit of its own: workers are told when the caller's transaction
        commits. With a ``dedup_key`` held by a live job, that job's result is returned instead.
        """
        from .models import Job
        from .queue import enqueue

        self.validate_task(task)
        args, kwargs = normalize_json(args), normalize_json(kwargs)
        payload = {"args": args, "kwargs": kwargs}
        try:
            # Before any SQL: a value jsonb refuses would abort the caller's transaction.
            check_round_trip(payload, "the task's arguments", int(conf.get("JOBS_TASK_MAX_ARGS_BYTES")))
        except JSONRoundTripError as exc:
            raise InvalidTask(f"{task.module_path}: {exc}") from None
        guard = _option(task, "one_running_per")
        if guard:
            # The claim's guard reads the value at the top of the payload (payload -> key).
            payload[guard] = argument(task, args, kwargs, guard)
        dedup_key = dedup_key_of(task, args, kwargs)
        job = enqueue(task.module_path, org_id=_option(task, "org_id"), payload=payload, dedup_key=dedup_key,
                      run_after=task.run_after, priority=task.priority, queue_name=task.queue_name)
        if dedup_key is None:
            result = result_of(job, task, self.alias)
        else:
            # Maybe an earlier job holding the key: read it whole, and describe that one.
            job = Job.objects.get(pk=job.pk)
            result = result_of(job, placed_task(task, job, self.alias), self.alias)
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id):
        """The result of the task job ``result_id``; ``TaskResultDoesNotExist`` for no such job, or another type's.

        For the server's own code: not scoped to an org, and ``errors`` carry the traceback,
        which ``/jobs/<id>`` never shows.
        """
        from .models import Job

        try:
            pk = uuid.UUID(str(result_id))
        except ValueError:
            raise TaskResultDoesNotExist(result_id) from None
        job = Job.objects.filter(pk=pk).first()
        if job is None:
            raise TaskResultDoesNotExist(result_id)
        try:
            base = task_of(job.type)
        except NotATask as exc:
            raise TaskResultDoesNotExist(f"{result_id}: {exc}") from None
        return result_of(job, placed_task(base, job, self.alias), self.alias)


class NotATask(LookupError):
    pass


def task_of(name: str) -> Task:
    """The task object a task job's type names (its import path)."""
    try:
        known = registry.get(name)
    except registry.UnknownJobType:
        known = None
    if known is not None and known.handler is not run_task:
        raise NotATask(f"job type {name!r} is not a task")
    try:
        found = import_string(name)
    except ImportError as exc:
        raise NotATask(f"{name!r} names no task: {exc}") from None
    if not isinstance(found, Task):
        raise NotATask(f"{name!r} is not a task but {type(found).__name__}")
    return found


def placed_task(task: Task, job, alias: str) -> Task:
    """``task`` as the job's row placed it: priority, queue, run_after, org, on backend ``alias``.

    Not validated again: the row was at its enqueue, and settings changed since (a queue no
    longer in QUEUES) must not make a row unreadable, nor fail its run.
    """
    changes = {"priority": job.priority, "queue_name": job.queue_name, "run_after": job.run_after,
               "backend": alias, "org_id": job.org_id}
    placed = object.__new__(type(task))
    for f in fields(task):
        object.__setattr__(placed, f.name, changes.get(f.name, getattr(task, f.name)))
    return placed


def result_of(job, task: Task, alias: str) -> PostgresTaskResult:
    """The API's view of a job row. Reads nothing a fresh enqueue's row lacks (no traceback, no worker_ids)."""
    payload = job.payload or {}
    result = PostgresTaskResult(
        task=task,
        id=str(job.id),
        status=STATUSES[job.status],
        enqueued_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        last_attempted_at=job.started_at,
        args=payload.get("args", []),
        kwargs=payload.get("kwargs", {}),
        backend=alias,
        errors=errors_of(job),
        worker_ids=list(job.worker_ids) if job.attempts else [],
        attempts=job.attempts,
    )
    if job.status == "done":
        object.__setattr__(result, "_return_value", (job.report or {}).get("return_value"))
    return result


def errors_of(job) -> list:
    """The run's error as a ``TaskError`` (none if it has none); kept while a retry waits, too."""
    if not job.error:
        return []
    traceback = job.traceback
    path = noted_class(traceback) or QUEUE_ERRORS.get(job.error, RUN_FAILED)
    return [TaskError(exception_class_path=path, traceback=traceback or job.error)]


def noted_class(traceback: str | None) -> str | None:
    """The class path ``run_task`` noted in a traceback (the last such line; ``| `` of exception groups stripped).

    >>> noted_class("Traceback ...\\nValueError: no\\ntask exception class: builtins.ValueError\\n")
    'builtins.ValueError'
    >>> noted_class("Traceback ...\\nValueError: no\\n") is None
    True
    """
    for line in reversed((traceback or "").splitlines()):
        line = line.strip().lstrip("|").strip()
        if line.startswith(EXCEPTION_NOTE):
            return line[len(EXCEPTION_NOTE):].strip() or None
    return None


def dedup_key_of(task: Task, args: list, kwargs: dict) -> str | None:
    key = _option(task, "dedup_key")
    if callable(key):
        key = key(*args, **kwargs)
    return None if key is None else f"{task.module_path}:{key}"


def argument(task: Task, args: list, kwargs: dict, name: str):
    """The value the call will give parameter ``name`` (by keyword, by position, else its default; None if none)."""
    if name in kwargs:
        return kwargs[name]
    parameters = list(inspect.signature(task.func).parameters.values())[1 if task.takes_context else 0:]
    for parameter, value in zip(parameters, args, strict=False):
        if parameter.kind not in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            break
        if parameter.name == name:
            return value
    parameter = inspect.signature(task.func).parameters.get(name)
    if parameter is None or parameter.default is parameter.empty:
        return None
    return normalize_json(parameter.default)


def job_type_of(task: Task) -> registry.JobType:
    """The job type that runs ``task``; a ValueError for an option the queue would refuse."""
    guard = _option(task, "one_running_per")
    if guard is not None:
        parameters = inspect.signature(task.func).parameters
        takes_any = any(p.kind is p.VAR_KEYWORD for p in parameters.values())
        if guard in ("args", "kwargs") or not (guard in parameters or takes_any):
            raise ValueError(f"one_running_per={guard!r} is not a parameter of {task.module_path}")
    on_fail = _option(task, "on_fail")
    if on_fail is not None and not callable(on_fail):
        raise ValueError(f"on_fail must be callable, not {on_fail!r}")
    retry_on = _option(task, "retry_on")
    return registry.JobType(
        name=task.module_path,
        handler=run_task,
        max_attempts=_option(task, "max_attempts"),
        dedup_scope=_option(task, "dedup_scope"),
        on_fail=call_on_fail if on_fail is not None else None,
        one_running_per=guard,
        stale_after_seconds=_option(task, "stale_after"),
        retry_on=tuple(retry_on) if isinstance(retry_on, (tuple, list)) else (retry_on,),
        timeout=_option(task, "timeout"),
    )


def _register(job_type: registry.JobType) -> None:
    # Every enqueue validates its task: an unchanged type is left as it is, so the claim's
    # plan (derived per registry generation) is not rebuilt for nothing.
    try:
        if registry.get(job_type.name) == job_type:
            return
    except registry.UnknownJobType:
        pass
    registry.add(job_type)


def run_task(job) -> dict:
    """The handler of every task's job type: the function called with the row's arguments.

    Returns ``{"return_value": ...}`` (JSON-normalized: what the API allows a task to return), or
    fails with ``JSONRoundTripError`` when jsonb would not give that value back unchanged.
    An exception leaves with a note of its class path (see ``EXCEPTION_NOTE``); the worker then
    fails, retries or re-queues the job by its usual rules.
    """
    from .models import Job

    task = task_of(job.type)
    payload = job.payload or {}
    args, kwargs = list(payload.get("args", [])), dict(payload.get("kwargs", {}))
    # One read of the whole row (the claim returns only the queue's columns): the context's result.
    row = Job.objects.get(pk=job.pk)
    result = result_of(row, placed_task(task, row, task.backend), task.backend)
    sender = type(task.get_backend())
    task_started.send(sender=sender, task_result=result)
    try:
        if task.takes_context:
            args.insert(0, PostgresTaskContext(task_result=result, job=job))
        value = normalize_json(call(task.func, args, kwargs))
        # The run fails rather than store a value other than the one returned (the report's own cleaning
        # would turn NaN into null); 100 bytes are left for the report's {"return_value": ...}.
        check_round_trip(value, "the return value", MAX_REPORT_BYTES - 100)
    except BaseException as exc:
        exc.add_note(EXCEPTION_NOTE + f"{type(exc).__module__}.{type(exc).__qualname__}")
        if not _retried(task, exc):
            _finished(result, TaskResultStatus.FAILED, sender)
        raise
    object.__setattr__(result, "_return_value", value)
    _finished(result, TaskResultStatus.SUCCESSFUL, sender)
    return {"return_value": value}


def call(func, args: list, kwargs: dict):
    """Call a task function; a coroutine function runs on the process's one event loop."""
    if inspect.iscoroutinefunction(func):
        return event_loop.run(func(*args, **kwargs))
    return func(*args, **kwargs)


def _retried(task, exc: BaseException) -> bool:
    return isinstance(exc, (Retry, *registry.get(task.module_path).retry_on))


def _finished(result: PostgresTaskResult, status, sender) -> None:
    # task_finished is the API's signal; the row is written by the worker right after.
    object.__setattr__(result, "status", status)
    object.__setattr__(result, "finished_at", timezone.now())
    task_finished.send(sender=sender, task_result=result)


def call_on_fail(job) -> None:
    """The job type's ``on_fail``: the task's own, given the failed result (the job is already failed)."""
    task = task_of(job.type)
    _option(task, "on_fail")(result_of(job, placed_task(task, job, task.backend), task.backend))

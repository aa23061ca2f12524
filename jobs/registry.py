"""Job types: which handler runs a type, and the rules the queue applies to it.

Apps register their own types in their ``handlers`` module (imported at start-up
by ``autodiscover``); a deployment can add modules through the environment
variable ``JOBS_HANDLER_MODULES``::

    @register("map_reconcile", dedup_scope="queue")
    def reconcile(job):
        ...
        return {"pages_created": n}     # becomes job.report
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import models
from django.utils.module_loading import autodiscover_modules

from . import conf

Handler = Callable[["Job"], "dict | None"]  # noqa: F821


class DedupScope(models.TextChoices):
    """How long a job's ``dedup_key`` blocks enqueues: a rule of its type (``JobType.dedup_scope``)."""

    # The key stops blocking enqueues when a run starts: never two queued, and a
    # wake-up during a run is never lost. For idempotent, cheap work.
    QUEUE = "queue", "Released at claim"
    # The key is held until done/failed: never two live instances.
    ACTIVE = "active", "Held until finished"


class UnknownJobType(LookupError):
    pass


# The queue a job lands in unless its type or its enqueue names another.
DEFAULT_QUEUE = "default"
# Priorities run from MIN to MAX (the column's CHECK); higher is claimed first.
MIN_PRIORITY, MAX_PRIORITY = -100, 100


@dataclass(frozen=True)
class JobType:
    name: str
    handler: Handler
    max_attempts: int = 3
    dedup_scope: str = DedupScope.QUEUE
    # Called in the transaction that fails the job (under a savepoint: its
    # errors never undo the failure), to keep the app's own rows coherent.
    on_fail: Callable | None = None
    # Called in the transaction of an operator's requeue of a failed job, to
    # bring the app's rows back to life; if it raises, the requeue is undone.
    on_requeue: Callable | None = None
    # A payload key (e.g. "site_id"): never two running jobs of this type with the same value.
    one_running_per: str | None = None
    # Seconds without heartbeat before a running job is a zombie; None = JOBS_STALE_AFTER.
    stale_after_seconds: float | None = None
    # Exceptions that mean "try again later" (with backoff, within max_attempts); any other fails the job at once.
    retry_on: tuple[type[BaseException], ...] = ()
    # Seconds a run may take before it ends failed ("timed out"); None: no limit.
    timeout: float | None = None
    # Defaults for this type's enqueues (an enqueue may name others).
    priority: int = 0
    queue: str = DEFAULT_QUEUE
    # Periodic: enqueued once per period by the workers' schedule duty. At most one of the two.
    every: timedelta | None = None
    cron: str | None = None

    def __post_init__(self):
        if self.dedup_scope not in DedupScope.values:
            raise ValueError(f"dedup_scope must be one of {DedupScope.values}, not {self.dedup_scope!r}")
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        for hook, value in (("on_fail", self.on_fail), ("on_requeue", self.on_requeue)):
            if value is not None and not callable(value):
                raise ValueError(f"{hook} must be callable, not {value!r}")
        if not all(isinstance(t, type) and issubclass(t, BaseException) for t in self.retry_on):
            raise ValueError(f"retry_on must be a tuple of exception classes, not {self.retry_on!r}")
        if self.timeout is not None and not self.timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, not {self.timeout!r}")
        check_priority(self.priority)
        check_queue(self.queue)
        if self.every is not None and self.cron is not None:
            raise ValueError("a job type is periodic with every= or cron=, not both")
        if self.every is not None and not (isinstance(self.every, timedelta) and self.every > timedelta(0)):
            raise ValueError(f"every must be a positive timedelta, not {self.every!r}")
        if self.cron is not None:
            check_cron(self.cron)

    @property
    def periodic(self) -> bool:
        return self.every is not None or self.cron is not None

    @property
    def stale_after(self) -> float:
        return self.stale_after_seconds if self.stale_after_seconds is not None else default_stale_after()


def check_priority(priority) -> int:
    """The priority, if it is an int within the column's range; else a ValueError, before anything is queued."""
    if isinstance(priority, bool) or not isinstance(priority, int) or not MIN_PRIORITY <= priority <= MAX_PRIORITY:
        raise ValueError(f"priority must be an integer from {MIN_PRIORITY} to {MAX_PRIORITY}, not {priority!r}")
    return priority


def check_queue(name) -> str:
    if not isinstance(name, str) or not name.strip() or "," in name or name != name.strip():
        raise ValueError(f"a queue name is a non-empty word without commas or surrounding spaces, not {name!r}")
    return name


def check_cron(expression: str) -> str:
    """A five-field cron expression cronsim accepts; else a ValueError naming what is wrong."""
    from cronsim import CronSim, CronSimError

    try:
        CronSim(expression, datetime(2000, 1, 1, tzinfo=UTC))
    except (CronSimError, TypeError) as exc:
        raise ValueError(f"cron={expression!r} is not a valid cron expression: {exc}") from None
    return expression


_types: dict[str, JobType] = {}
# Bumped by every change to _types: what callers derive from the types (the
# claim's parameters, jobs.queue.claim_plan) is computed once per generation.
_generation = 0


def register(
    name: str,
    handler: Handler | None = None,
    *,
    max_attempts: int = 3,
    dedup_scope: str = DedupScope.QUEUE,
    on_fail: Callable | None = None,
    on_requeue: Callable | None = None,
    one_running_per: str | None = None,
    stale_after: float | None = None,
    retry_on: tuple[type[BaseException], ...] = (),
    timeout: float | None = None,
    priority: int = 0,
    queue: str = DEFAULT_QUEUE,
    every: timedelta | None = None,
    cron: str | None = None,
):
    """Register ``handler`` for job type ``name``; usable as a decorator.

    Registering the same name twice with a different handler is a programming
    error (two modules fighting over one type) and raises.
    """
    options = dict(max_attempts=max_attempts, dedup_scope=dedup_scope, on_fail=on_fail, on_requeue=on_requeue,
                   one_running_per=one_running_per, stale_after_seconds=stale_after, retry_on=tuple(retry_on),
                   timeout=timeout, priority=priority, queue=queue, every=every, cron=cron)

    def decorate(fn: Handler) -> Handler:
        add(JobType(name=name, handler=fn, **options))
        return fn

    return decorate(handler) if handler is not None else decorate


def add(job_type: JobType) -> None:
    """Register a ready-made ``JobType``; same rule as ``register`` for a name already taken."""
    existing = _types.get(job_type.name)
    if existing is not None and existing.handler is not job_type.handler:
        if _qualname(existing.handler) != _qualname(job_type.handler):
            raise ValueError(f"job type {job_type.name!r} is already registered to {_qualname(existing.handler)}")
    global _generation
    _types[job_type.name] = job_type
    _generation += 1


def unregister(name: str) -> None:
    """Remove a type (tests that register throw-away types clean up with this)."""
    global _generation
    if _types.pop(name, None) is not None:
        _generation += 1


@contextmanager
def registered(*job_types: JobType):
    """Register ``job_types`` for the ``with`` block, then put back what each name held before.

    For tests: their job types exist for one test, so every other test sees the
    registry the apps build (the claim's plan follows through ``generation``).
    """
    before = {t.name: _types.get(t.name) for t in job_types}
    try:
        for job_type in job_types:
            add(job_type)
        yield
    finally:
        for name, previous in before.items():
            unregister(name)
            if previous is not None:
                add(previous)


def generation() -> int:
    """Changes whenever a type is registered or removed."""
    return _generation


def get(name: str) -> JobType:
    try:
        return _types[name]
    except KeyError:
        known = ", ".join(sorted(_types)) or "none"
        raise UnknownJobType(f"unknown job type {name!r} (registered: {known})") from None


def all_types() -> dict[str, JobType]:
    return dict(_types)


def default_stale_after() -> float:
    return float(conf.get("JOBS_STALE_AFTER"))


def default_max_attempts() -> int:
    return 3


def autodiscover() -> None:
    # ``tasks`` modules hold the apps' @task functions (jobs.tasks): a worker registers their types too.
    autodiscover_modules("handlers", "tasks")
    for module in conf.get("JOBS_HANDLER_MODULES"):
        if module.strip():
            importlib.import_module(module.strip())


def _qualname(fn) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"

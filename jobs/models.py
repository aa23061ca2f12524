"""The ``jobs`` table and its state machine (README, "The job API").

Transitions are not done by saving a model: they are the guarded statements in
``jobs.sql`` run by ``jobs.queue``, ``jobs.finish``, ``jobs.operator_actions``
and ``jobs.sweep``, each conditional on the state it leaves, so no caller can
skip a step.
"""

from __future__ import annotations

from datetime import timedelta

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q, Value
from django.db.models.expressions import RawSQL
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Greatest
from django.utils import timezone

from . import registry, sql
from .registry import DEFAULT_QUEUE


class JobStatus(models.TextChoices):
    # enqueue() creates rows here; the sweep, the worker after a lost database
    # connection and the admin's "requeue" put them back. Left by a claim.
    QUEUED = "queued", "Queued"
    # Set by a claim (attempts + 1, started_at). Left by finish, fail, the
    # zombie sweep when the heartbeat stops, or the worker when the database cut
    # the run off (back to queued).
    RUNNING = "running", "Running"
    # Terminal: the handler returned (or, folded, a queued job with the same
    # key covers its work: report.superseded_by). finished_at set, key released.
    DONE = "done", "Done"
    # Terminal: the handler raised, attempts ran out, or an operator gave up on
    # it. finished_at set, dedup_key released, on_fail called in the same
    # transaction. Left only by an operator's requeue (on_requeue called).
    FAILED = "failed", "Failed"


class JobQuerySet(models.QuerySet):
    def queued(self):
        return self.filter(status=JobStatus.QUEUED)

    def running(self):
        return self.filter(status=JobStatus.RUNNING)

    def live(self):
        """Queued or running, spelled as an OR so the planner can combine the two states' partial indexes.

        ``status IN ('queued', 'running')`` implies neither ``status = 'queued'`` nor
        ``status = 'running'``, so it would read the whole table.
        """
        return self.filter(Q(status=JobStatus.QUEUED) | Q(status=JobStatus.RUNNING))

    def finished(self):
        return self.filter(status__in=[JobStatus.DONE, JobStatus.FAILED])

    def for_org(self, org_id: str):
        return self.filter(org_id=org_id)

    def with_heartbeat(self):
        """Annotate ``heartbeat_at``: the latest sign of life of a running job."""
        return self.annotate(
            heartbeat_at=Greatest(
                "started_at",
                Cast(KT("progress__updated_at"), models.DateTimeField()),
            )
        )

    def stale(self):
        """Running jobs whose heartbeat is older than their type's ``stale_after``: zombies.

        The sweep's own rule, ``sql.STALE``, on the database's clock (never the
        web server's); how the admin's judgment differs from a sweeper's (no
        not_before, unknown types listed) is said beside it in ``jobs.sql``.
        """
        known = registry.all_types()
        rule = sql.STALE.format(not_before="NULL", stale_after=sql.TYPE_STALE_AFTER)
        params = (list(known), [float(t.stale_after) for t in known.values()], registry.default_stale_after())
        return self.running().with_heartbeat().filter(RawSQL(rule, params, output_field=models.BooleanField()))


class Job(models.Model):
    id = models.UUIDField(primary_key=True, db_default=models.Func(function="uuidv7"), editable=False)
    # Looked up through jobs_org_type_created, which starts with it: no index of its own.
    org_id = models.TextField()
    type = models.TextField()
    status = models.TextField(choices=JobStatus.choices, default=JobStatus.QUEUED, db_default=JobStatus.QUEUED)
    # Claims so far: + 1 at every claim and never lowered, so it is the fencing
    # token of a run (every finishing write is conditional on it).
    attempts = models.IntegerField(default=0, db_default=0)
    # Claims that do not count against max_attempts: runs cut off by the
    # database, and every run before an operator's "requeue with a fresh budget".
    uncounted_attempts = models.IntegerField(default=0, db_default=0)
    # Runs cut off by the database (connection lost, server shut down).
    outages = models.IntegerField(default=0, db_default=0)
    # The key while it blocks enqueues (unique among the jobs holding one: jobs_dedup_key_live);
    # released at claim ('queue' scope) or at the end.
    dedup_key = models.TextField(null=True, blank=True)
    # The key the job was enqueued with, for good: a job put back in the queue
    # takes it back.
    enqueued_key = models.TextField(null=True, blank=True)
    payload = models.JSONField(default=dict, db_default=models.Value({}, models.JSONField()))
    progress = models.JSONField(null=True, blank=True)
    report = models.JSONField(null=True, blank=True)
    error = models.TextField(null=True, blank=True)
    # A failed run's traceback: for staff (admin, logs), never in the API.
    traceback = models.TextField(null=True, blank=True)
    created_at = models.DateTimeField(db_default=models.Func(function="now"))
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Not claimed before this moment (a scheduled job, a retry waiting out its backoff); NULL: at once.
    run_after = models.DateTimeField(null=True, blank=True)
    # Claims take the highest first; created_at stays the order among equals.
    priority = models.SmallIntegerField(default=0, db_default=0)
    # ``runjobs --queue`` claims only the queues it names.
    queue_name = models.TextField(default=DEFAULT_QUEUE, db_default=DEFAULT_QUEUE)
    # Someone asked the job to stop (jobs.cancel, the admin): a queued job never starts, a running
    # one is told at its next heartbeat or report_progress. Cleared by nothing: it ends the job.
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    # Who ran each attempt ("host:pid"), in order: the task API's worker_ids.
    worker_ids = ArrayField(models.TextField(), default=list, db_default=Value([], ArrayField(models.TextField())),
                            blank=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        db_table = "jobs"
        ordering = ["-created_at"]
        indexes = [
            models.Index("org_id", "type", models.F("created_at").desc(), name="jobs_org_type_created"),
            # Running rows only, so an enqueue writes no entry here (migration 0008): the sweep,
            # the zombie list and a type's running jobs. Queued rows have the jobs_queued_* indexes.
            models.Index(fields=["type", "started_at"], name="jobs_running_type_started",
                         condition=Q(status="running")),
        ]
        constraints = [
            # Partial: most jobs never hold a key and a finished one has released it, so the index
            # holds the live keys only, not an entry per row version of the whole table. The
            # enqueue's ON CONFLICT names this predicate (jobs.sql.ENQUEUE).
            models.UniqueConstraint(fields=["dedup_key"], condition=Q(dedup_key__isnull=False),
                                    name="jobs_dedup_key_live"),
            # The state rules (a known status, finished_at set exactly when finished, started_at
            # when running, attempts, priority and queue_name in range) are not CHECK constraints
            # but the row trigger jobs_state_rules (migration 0010): PostgreSQL plans a table's
            # CHECKs again at every INSERT and UPDATE, ~20 µs of server CPU per statement for these.
        ]

    def __str__(self):
        return f"{self.type} {self.id} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in (JobStatus.DONE, JobStatus.FAILED)

    @property
    def counted_attempts(self) -> int:
        """Runs charged to ``max_attempts``."""
        return self.attempts - self.uncounted_attempts

    @property
    def duration(self) -> timedelta | None:
        if self.started_at is None:
            return None
        return (self.finished_at or timezone.now()) - self.started_at

    # report_progress(done=None, total=None, **fields), a handler's way to report,
    # is defined in jobs.queue beside the fenced write it runs and attached there:
    # the model does not import the queue (the queue imports the model).

    def as_api_dict(self) -> dict:
        """The shape ``GET /jobs/<id>`` returns: never the traceback, which is for staff."""
        return {
            "id": str(self.id),
            "type": self.type,
            "status": self.status,
            "progress": self.progress,
            "report": self.report,
            "error": self.error,
            "created_at": _iso(self.created_at),
            "started_at": _iso(self.started_at),
            "finished_at": _iso(self.finished_at),
        }


class ZombieJob(Job):
    """Running jobs past their staleness threshold, as their own admin screen."""

    class Meta:
        proxy = True
        verbose_name = "zombie job"
        verbose_name_plural = "zombie jobs"


def _iso(value):
    return value.isoformat() if value else None


class Schedule(models.Model):
    """Where one periodic job type (``register(..., every=…)`` or ``cron=…``) stands: its last period enqueued.

    The schedule itself is code (the registry); this row is the one fact every worker must agree
    on. A period is enqueued by the statement that moves ``last_period`` forward, in the
    transaction that inserts its job, so each period is enqueued once however many workers try.
    """

    name = models.TextField(primary_key=True)  # the job type
    # The start of the latest period enqueued; NULL until the first.
    last_period = models.DateTimeField(null=True, blank=True)
    # The job of the latest period, for the admin's list. The database clears it when that job is
    # deleted (ON DELETE SET NULL, migration 0011): a prune's DELETE is SQL, which Django's SET_NULL never sees.
    last_job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # The next period's start, as computed when the last one was enqueued: for the admin's list.
    next_run_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(db_default=models.Func(function="now"))

    class Meta:
        db_table = "jobs_schedule"
        ordering = ["name"]

    def __str__(self):
        return self.name


class ProcessKind(models.TextChoices):
    RUNJOBS = "runjobs", "runjobs"
    POLLMAIL = "pollmail", "pollmail"


class ProcessQuerySet(models.QuerySet):
    def seen_within(self, seconds: float):
        """Processes whose last heartbeat is at most ``seconds`` old, on the database's clock."""
        return self.filter(heartbeat_at__gte=models.Func(function="now") - timedelta(seconds=seconds))

    def silent_for(self, seconds: float):
        return self.filter(heartbeat_at__lt=models.Func(function="now") - timedelta(seconds=seconds))


class Process(models.Model):
    """One running ``runjobs`` or ``pollmail`` (``jobs.processes``): who is running, doing what.

    The process inserts its row when its loop starts, refreshes ``heartbeat_at``
    and ``doing`` from its own thread, and deletes the row when it exits; a row
    whose process died without exiting (kill -9, a lost host) stops being
    refreshed and is deleted by any other process once silent for
    ``jobs.processes.FORGET_AFTER``. Informational only: no claim depends on it.
    """

    kind = models.TextField(choices=ProcessKind.choices)
    host = models.TextField()
    pid = models.IntegerField()
    started_at = models.DateTimeField(db_default=models.Func(function="now"))
    heartbeat_at = models.DateTimeField(db_default=models.Func(function="now"))
    # What it works on now ("job=<id> type=<type>", "mailbox=<pk>, mailbox=<pk>"); blank when idle.
    doing = models.TextField(blank=True, default="", db_default="")

    objects = ProcessQuerySet.as_manager()

    class Meta:
        db_table = "jobs_process"
        ordering = ["kind", "host", "pid"]
        verbose_name_plural = "processes"
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=["runjobs", "pollmail"]), name="jobs_process_kind_valid"),
        ]

    def __str__(self):
        return f"{self.kind} {self.host}:{self.pid}"

"""Job queue settings, each declared once; read them with ``get(name)`` (see seoinsight.conf).

The JOBS_DB_* timeouts apply to the background processes only (runjobs and pollmail,
through ``jobs.dbsession.configure``); the web keeps the database's own.
"""

from seoinsight.conf import Declarations, Setting

SETTINGS = Declarations(
    Setting("JOBS_HANDLER_MODULES", list, [], "extra modules that register job types (comma-separated)"),
    Setting("JOBS_TASK_MAX_ARGS_BYTES", int, 1_000_000,
            "largest JSON (UTF-8 bytes) of a task's arguments, args and kwargs together; a larger enqueue is refused "
            "(InvalidTask), as a return value over 1 MB fails its run"),
    Setting("JOBS_LISTEN_NOTIFY", bool, True,
            "wake workers with LISTEN/NOTIFY (0 behind PgBouncer in transaction mode; workers then poll)"),
    Setting("JOBS_PREPARED_STATEMENTS", bool, True,
            "prepare the queue's own statements (claim, finish, enqueue, progress) once per connection instead "
            "of planning them at every call (0 behind PgBouncer in transaction mode before 1.21)"),
    Setting("JOBS_POLL_INTERVAL", float, 1.5, "seconds between polls when idle (jittered ±33 %)"),
    Setting("JOBS_HEARTBEAT_INTERVAL", float, 10.0, "seconds between the worker's heartbeats on a running job"),
    Setting("JOBS_STALE_AFTER", float, 60.0, "default seconds without heartbeat before a running job is a zombie"),
    Setting("JOBS_SWEEP_INTERVAL", float, 30.0, "seconds between zombie sweeps of each worker (its own thread)"),
    Setting("JOBS_DB_CONNECT_TIMEOUT", float, 10.0, "seconds to wait for a connection; 0 off"),
    Setting("JOBS_DB_KEEPALIVES_IDLE", float, 30.0,
            "seconds of TCP silence before keepalive probes (3, 10 s apart); 0 off"),
    Setting("JOBS_DB_STATEMENT_TIMEOUT", float, 300.0,
            "seconds a statement may run; the server cancels it, and a server that does not answer at all "
            "is given up on 5 s later (the connection is closed); 0 off"),
    Setting("JOBS_DB_LOCK_TIMEOUT", float, 30.0, "seconds a statement may wait for a lock; 0 off"),
    Setting("JOBS_PRUNE_EVERY", float, 0.0,
            "seconds between periodic prunes of finished jobs, by one worker at a time; 0 off (manage.py prunejobs "
            "still works)"),
    Setting("JOBS_PRUNE_DONE_AFTER", str, "14d",
            "age past which a done job is pruned (14d, 12h, 30m; 'never' keeps them)"),
    Setting("JOBS_PRUNE_FAILED_AFTER", str, "90d",
            "age past which a failed job is pruned (14d, 12h, 30m; 'never' keeps them)"),
    Setting("JOBS_PRUNE_BATCH", int, 5000, "finished jobs deleted per statement (each its own transaction)"),
    Setting("JOBS_PRUNE_KEEP_TYPES", list, [],
            "job types never pruned, besides map_reconcile, which is always kept (comma-separated)"),
    Setting("JOBS_RETRY_BASE", float, 2.0,
            "seconds before the first retry of a run that raised jobs.Retry or a retry_on exception (doubling, "
            "jittered)"),
    Setting("JOBS_RETRY_MAX", float, 600.0, "longest wait in seconds between two retries of a job"),
    Setting("JOBS_TIMEOUT_GRACE", float, 5.0,
            "seconds a handler past its type's timeout has, once told (JobTimedOut), to stop; one still running "
            "then cannot be stopped: its worker records the timeout and exits (code 75) to be restarted"),
    Setting("JOBS_EXIT_GRACE", float, 30.0,
            "seconds the other running jobs of a worker exiting for a handler it cannot stop have to finish; "
            "those still running then go back to the queue, their attempt not counted and no on_fail"),
    Setting("JOBS_SCHEDULE_CHECK_INTERVAL", float, 5.0,
            "seconds between each worker's looks for a due period of the periodic job types"),
    Setting("JOBS_SCHEDULE_TIMEZONE", str, "UTC", "time zone cron= schedules are read in (every= is always UTC)"),
)

get = SETTINGS.get
# Read by help texts that show the default.
DEFAULTS = SETTINGS.defaults()

# The channel enqueue() notifies and idle workers listen on.
NOTIFY_CHANNEL = "seoinsight_jobs"

"""Job queue settings, read lazily so tests can override them with the `settings` fixture.

Every value comes from the environment through ``seoinsight.settings``:

JOBS_HANDLER_MODULES     extra modules that register job types (comma-separated)
JOBS_LISTEN_NOTIFY       wake workers with LISTEN/NOTIFY (set 0 behind PgBouncer
                         in transaction mode; workers then poll)
JOBS_POLL_INTERVAL       seconds between polls when idle (jittered ±33 %)
JOBS_HEARTBEAT_INTERVAL  seconds between the worker's heartbeats on a running job
JOBS_STALE_AFTER         default seconds without heartbeat before a running job is a zombie
JOBS_SWEEP_INTERVAL      seconds between zombie sweeps of each worker (its own thread)

Database timeouts of the background processes (runjobs and pollmail; the web
keeps its own), applied by ``jobs.dbsession.configure``; 0 turns one off:

JOBS_DB_CONNECT_TIMEOUT    seconds to wait for a connection
JOBS_DB_KEEPALIVES_IDLE    seconds of TCP silence before keepalive probes (3, 10 s apart)
JOBS_DB_STATEMENT_TIMEOUT  seconds a statement may run; the server cancels it, and
                           a server that does not answer at all is given up on
                           5 s later (the connection is closed)
JOBS_DB_LOCK_TIMEOUT       seconds a statement may wait for a lock
"""

from django.conf import settings

DEFAULTS = {
    "JOBS_HANDLER_MODULES": [],
    "JOBS_LISTEN_NOTIFY": True,
    "JOBS_POLL_INTERVAL": 1.5,
    "JOBS_HEARTBEAT_INTERVAL": 10.0,
    "JOBS_STALE_AFTER": 60.0,
    "JOBS_SWEEP_INTERVAL": 30.0,
    "JOBS_DB_CONNECT_TIMEOUT": 10.0,
    "JOBS_DB_KEEPALIVES_IDLE": 30.0,
    "JOBS_DB_STATEMENT_TIMEOUT": 300.0,
    "JOBS_DB_LOCK_TIMEOUT": 30.0,
}

# The channel enqueue() notifies and idle workers listen on.
NOTIFY_CHANNEL = "seoinsight_jobs"


def get(name: str):
    return getattr(settings, name, DEFAULTS[name])

"""System checks for queue settings that would silently break its guarantees."""

from django.conf import settings
from django.core import checks
from django.db import connection
from django.db.utils import load_backend

from . import conf, registry, sql


@checks.register(checks.Tags.database)
def check_postgresql(app_configs=None, **kwargs):
    return engine_errors(settings.DATABASES["default"]["ENGINE"])


def engine_errors(engine: str) -> list:
    # The backend's vendor, not its dotted path: the embedded server's backend (seoinsight.embedded_db)
    # is PostgreSQL's under another name.
    if load_backend(engine).DatabaseWrapper.vendor != "postgresql":
        return [
            checks.Error(
                f"The job queue needs PostgreSQL (SKIP LOCKED, advisory locks, LISTEN/NOTIFY); got {engine}.",
                hint="Set DATABASE_URL to a PostgreSQL server, or unset it to use the embedded one.",
                id="jobs.E001",
            )
        ]
    return []


@checks.register(checks.Tags.database)
def check_state_rules(app_configs=None, databases=None, **kwargs):
    """jobs.E004: the jobs table's state rules (the row trigger jobs_state_rules) do not fire.

    Only where Django runs database checks (``migrate``, ``check --database default``). A table not
    migrated yet, or migrated only up to the CHECK constraints that preceded the trigger, is fine.
    """
    if "default" not in (databases or ()):
        return []
    with connection.cursor() as cursor:
        cursor.execute(STATE_RULES_ENFORCED)
        found = cursor.fetchone()
    if found is None or found[0] in (None, "O", "A"):
        return []
    return [
        checks.Error(
            f"The trigger jobs_state_rules on the jobs table does not fire in ordinary sessions (tgenabled "
            f"{found[0]!r}): PostgreSQL no longer holds job rows to their states (finished_at when finished, "
            "started_at when running, ...).",
            hint="ALTER TABLE jobs ENABLE TRIGGER jobs_state_rules; then look for rows that break the rules "
                 "(docs/operations.md, Job states).",
            id="jobs.E004",
        )
    ]


# How the state rules' trigger fires: 'O' (origin, the default) or 'A' (always) is enforced, 'D' or 'R' is not;
# no row when the jobs table does not exist yet, NULL when it exists without the trigger (before migration 0010).
STATE_RULES_ENFORCED = """
SELECT (SELECT tgenabled::text FROM pg_trigger WHERE tgrelid = t.oid AND tgname = 'jobs_state_rules')
FROM pg_class AS t WHERE t.oid = to_regclass('jobs')
"""


# Zero or less: a worker that never sleeps between polls, never beats, or a sweep that takes every running job;
# a task whose every enqueue is refused.
POSITIVE = ("JOBS_POLL_INTERVAL", "JOBS_HEARTBEAT_INTERVAL", "JOBS_STALE_AFTER", "JOBS_SWEEP_INTERVAL",
            "JOBS_TASK_MAX_ARGS_BYTES")


@checks.register()
def check_values(app_configs=None, **kwargs):
    """jobs.E002: an environment text of the wrong type; jobs.E003: an interval that is not above zero."""
    return conf.SETTINGS.environment_errors("jobs.E002") or conf.SETTINGS.not_positive_errors(POSITIVE, "jobs.E003")


@checks.register()
def check_heartbeat_against_staleness(app_configs=None, **kwargs):
    """A heartbeat slower than half the staleness threshold lets the sweep take live jobs."""
    if conf.SETTINGS.unparsable():
        return []  # check_values reports them; the values cannot be compared
    interval = float(conf.get("JOBS_HEARTBEAT_INTERVAL"))
    thresholds = {"JOBS_STALE_AFTER": registry.default_stale_after()}
    thresholds.update({f"job type {t.name!r}": t.stale_after for t in registry.all_types().values()})
    return [
        checks.Warning(
            f"JOBS_HEARTBEAT_INTERVAL ({interval:g}s) is more than half of the stale_after of {what} "
            f"({stale:g}s): the zombie sweep may re-queue jobs whose worker is alive.",
            hint="Lower JOBS_HEARTBEAT_INTERVAL or raise the threshold.",
            id="jobs.W001",
        )
        for what, stale in thresholds.items()
        if interval > stale / 2
    ]


@checks.register()
def check_guard_indexes(app_configs=None, **kwargs):
    """A one_running_per key without its index: claims slow down as that type's blocked backlog grows."""
    return [
        checks.Warning(
            f"Job type {t.name!r} is guarded on payload key {t.one_running_per!r}, which has no claim index: "
            "while one of its values runs, every claim reads that value's whole queued backlog.",
            hint=f"Guard on one of {', '.join(sql.GUARD_INDEXED_KEYS)}, or add an index like "
                 "jobs_queued_guard_site_id for this key (jobs/migrations/0003_claim_and_sweep.py) "
                 "and list the key in jobs.sql.GUARD_INDEXED_KEYS.",
            id="jobs.W002",
        )
        for t in registry.all_types().values()
        if t.one_running_per and t.one_running_per not in sql.GUARD_INDEXED_KEYS
    ]

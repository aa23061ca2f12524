"""Periodic test job types, declared here; importing this module registers nothing.

Only worker subprocesses register them, for their whole life (tests/support/periodic_worker_types.py,
loaded through JOBS_HANDLER_MODULES by tests/jobs/test_schedules_processes.py). Registered in the
pytest process, they would make every long-running ``Worker`` a test starts enqueue them from its
duty thread, on a connection of its own: committed jobs that other tests would then claim.
"""

from datetime import timedelta

from jobs.registry import JobType

EVERY_2S = "test_every_2s"
HOURLY = "test_hourly_catch_up"


def report_period(job):
    return {"period": job.payload["period"]}


TYPES = (
    JobType(EVERY_2S, report_period, every=timedelta(seconds=2)),
    JobType(HOURLY, report_period, every=timedelta(hours=1)),
)

"""The test job types without the guarded one, for a worker subprocess's whole life (JOBS_HANDLER_MODULES):
its claims then take the unguarded statements, the batched one of ``runjobs --concurrency N`` included.
Never imported by the pytest process (see tests/support/worker_types.py)."""

from jobs import registry
from tests.support.handlers import TYPES

for job_type in TYPES:
    registry.add(job_type)

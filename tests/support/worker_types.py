"""The test job types for a worker subprocess's whole life: tests/support/processes.py names this
module in JOBS_HANDLER_MODULES. Never imported by the pytest process, which registers the same
types per test (tests/jobs/conftest.py)."""

from jobs import registry
from tests.support.handlers import GUARDED, TYPES

for job_type in (*TYPES, GUARDED):
    registry.add(job_type)

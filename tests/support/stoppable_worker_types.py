"""The stoppable test job types for a worker subprocess's whole life (JOBS_HANDLER_MODULES); never
imported by the pytest process (see tests/support/stoppable_types.py)."""

from jobs import registry
from tests.support.stoppable_types import TYPES

for job_type in TYPES:
    registry.add(job_type)

"""The periodic test job types for a worker subprocess's whole life (JOBS_HANDLER_MODULES); never
imported by the pytest process (see tests/support/periodic_types.py)."""

from jobs import registry
from tests.support.periodic_types import TYPES

for job_type in TYPES:
    registry.add(job_type)

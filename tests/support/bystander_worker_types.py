"""The bystander test types for a worker subprocess's whole life (JOBS_HANDLER_MODULES); never imported by
the pytest process (see tests/support/bystander_types.py)."""

from jobs import registry
from tests.support.bystander_types import TYPES

for job_type in TYPES:
    registry.add(job_type)

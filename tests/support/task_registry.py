"""The test tasks (tests/support/task_functions.py) for one test of the pytest process, then out of the registry.

Their job types are registered when the module is imported and whenever one of them is validated
(at every enqueue); ``loaded_tasks`` registers them all on entry and removes every task type on
exit, so the tests that follow see the registry the apps build.
"""

from __future__ import annotations

import importlib
from contextlib import contextmanager

from jobs import registry
from jobs.tasks import run_task
from jobs.tasks_compat import Task

MODULE = "tests.support.task_functions"


@contextmanager
def loaded_tasks():
    module = importlib.import_module(MODULE)
    for value in vars(module).values():
        if isinstance(value, Task):
            value.get_backend().validate_task(value)
    try:
        yield module
    finally:
        for name, job_type in registry.all_types().items():
            if job_type.handler is run_task:
                registry.unregister(name)

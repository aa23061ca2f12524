"""Django's task API, from wherever this Django has it: ``django.tasks`` (Django 6.0+) or the
``django-tasks`` backport (Django 5.2). The names are the same in both but one, the exception
for an invalid task (``InvalidTask``, the backport's ``InvalidTaskError``), offered here as
``InvalidTask``.

``jobs.tasks`` imports the API from here only, so one implementation serves both.
"""

from importlib.util import find_spec

if find_spec("django.tasks") is not None:
    from django.tasks import Task, TaskContext, TaskResult, TaskResultStatus, default_task_backend, task, task_backends
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import TASK_REFRESH_ATTRS, TaskError
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist, TaskResultMismatch
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json

    BUILT_IN = True
else:
    from django_tasks import default_task_backend, task, task_backends  # type: ignore[no-redef]
    from django_tasks.backends.base import BaseTaskBackend  # type: ignore[no-redef]
    from django_tasks.base import (  # type: ignore[no-redef]
        TASK_REFRESH_ATTRS,
        Task,
        TaskContext,
        TaskError,
        TaskResult,
        TaskResultStatus,
    )
    from django_tasks.exceptions import InvalidTaskError as InvalidTask  # type: ignore[no-redef]
    from django_tasks.exceptions import TaskResultDoesNotExist, TaskResultMismatch  # type: ignore[no-redef]
    from django_tasks.signals import task_enqueued, task_finished, task_started  # type: ignore[no-redef]
    from django_tasks.utils import normalize_json  # type: ignore[no-redef]

    BUILT_IN = False

__all__ = [
    "BUILT_IN", "TASK_REFRESH_ATTRS", "BaseTaskBackend", "InvalidTask", "Task", "TaskContext", "TaskError", "TaskResult",
    "TaskResultDoesNotExist", "TaskResultMismatch", "TaskResultStatus", "default_task_backend", "normalize_json", "task",
    "task_backends", "task_enqueued", "task_finished", "task_started",
]

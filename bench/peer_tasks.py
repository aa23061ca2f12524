"""The no-op task of the queue benchmark's django-tasks-db peer (settings: ``bench.peer_settings``)."""

from importlib.util import find_spec

if find_spec("django.tasks"):  # Django 6: the task API django-tasks-db then uses
    from django.tasks import task
else:
    from django_tasks import task


@task()
def noop() -> None:
    """Nothing: what is measured is the queue around it."""

from django.apps import AppConfig


class ImportsConfig(AppConfig):
    name = "imports"
    verbose_name = "Imports"

    def ready(self):
        from . import checks  # noqa: F401  (checks register themselves)
        from .job_subjects import register_job_subjects

        register_job_subjects()

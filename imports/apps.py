from django.apps import AppConfig


class ImportsConfig(AppConfig):
    name = "imports"
    verbose_name = "Imports"

    def ready(self):
        from jobs import registry
        from seoinsight.models import set_scheduled_pulls

        from . import (
            checks,  # noqa: F401  (checks register themselves)
            schedules,
            stale_sites,
            waiting_queues,
        )

        # Scheduled Search Console pulls, when the deployment turns them on (IMPORT_SCHEDULED_PULLS_EVERY).
        pulls = schedules.periodic_type()
        if pulls is not None:
            registry.add(pulls)
        set_scheduled_pulls(lambda: pulls is not None)
        # The admin index's newest data per site (seoinsight.waiting).
        stale_sites.register()
        waiting_queues.register()

        from .job_subjects import register_job_subjects

        register_job_subjects()

from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"

    def ready(self):
        from . import checks, registry  # noqa: F401  (checks register themselves)

        # Every installed app's `handlers` module registers its job types, plus the
        # deployment's own modules named in JOBS_HANDLER_MODULES.
        registry.autodiscover()

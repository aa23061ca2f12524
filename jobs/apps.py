from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"

    def ready(self):
        # checks register themselves; queue attaches Job.report_progress.
        from . import checks, queue, registry  # noqa: F401

        # Every installed app's `handlers` module registers its job types, plus the
        # deployment's own modules named in JOBS_HANDLER_MODULES.
        registry.autodiscover()

        from . import conf, duties, retention, schedules

        # With JOBS_PRUNE_EVERY > 0, one worker at a time deletes old finished jobs (jobs.retention).
        duties.register("jobs.prune", retention.periodic, every=retention.periodic.interval)

        # Every worker enqueues the due periods of the periodic types (jobs.schedules).
        duties.register("jobs.enqueue_due_periods", schedules.enqueue_due,
                        every=lambda: conf.get("JOBS_SCHEDULE_CHECK_INTERVAL"))

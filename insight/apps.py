from django.apps import AppConfig


class InsightConfig(AppConfig):
    name = "insight"
    verbose_name = "Insight"

    def ready(self):
        from imports import job_hooks

        from .sitepage import cache  # registers refresh_site_page, the site page's precomputed top pages

        # The precomputed top pages are behind an import's new rows: refreshed now, not at the next view.
        job_hooks.AFTER_ROWS_WRITTEN.append(cache.refresh_after_import)

        # Alerts: detect_drops and the digests (registered on import), the daily run when INSIGHT_DETECT_DROPS_CRON
        # is set, and the admin index's unacknowledged alerts.
        from jobs import registry

        from . import checks  # noqa: F401  (checks register themselves)
        from .alerts import jobs as alert_jobs
        from .alerts import waiting as alert_waiting

        daily = alert_jobs.periodic_type()
        if daily is not None:
            registry.add(daily)
        alert_waiting.register()

        # The notes' admin page, in a module of its own (insight/admin.py holds the alerts').
        from . import annotation_admin

        annotation_admin.register()

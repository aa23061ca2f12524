from django.apps import AppConfig


class InsightConfig(AppConfig):
    name = "insight"
    verbose_name = "Insight"

    def ready(self):
        from imports import job_hooks

        from .sitepage import cache  # registers refresh_site_page, the site page's precomputed top pages

        # The precomputed top pages are behind an import's new rows: refreshed now, not at the next view.
        job_hooks.AFTER_ROWS_WRITTEN.append(cache.refresh_after_import)

"""Insight settings, each declared once; read them with ``get(name)`` (see seoinsight.conf)."""

from seoinsight.conf import Declarations, Setting

SETTINGS = Declarations(
    # Off unless set: a periodic type registered in every process would be enqueued by the test suite's workers too
    # (as IMPORT_SCHEDULED_PULLS_EVERY). `make run` turns it on.
    Setting("INSIGHT_DETECT_DROPS_CRON", str, "",
            "when the workers queue each org's daily detect_drops job (a cron expression read in "
            "JOBS_SCHEDULE_TIMEZONE, e.g. 0 6 * * *), which records alerts and queues the members' digests; "
            "empty: no daily detection"),
    Setting("INSIGHT_LINK_BASE_URL", str, "http://127.0.0.1:8000",
            "the address the alert digests' links start with (the site as its users reach it, no trailing /)"),
)

get = SETTINGS.get

"""System checks for the insight settings.

insight.E001  INSIGHT_DETECT_DROPS_CRON is not a cron expression: no daily detection, no digests
insight.E002  INSIGHT_LINK_BASE_URL is not an http(s) address: the digests' links would lead nowhere
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.core import checks

from . import conf
from .alerts.jobs import cron_problem


@checks.register()
def check_settings(app_configs=None, **kwargs):
    errors = []
    problem = cron_problem()
    if problem:
        errors.append(checks.Error(f"{problem}.", hint="Five fields, e.g. 0 6 * * * (06:00 every day, in "
                                   "JOBS_SCHEDULE_TIMEZONE); empty turns the daily detection off.", id="insight.E001"))
    base = conf.get("INSIGHT_LINK_BASE_URL")
    parts = urlsplit(base) if isinstance(base, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        errors.append(checks.Error(f"INSIGHT_LINK_BASE_URL is {base!r}; it must be an http(s) address.",
                                   hint="The address the site is reached at, e.g. https://seo.example.com.",
                                   id="insight.E002"))
    return errors

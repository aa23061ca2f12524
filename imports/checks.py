"""System checks for import settings that would otherwise fail only in a worker, mid-import."""

from django.conf import settings
from django.core import checks

from .formats import DATE_ORDERS


@checks.register()
def check_date_order(app_configs=None, **kwargs):
    return date_order_errors(getattr(settings, "IMPORT_DATE_ORDER", "dmy"))


def date_order_errors(value) -> list:
    if value not in DATE_ORDERS:
        return [
            checks.Error(
                f"IMPORT_DATE_ORDER is {value!r}; it must be one of {', '.join(DATE_ORDERS)}.",
                hint="dmy: 1/12/2026 is 1 December (day first); mdy: it is January 12 (month first).",
                id="imports.E001",
            )
        ]
    return []

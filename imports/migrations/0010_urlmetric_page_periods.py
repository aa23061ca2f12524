"""``urlmetric_page_periods``: the rows covering several days, by page, for the "counted once" rule (0011).

A daily row written for a page must find the rows of the same page covering its day: one short
range of this partial index per daily row, on the few rows that cover several days (daily data has
none, so a daily-only target pays one empty probe). Built CONCURRENTLY: imports keep writing meanwhile.
"""

from django.db import migrations

DEFINITION = ("(site_target_id, url_normalized, period_start) INCLUDE (period_end, import_id) "
              "WHERE period_end > period_start")


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ("imports", "0009_metrics_site_target_no_own_index"),
    ]

    operations = [
        migrations.RunSQL(
            sql=f"CREATE INDEX CONCURRENTLY IF NOT EXISTS urlmetric_page_periods ON imports_urlmetric {DEFINITION}",
            reverse_sql="DROP INDEX CONCURRENTLY IF EXISTS urlmetric_page_periods",
        ),
    ]

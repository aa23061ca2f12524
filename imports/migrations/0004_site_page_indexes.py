"""What the site page (imports/sitepage/sql.py) reads metrics through.

``urlmetric_site_days``: a site target's rows by the last day they cover, carrying
every column the page sums (INCLUDE), so a period is one index range read without
the table: an index-only scan. Keyed on period_end (not period_start) so that the
newest day of a target is the index's last entry. ``urlmetric_site_periods``: the
few rows that cover several days, which the page checks against the edges of a
period.

Two statistics the columns' own cannot give. ``urlmetric_site_days_groups``: the
number of distinct (row period, import) groups is far below what the separate
columns suggest; without it the planner sorts millions of rows to group them instead
of hashing a few hundred groups. ``urlmetric_site_days_periods``: which (period_start,
period_end) pairs are common; "whole period inside" is two range conditions the
planner would take as independent, estimating a tenth of the rows a 28-day period
holds, and then read them without parallel workers.

The indexes are built CONCURRENTLY, so a large metrics table keeps taking imports
meanwhile. None of it is in the model's Meta: Django cannot declare extended
statistics, and keeping the four together here says what serves what.
"""

from django.db import migrations

INDEXES = {
    "urlmetric_site_days": "(site_target_id, period_end) INCLUDE "
                           "(period_start, import_id, url_normalized, clicks, impressions, position, position_weight)",
    "urlmetric_site_periods": "(site_target_id, period_end) INCLUDE (period_start, import_id) "
                              "WHERE period_end > period_start",
}

STATISTICS = {
    "urlmetric_site_days_groups": "(ndistinct) ON site_target_id, period_start, period_end, import_id",
    "urlmetric_site_days_periods": "(mcv) ON period_start, period_end",
}


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ('imports', '0003_import_sha256'),
    ]

    operations = [
        *(
            migrations.RunSQL(
                sql=f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON imports_urlmetric {definition}",
                reverse_sql=f"DROP INDEX CONCURRENTLY IF EXISTS {name}",
            )
            for name, definition in INDEXES.items()
        ),
        *(
            migrations.RunSQL(
                sql=f"CREATE STATISTICS IF NOT EXISTS {name} {definition} FROM imports_urlmetric",
                reverse_sql=f"DROP STATISTICS IF EXISTS {name}",
            )
            for name, definition in STATISTICS.items()
        ),
        # The new statistics are empty until the table is analyzed: now, not at autovacuum's next visit.
        migrations.RunSQL(sql="ANALYZE imports_urlmetric", reverse_sql=migrations.RunSQL.noop),
    ]

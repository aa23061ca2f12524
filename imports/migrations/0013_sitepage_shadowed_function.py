"""``imports_sitepage_shadowed``: whether a daily row of a page exists within some days, for the site page's reads.

The site page's statements sum metric rows and must leave out a row covering several days that daily rows of
its page shadow (migration 0011's rule). Written as a subquery in the filter, the planner costs it on every
row, turns away from the covering index and its parallel scans, and its estimate of the rows kept falls; as
this function, evaluated after ``period_end = period_start`` short-circuits for the daily rows, it is called
on the few rows covering several days only, one probe of the natural key's index each: COST 1 says so.
"""

from django.db import migrations

FUNCTION = """
CREATE FUNCTION imports_sitepage_shadowed(target bigint, url text, first_day date, last_day date)
RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE COST 1 AS $$
    -- $n, not the names: imports_urlmetric has a column "url", which a bare name would mean.
    SELECT EXISTS (SELECT FROM imports_urlmetric AS d
                   WHERE d.site_target_id = $1 AND d.url_normalized = $2
                     AND d.period_start BETWEEN $3 AND $4 AND d.period_end = d.period_start)
$$
"""


class Migration(migrations.Migration):

    dependencies = [
        ("imports", "0012_import_replacement"),
    ]

    operations = [
        migrations.RunSQL(sql=FUNCTION,
                          reverse_sql="DROP FUNCTION imports_sitepage_shadowed(bigint, text, date, date)"),
    ]

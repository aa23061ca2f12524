"""The figures' site target has no index of its own: every query by target is served by one that starts with it.

Django gave each foreign key a single-column index. On ``UrlMetric``, ``urlmetric_natural_key`` (site target,
URL, period) and ``urlmetric_site_days`` (site target, period end) start with the site target; on
``DimensionMetric``, ``dimensionmetric_natural_key`` and ``dimensionmetric_top`` do. A lookup by target alone
(a target's figures, the cascade when a target is deleted) reads one of them, and every row an import wrote
paid an entry in one more index for nothing. Dropped CONCURRENTLY: imports keep writing meanwhile.
"""

import django.db.models.deletion
from django.db import migrations, models

INDEXES = {
    "urlmetric": ("imports_urlmetric", "imports_urlmetric_site_target_id_b43074a4", "metrics"),
    "dimensionmetric": ("imports_dimensionmetric", "imports_dimensionmetric_site_target_id_3a705954",
                        "dimension_metrics"),
}


def _no_own_index(model_name: str, table: str, index: str, related_name: str):
    return migrations.SeparateDatabaseAndState(
        state_operations=[
            migrations.AlterField(
                model_name=model_name,
                name="site_target",
                field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                        related_name=related_name, to="seoinsight.sitetarget"),
            ),
        ],
        database_operations=[
            migrations.RunSQL(
                sql=f"DROP INDEX CONCURRENTLY IF EXISTS {index}",
                reverse_sql=f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {index} ON {table} (site_target_id)",
            ),
        ],
    )


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ("imports", "0008_dimension_metrics"),
    ]

    operations = [_no_own_index(model_name, *where) for model_name, where in INDEXES.items()]

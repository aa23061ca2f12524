"""The Search Console export's other tables: metrics per query, device and country.

A performance export holds, beside its Pages table, one table per dimension
for the same period. ``DimensionMetric`` keeps a row per target, dimension,
key (the query, device or country as exported) and period: UNIQUE on those, so
importing the same export again updates the rows instead of doubling them.
Imported from the end of ``imports.models`` so Django finds the model.
"""

from __future__ import annotations

from django.db import connection, models, transaction
from django.db.models import F, Q
from django.db.models.functions import Now


class Dimension(models.TextChoices):
    QUERY = "query", "Queries"
    DEVICE = "device", "Devices"
    COUNTRY = "country", "Countries"


# One statement per dimension table: the export's rows replace what an earlier
# import of the same target, key and period stored. Rows go in key order, as
# ingest.UPSERT_METRICS does, so two imports of one export cannot deadlock.
UPSERT_DIMENSION = """
INSERT INTO imports_dimensionmetric AS m
    (site_target_id, dimension, key, period_start, period_end, clicks, impressions, ctr, position, import_id,
     updated_at)
SELECT %(target)s, %(dimension)s, r.key, %(start)s, %(end)s, r.clicks, r.impressions, r.ctr, r.position,
       %(import_id)s, now()
FROM unnest(%(keys)s::text[], %(clicks)s::int8[], %(impressions)s::int8[], %(ctr)s::float8[],
            %(position)s::float8[]) AS r (key, clicks, impressions, ctr, position)
ORDER BY r.key
ON CONFLICT (site_target_id, dimension, key, period_start, period_end) DO UPDATE
SET (clicks, impressions, ctr, position, import_id, updated_at)
    = (EXCLUDED.clicks, EXCLUDED.impressions, EXCLUDED.ctr, EXCLUDED.position, EXCLUDED.import_id, now())
"""


class DimensionMetricQuerySet(models.QuerySet):
    def store(self, *, site_target_id: int, import_id: int | None, dimension: str, period, rows: dict) -> int:
        """Upsert one dimension table's rows (key -> (clicks, impressions, ctr, position)); returns rows written."""
        if not rows:
            return 0
        keys = sorted(rows)
        columns = list(zip(*(rows[key] for key in keys), strict=True))
        with transaction.atomic(savepoint=False), connection.cursor() as cursor:
            cursor.execute(UPSERT_DIMENSION, {
                "target": site_target_id, "dimension": dimension, "start": period[0], "end": period[1],
                "import_id": import_id, "keys": keys, "clicks": list(columns[0]),
                "impressions": list(columns[1]), "ctr": list(columns[2]), "position": list(columns[3]),
            })
            return cursor.rowcount


class DimensionMetric(models.Model):
    # No index of its own: the natural key and dimensionmetric_top both start with it (migration 0009).
    site_target = models.ForeignKey("seoinsight.SiteTarget", on_delete=models.CASCADE,
                                    related_name="dimension_metrics", db_index=False)
    dimension = models.CharField(max_length=10, choices=Dimension.choices)
    # The query text, device ("Mobile", "Ordinateur") or country ("France", "États-Unis") as exported.
    key = models.TextField()
    period_start = models.DateField()
    period_end = models.DateField()
    clicks = models.BigIntegerField(null=True, blank=True)
    impressions = models.BigIntegerField(null=True, blank=True)
    ctr = models.FloatField(null=True, blank=True)
    position = models.FloatField(null=True, blank=True)
    source_import = models.ForeignKey("imports.Import", null=True, blank=True, on_delete=models.SET_NULL,
                                      related_name="dimension_metrics", db_column="import_id")
    updated_at = models.DateTimeField(auto_now=True, db_default=Now())

    objects = DimensionMetricQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["site_target", "dimension", "key", "period_start", "period_end"],
                                    name="dimensionmetric_natural_key"),
            models.CheckConstraint(condition=Q(dimension__in=Dimension.values), name="dimensionmetric_dimension"),
            models.CheckConstraint(condition=Q(period_end__gte=F("period_start")),
                                   name="dimensionmetric_period_ordered"),
        ]
        indexes = [
            # The site page's top queries: one target's rows of a dimension within a period, read from the
            # index alone (the sums by key need every column the block shows).
            models.Index(fields=["site_target", "dimension", "period_start"],
                         include=["period_end", "key", "clicks", "impressions", "position"],
                         name="dimensionmetric_top"),
        ]

    def __str__(self):
        return f"{self.get_dimension_display()} {self.key} {self.period_start}..{self.period_end}"

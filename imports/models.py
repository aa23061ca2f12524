"""Imports of SEO metrics and the metrics themselves.

An ``Import`` is one file (or one API pull) for one site target; its job does
the work and ``on_fail`` keeps the two coherent. ``UrlMetric`` has a natural key
— target, normalized URL, period — so importing the same export twice updates
rows instead of doubling them.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Now

from jobs.models import Job
from seoinsight.models import Org, Page, SiteTarget


class ImportKind(models.TextChoices):
    CSV = "csv", "CSV"
    XLSX = "xlsx", "Excel"
    ZIP = "zip", "ZIP"  # a Search Console export: a bundle of CSVs
    API = "api", "Search Console API"


class ImportOrigin(models.TextChoices):
    UPLOAD = "upload", "Upload"
    EMAIL = "email", "Email"
    API = "api", "API"


class DateOrder(models.TextChoices):
    """How a file's a/b/yyyy dates are read; blank on an Import: decided from the file."""

    DAY_FIRST = "dmy", "Day first (31/12/2026)"
    MONTH_FIRST = "mdy", "Month first (12/31/2026)"


class ImportStatus(models.TextChoices):
    # Created with its job, in one transaction.
    QUEUED = "queued", "Queued"
    # The job started working on it.
    RUNNING = "running", "Running"
    # All rows read; counts final, and the outcome says what they brought in. map_reconcile was enqueued
    # for the target.
    DONE = "done", "Done"
    # The file is not an import (error says why), or the job failed; set by on_fail.
    FAILED = "failed", "Failed"


class ImportOutcome(models.TextChoices):
    """What a done import brought in (``outcomes.decide_outcome``), set with DONE; blank before that.

    Done means every row was read; the outcome says whether reading them imported anything, so a file
    for another site cannot pass for a success.
    """

    # At least half the data rows were imported.
    IMPORTED = "imported", "Imported"
    # Something was imported, but more than half the data rows were skipped or had errors.
    MOSTLY_SKIPPED = "mostly_skipped", "Mostly skipped"
    # No row was imported: all skipped or bad, or no data rows at all.
    NOTHING_IMPORTED = "nothing_imported", "Nothing imported"


class ImportQuerySet(models.QuerySet):
    def for_org(self, org_id: str):
        return self.filter(org_id=org_id)


def import_upload_path(instance, filename):
    # Stored under a generated name: the operator's filename is kept only as data.
    return f"imports/{instance.org_id}/{instance.uid}"


class Import(models.Model):
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="imports")
    site_target = models.ForeignKey(SiteTarget, on_delete=models.CASCADE, related_name="imports")
    kind = models.CharField(max_length=10, choices=ImportKind.choices)
    origin = models.CharField(max_length=10, choices=ImportOrigin.choices, default=ImportOrigin.UPLOAD)
    status = models.CharField(max_length=10, choices=ImportStatus.choices, default=ImportStatus.QUEUED)
    uid = models.CharField(max_length=32, unique=True, editable=False)
    file = models.FileField(upload_to=import_upload_path, max_length=300, blank=True)
    original_filename = models.CharField(max_length=255, blank=True)
    size = models.BigIntegerField(default=0)
    # SHA-256 of the stored file as written: the job reads it only if it is still these bytes.
    sha256 = models.CharField(max_length=64, blank=True)
    # The period covered, when the file has no Date column (or for API pulls).
    period_start = models.DateField(null=True, blank=True)
    period_end = models.DateField(null=True, blank=True)
    # The import's choices for reading the file; blank: decided from the file.
    sheet = models.CharField(max_length=100, blank=True)
    date_order = models.CharField(max_length=3, choices=DateOrder.choices, blank=True)
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    read = models.IntegerField(default=0)
    inserted = models.IntegerField(default=0)
    updated = models.IntegerField(default=0)
    skipped = models.IntegerField(default=0)
    errors = models.IntegerField(default=0)
    error = models.TextField(blank=True)
    outcome = models.CharField(max_length=20, choices=ImportOutcome.choices, blank=True)
    # The import whose stored file this one imports again, into another target (*Import it into …*).
    reimport_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="reimports")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = ImportQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["org", "-created_at"], name="import_org_created")]
        constraints = [
            models.CheckConstraint(
                condition=Q(period_start__isnull=True) | Q(period_end__gte=F("period_start")),
                name="import_period_ordered",
            ),
            # A file is imported again into a target once: a second click makes no second import.
            models.UniqueConstraint(fields=["reimport_of", "site_target"], condition=Q(reimport_of__isnull=False),
                                    name="import_reimport_once_per_target"),
            # An outcome is one of its values, and only a done import has one.
            models.CheckConstraint(
                condition=Q(outcome="") | Q(status=ImportStatus.DONE, outcome__in=ImportOutcome.values),
                name="import_outcome_when_done",
            ),
        ]

    def __str__(self):
        return self.original_filename or f"{self.get_kind_display()} import {self.pk}"


class UrlMetric(models.Model):
    # No index of its own: the natural key and urlmetric_site_days both start with it (migration 0009).
    site_target = models.ForeignKey(SiteTarget, on_delete=models.CASCADE, related_name="metrics", db_index=False)
    url = models.TextField()
    url_normalized = models.TextField()
    period_start = models.DateField()
    period_end = models.DateField()
    clicks = models.BigIntegerField(null=True, blank=True)
    impressions = models.BigIntegerField(null=True, blank=True)
    ctr = models.FloatField(null=True, blank=True)
    position = models.FloatField(null=True, blank=True)
    # Rows of the import's file added up into this one (several keywords, or a
    # repeated URL and period), and the weight behind ``position``: the sum of
    # their impressions, 1 for a row without any. Together they let a later
    # batch of the same import fold its rows in exactly (ingest.fold).
    source_rows = models.PositiveIntegerField(default=1, db_default=1)
    position_weight = models.FloatField(null=True, blank=True)
    source_import = models.ForeignKey(
        Import, null=True, blank=True, on_delete=models.SET_NULL, related_name="metrics", db_column="import_id"
    )
    page = models.ForeignKey(Page, null=True, blank=True, on_delete=models.SET_NULL, related_name="metrics")
    updated_at = models.DateTimeField(auto_now=True, db_default=Now())

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["site_target", "url_normalized", "period_start", "period_end"],
                name="urlmetric_natural_key",
            ),
            models.CheckConstraint(condition=Q(period_end__gte=F("period_start")), name="urlmetric_period_ordered"),
        ]
        indexes = [
            # map_reconcile reads exactly the unlinked rows of one target.
            models.Index(fields=["site_target"], name="urlmetric_unlinked", condition=Q(page__isnull=True)),
        ]

    def __str__(self):
        return f"{self.url} {self.period_start}..{self.period_end}"


class ImportReplacement(models.Model):
    """Figures an import wrote over those another import had written: per (import, replaced import), how many.

    Counted by a trigger on imports_urlmetric (migration 0012) in the transaction that replaces them, so an
    import's ``updated`` always says whose figures it took. ``replaced_import`` None: an import deleted since.
    """

    source_import = models.ForeignKey(Import, on_delete=models.CASCADE, related_name="replacements",
                                      db_column="import_id")
    replaced_import = models.ForeignKey(Import, null=True, blank=True, on_delete=models.SET_NULL,
                                        related_name="replaced_by")
    figures = models.BigIntegerField()

    class Meta:
        constraints = [
            # NULLs distinct: rows of several deleted imports each keep their line (the page adds them up).
            models.UniqueConstraint(fields=["source_import", "replaced_import"], name="importreplacement_pair"),
        ]

    def __str__(self):
        return f"{self.figures} figures of {self.replaced_import_id} replaced by {self.source_import_id}"


class ColumnMappingQuerySet(models.QuerySet):
    def for_org(self, org_id: str):
        return self.filter(org_id=org_id)


class ColumnMapping(models.Model):
    """How an org's source with unknown column headers is read: field -> header, chosen once by an operator.

    A source is its header row (``formats.headers.signature``): the next file with the same headers from the
    same org is read with this mapping, at upload, by ``importfile``, for mail and in the worker alike.
    """

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="column_mappings")
    signature = models.CharField(max_length=64)
    # The file's header row as it was when mapped, for the admin (the signature is its hash).
    headers = models.JSONField(default=list)
    # field ("url", "clicks", …) -> header; "url" always present.
    mapping = models.JSONField()
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    used_at = models.DateTimeField(null=True, blank=True)

    objects = ColumnMappingQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["org", "signature"], name="columnmapping_one_per_source",
                                    violation_error_message="This org has a mapping for these headers already."),
            models.CheckConstraint(condition=Q(signature__regex=r"^[0-9a-f]{64}$"),
                                   name="columnmapping_signature_sha256",
                                   violation_error_message="The headers' signature is not a SHA-256 hex digest."),
            # A JSON object naming the URL column; every other key is checked by formats.headers.mapping_problem.
            models.CheckConstraint(condition=Q(mapping__contains={}, mapping__has_key="url"),
                                   name="columnmapping_object_with_url",
                                   violation_error_message="A mapping must say which column holds the URL."),
            models.CheckConstraint(condition=Q(headers__contains=[]), name="columnmapping_headers_list",
                                   violation_error_message="The headers must be a list."),
        ]

    def __str__(self):
        return ", ".join(f"{header} → {field}" for field, header in self.mapping.items())


from .dimension_models import DimensionMetric  # noqa: E402, F401  (its own module: the export's other tables)

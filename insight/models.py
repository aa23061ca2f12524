"""Insight's own tables: the alerts ``detectdrops`` records and the notes operators put on a site's timeline.

An alert is recorded once per site, kind, page and period (the database refuses a second), so any
number of detectors running at once record one. Both belong to their site's org (``orgscope.org_path``).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from seoinsight.models import Site


class AlertKind(models.TextChoices):
    CLICKS_DROP = "clicks_drop", "Clicks dropped"
    PAGE_DROP = "page_drop", "A top page dropped"
    STALE_DATA = "stale_data", "Data is late"


class Alert(models.Model):
    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="alerts")
    kind = models.CharField(max_length=20, choices=AlertKind.choices)
    # The page that dropped (page_drop); blank for the site's own alerts.
    page_url = models.TextField(blank=True, default="")
    # The days judged: the last complete days with data (drops), or the days with no data yet (stale_data).
    period_start = models.DateField()
    period_end = models.DateField()
    # The figures compared: clicks of the period before and of this one (drops); for stale_data, the days
    # of delay the site's habit allows and the days it has been without data.
    before = models.FloatField(null=True, blank=True)
    after = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                        related_name="+")

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # Two detectors at once, or one run again, record the alert once.
            models.UniqueConstraint(fields=["site", "kind", "page_url", "period_start", "period_end"],
                                    name="alert_once_per_period"),
            models.CheckConstraint(condition=Q(kind__in=AlertKind.values), name="alert_kind"),
            models.CheckConstraint(condition=Q(period_end__gte=F("period_start")), name="alert_period_ordered"),
            # Only a page drop names a page.
            models.CheckConstraint(condition=Q(kind=AlertKind.PAGE_DROP, page_url__gt="") | (
                ~Q(kind=AlertKind.PAGE_DROP) & Q(page_url="")), name="alert_page_for_page_drop"),
        ]
        indexes = [
            # What is open, per site: the portfolio, the site page and the admin index read only these.
            models.Index(fields=["site", "-created_at"], name="alert_open", condition=Q(acknowledged_at__isnull=True)),
        ]

    def __str__(self):
        what = f" {self.page_url}" if self.page_url else ""
        return f"{self.get_kind_display()}{what}, {self.period_start} → {self.period_end}"


class Annotation(models.Model):
    """A dated note on a site's timeline ("moved to HTTPS"), shown on its chart, the portfolio and the CSV."""

    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="annotations")
    day = models.DateField()
    text = models.CharField(max_length=200)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["day", "pk"]
        indexes = [models.Index(fields=["site", "day"], name="annotation_site_day")]
        constraints = [models.CheckConstraint(condition=~Q(text=""), name="annotation_text_not_blank")]

    def __str__(self):
        return f"{self.day}: {self.text}"

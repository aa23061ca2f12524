"""Insight's own tables: the alerts ``detectdrops`` records and the notes operators put on a site's timeline.

An alert is recorded once per site, kind, page and period (the database refuses a second), so any
number of detectors running at once record one. Both belong to their site's org (``orgscope.org_path``).
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q

from seoinsight.models import Membership, Org, Site


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


class AlertThresholds(models.Model):
    """How far an org's clicks must fall to raise an alert: both at once, per site and per top page.

    An org without a row uses the defaults (``insight.alerts.decide.DEFAULT_THRESHOLDS``): org settings are
    a superuser's (the admin), like the org itself.
    """

    org = models.OneToOneField(Org, on_delete=models.CASCADE, primary_key=True, related_name="alert_thresholds")
    drop_percent = models.PositiveSmallIntegerField(
        default=30, validators=[MinValueValidator(1), MaxValueValidator(100)], verbose_name="fall of at least (%)",
        help_text="An alert needs clicks to fall by at least this share of the week before…")
    drop_clicks = models.PositiveIntegerField(
        default=50, validators=[MinValueValidator(1)], verbose_name="and at least (clicks)",
        help_text="…and by at least this many clicks, so that a small site's few clicks raise nothing.")

    class Meta:
        verbose_name = "alert thresholds"
        verbose_name_plural = "alert thresholds"
        constraints = [
            models.CheckConstraint(condition=Q(drop_percent__gte=1, drop_percent__lte=100),
                                   name="alertthresholds_percent_range"),
            models.CheckConstraint(condition=Q(drop_clicks__gte=1), name="alertthresholds_clicks_positive"),
        ]

    def __str__(self):
        return f"{self.org_id}: -{self.drop_percent} % and -{self.drop_clicks} clicks"


class DigestOptIn(models.Model):
    """A member who asked for the daily alerts digest of that org (the row is the choice; removing it opts out)."""

    membership = models.OneToOneField(Membership, on_delete=models.CASCADE, primary_key=True,
                                      related_name="alert_digest")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"digest for {self.membership}"


class DigestStatus(models.TextChoices):
    # In: the digest job took the member's day (its alerts chosen) and is about to send; a retry sends again.
    SENDING = "sending", "Sending"
    # In: the SMTP server accepted the message. Out: never; a retry or a second job finds it and sends nothing.
    SENT = "sent", "Sent"


class DigestSent(models.Model):
    """One member's digest of one day: the alerts it holds, chosen once, and whether the mail left.

    UNIQUE per user, org and day: a second job of the day finds the row. See insight/alerts/digest.py for the
    window between the server's acceptance and the commit of ``sent``.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    status = models.CharField(max_length=10, choices=DigestStatus.choices, default=DigestStatus.SENDING)
    alerts = models.ManyToManyField(Alert, related_name="digests")
    recipient = models.CharField(max_length=254)
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "org", "day"], name="digest_once_per_member_day"),
            models.CheckConstraint(condition=Q(status__in=DigestStatus.values), name="digest_status"),
            models.CheckConstraint(condition=Q(status=DigestStatus.SENT, sent_at__isnull=False)
                                   | Q(status=DigestStatus.SENDING, sent_at__isnull=True), name="digest_sent_at"),
        ]

    def __str__(self):
        return f"digest {self.day} to {self.user} ({self.org_id}): {self.get_status_display()}"


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

"""Tenancy and the things SEO data is about.

Every row a user can reach hangs off an ``Org``; views resolve the caller's org
(see ``seoinsight.auth``) and filter on it, so another org's object is a 404.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
import secrets
from datetime import UTC, datetime, time, timedelta

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models.functions import Now
from django.utils import timezone

from . import crypto
from .hosts import normalise_domain, site_aliases, site_hosts

TOKEN_PREFIX = "sik_"
# Where a service-account key may send its signed assertion: Google's token endpoint, unless
# SEARCH_CONSOLE_TOKEN_URIS widens it (tests use a loopback endpoint). Anything else would let
# whoever pastes a key make the worker POST to a URL of their choice (SSRF).
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"


class Org(models.Model):
    """A client organisation. The text key is the seed's ``org_id TEXT``."""

    id = models.CharField(
        primary_key=True,
        max_length=64,
        validators=[RegexValidator(r"^[a-z0-9][a-z0-9_-]*$", "Lowercase letters, digits, '-' and '_' only.")],
        help_text="Short stable identifier, e.g. 'acme'. Used in job rows and URLs.",
    )
    name = models.CharField(max_length=200)
    # Mail rules (mailpoll.routing): reports+<slug>@ routes to that site's default target when no rule decides.
    plus_tag_routes_to_site = models.BooleanField(
        default=False, db_default=False, verbose_name="plus tag names a site",
        help_text="Mail to an address like reports+<site slug>@… goes to that site's default target "
                  "when no mail rule decides.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self):
        return self.name or self.id


class Membership(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="memberships")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "org"], name="membership_user_org_unique",
                                               violation_error_message="This user is already a member of this org.")]

    def __str__(self):
        return f"{self.user} in {self.org_id}"


class ApiTokenQuerySet(models.QuerySet):
    def authenticate(self, raw_token: str) -> ApiToken | None:
        """The live token matching ``raw_token``, or None. Only the hash is stored."""
        if not raw_token.startswith(TOKEN_PREFIX):
            return None
        return self.select_related("org").filter(token_hash=hash_token(raw_token)).first()


class ApiToken(models.Model):
    """A machine client's credential for one org. The raw token is shown once, at creation."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["org", "name"], name="apitoken_org_name_unique",
                                               violation_error_message="This org already has a token with that name.")]

    def __str__(self):
        return f"{self.org_id}/{self.name}"

    @classmethod
    def issue(cls, org: Org, name: str) -> tuple[ApiToken, str]:
        """Create a token and return it with its raw value, which is not stored anywhere."""
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(org=org, name=name, token_hash=hash_token(raw))
        return token, raw

    def touch(self) -> None:
        """Record use, at most once a minute so a busy client does not write on every call."""
        now = timezone.now()
        if self.last_used_at is None or (now - self.last_used_at).total_seconds() > 60:
            ApiToken.objects.filter(pk=self.pk).update(last_used_at=now)
            self.last_used_at = now


def hash_token(raw: str) -> str:
    # Tokens are 256 random bits: a fast hash is enough, no password stretching needed.
    return hashlib.sha256(raw.encode()).hexdigest()


class Site(models.Model):
    """A client's web site. Its domain and aliases are the hosts its data is matched by (``seoinsight.hosts``).

    ``clean()`` normalises what was typed: ``https://www.Example.co.uk/`` is the domain ``example.co.uk`` with
    the alias ``www.example.co.uk``. Rows stored before that rule may hold other spellings (migration 0005
    says which it left); they match no URL until corrected.
    """

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="sites")
    domain = models.CharField(
        max_length=253,
        help_text="The host name the site is served on, e.g. example.com. A URL is fine: its host is kept, and "
                  "www. becomes an alias.")
    aliases = ArrayField(
        models.CharField(max_length=253), blank=True, default=list,
        db_default=models.Value([], ArrayField(models.CharField(max_length=253))),
        help_text="Other host names of the same site, e.g. www.example.com, one per line.")
    slug = models.SlugField(max_length=64, blank=True, default="", db_default="",
                            help_text="A short name for mail: reports+<slug>@… (when the org allows it).")
    default_target = models.ForeignKey(
        "SiteTarget", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="Where mail addressed to the site's slug is imported.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["domain"]
        constraints = [
            models.UniqueConstraint(fields=["org", "domain"], name="site_org_domain_unique",
                                    violation_error_message="Another site of this org has that domain."),
            models.UniqueConstraint(fields=["org", "slug"], condition=~models.Q(slug=""), name="site_org_slug_unique",
                                    violation_error_message="Another site of this org has that slug."),
        ]

    def __str__(self):
        return self.domain

    def clean(self):
        super().clean()
        errors = {}
        # A foreign key cannot say "one of my own targets"; this does, for every form.
        if self.default_target_id is not None and (self.pk is None or self.default_target.site_id != self.pk):
            errors["default_target"] = "Choose one of this site's own targets."
        www = None
        if self.domain:  # an empty one is the field's own error
            try:
                self.domain, www = normalise_domain(self.domain)
            except ValueError as exc:
                errors["domain"] = str(exc)
        try:
            self.aliases = site_aliases(self.domain, www, self.aliases)
        except ValueError as exc:
            errors["aliases"] = str(exc)
        if not errors and self.org_id is not None:
            errors = self._taken_hosts()
        if errors:
            raise ValidationError(errors)

    def _taken_hosts(self) -> dict[str, list[str]]:
        """The hosts of this site that another site of its org has, as errors of the field naming them.

        What a form can say before the save; the UNIQUE of ``SiteHost`` stays the authority.
        """
        errors: dict[str, list[str]] = {}
        taken = (SiteHost.objects.filter(org_id=self.org_id, host__in=site_hosts(self)).exclude(site_id=self.pk)
                 .select_related("site").order_by("host"))
        for row in taken:
            field = "domain" if row.host == self.domain else "aliases"
            errors.setdefault(field, []).append(f"{row.host} is already a host of the site {row.site}.")
        return errors


class SiteHost(models.Model):
    """Every host of a site — its domain and each alias — one row each, so that a host belongs to one site of an org.

    Written only by the trigger ``seoinsight_site_hosts`` (migration 0005) whenever a site's domain, aliases or
    org change: a list column alone could not make the database refuse one org's two sites sharing a host, this
    UNIQUE does, and it is also the index ``seoinsight.sites`` looks hosts up by.
    """

    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="hosts", editable=False)
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", editable=False)
    host = models.CharField(max_length=253, editable=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["org", "host"], name="sitehost_org_host_unique")]

    def __str__(self):
        return self.host


# Search Console's figures for a day are final about this many days later (its API is asked for final data only).
SEARCH_CONSOLE_SETTLING_DAYS = 3
# Search Console keeps 16 months of data: a pull cannot reach further back.
MAX_PULL_DAYS = 480


class PullSchedule(models.TextChoices):
    """How often the workers pull a target's Search Console data (``imports.schedules``). Periods are UTC."""

    OFF = "off", "Off"
    DAILY = "daily", "Daily"
    WEEKLY = "weekly", "Weekly (from Monday)"

    @property
    def days(self) -> int:
        return {"off": 0, "daily": 1, "weekly": 7}[self.value]


# Whether this deployment queues scheduled pulls at all: imports says (its IMPORT_SCHEDULED_PULLS_EVERY) through
# ``set_scheduled_pulls``; the core's screens only ask, so a schedule that nothing runs says so.
def _no_scheduled_pulls() -> bool:
    return False


_scheduled_pulls_on: Callable[[], bool] = _no_scheduled_pulls


def set_scheduled_pulls(is_on: Callable[[], bool]) -> None:
    global _scheduled_pulls_on
    _scheduled_pulls_on = is_on


def scheduled_pulls_on() -> bool:
    return _scheduled_pulls_on()


def pull_period_start(schedule: str, at: datetime) -> datetime | None:
    """The start of the period of ``schedule`` that holds ``at``: its UTC day, or its week from Monday 00:00 UTC.

    >>> pull_period_start("weekly", datetime(2026, 12, 4, 15, 30, tzinfo=UTC))  # a Friday
    datetime.datetime(2026, 11, 30, 0, 0, tzinfo=datetime.timezone.utc)
    >>> pull_period_start("off", datetime(2026, 12, 4, tzinfo=UTC)) is None
    True
    """
    days = PullSchedule(schedule).days
    if not days:
        return None
    day = datetime.combine(at.astimezone(UTC).date(), time(), UTC)
    return day - timedelta(days=day.weekday()) if days == 7 else day


def pull_due(schedule: str, last_queued: datetime | None, now: datetime) -> bool:
    """Whether a target's scheduled pull is due at ``now``: it has a schedule and none was queued this period.

    A ``last_queued`` ahead of ``now`` (taken while the clock was ahead) holds until a period starts after it.
    """
    start = pull_period_start(schedule, now)
    return start is not None and (last_queued is None or last_queued < start)


def next_pull(schedule: str, last_queued: datetime | None, now: datetime) -> datetime | None:
    """From when the next scheduled pull may be queued: ``now`` if due, else the next period's start; None if off."""
    if pull_due(schedule, last_queued, now):
        return now
    start = pull_period_start(schedule, max(now, last_queued) if last_queued else now)
    return None if start is None else start + timedelta(days=PullSchedule(schedule).days)


def pull_days_problem(schedule: str, days: int) -> str | None:
    """Why refreshing ``days`` days is too few for ``schedule``, or None.

    A day's figures are final SEARCH_CONSOLE_SETTLING_DAYS late; a pull fetches final figures only, so a day
    must still be among the days refreshed by the first pull after that, one period later at worst.

    >>> pull_days_problem("weekly", 7)
    'A weekly pull must refresh at least 10 days, or the days still settling at each pull are never fetched.'
    >>> pull_days_problem("daily", 4) is None
    True
    """
    period = PullSchedule(schedule).days
    least = period + SEARCH_CONSOLE_SETTLING_DAYS
    if period and days < least:
        return (f"A {schedule} pull must refresh at least {least} days, "
                "or the days still settling at each pull are never fetched.")
    return None


class SiteTarget(models.Model):
    """What data is imported against: a URL prefix of a site, or a Search Console property.

    A target with a property and a key may be pulled on a schedule (``pull_*``, run by ``imports.schedules``).
    """

    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="targets")
    url_prefix = models.CharField(
        max_length=2000, blank=True,
        help_text="A URL on one of the site's hosts, e.g. https://example.com/blog/ — rows outside it are skipped."
    )
    search_console_property = models.CharField(
        max_length=300, blank=True, help_text="e.g. sc-domain:example.com or https://example.com/"
    )
    # A Google service-account key (JSON), encrypted; write-only (see set_service_account).
    search_console_credentials = models.TextField(blank=True, editable=False)
    pull_schedule = models.CharField(
        max_length=10, choices=PullSchedule.choices, default=PullSchedule.OFF, db_default=PullSchedule.OFF,
        verbose_name="scheduled pull",
        help_text="Pull the property's data on its own, once a day or once a week (UTC), when the deployment runs "
                  "scheduled pulls (docs/operations.md). Needs the property and the service-account key.")
    pull_days = models.PositiveSmallIntegerField(
        default=10, db_default=10, validators=[MinValueValidator(1), MaxValueValidator(MAX_PULL_DAYS)],
        verbose_name="days refreshed",
        help_text="Each scheduled pull fetches this many days, up to yesterday, again: Search Console's figures "
                  "for a day are final 2–3 days late.")
    # The turn of the current period, taken by the guarded UPDATE of imports.schedules that queues the pull.
    pull_queued_at = models.DateTimeField(null=True, blank=True, editable=False,
                                          verbose_name="last scheduled pull queued")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=~models.Q(url_prefix="") | ~models.Q(search_console_property=""),
                name="sitetarget_has_prefix_or_property",
                violation_error_message="Give a URL prefix or a Search Console property (or both).",
            ),
            models.CheckConstraint(
                condition=models.Q(pull_schedule__in=PullSchedule.values),
                name="sitetarget_pull_schedule_known",
                violation_error_message="Choose a scheduled pull: off, daily or weekly.",
            ),
            models.CheckConstraint(
                condition=models.Q(pull_schedule=PullSchedule.OFF) | ~models.Q(search_console_property=""),
                name="sitetarget_schedule_needs_property",
                violation_error_message="A scheduled pull needs a Search Console property.",
            ),
            models.CheckConstraint(
                condition=models.Q(pull_days__gte=1, pull_days__lte=MAX_PULL_DAYS),
                name="sitetarget_pull_days_range",
                violation_error_message=f"Refresh from 1 to {MAX_PULL_DAYS} days (Search Console keeps 16 months).",
            ),
        ]

    def __str__(self):
        return self.url_prefix or self.search_console_property

    def clean(self):
        super().clean()
        if self.pull_schedule == PullSchedule.OFF:
            return
        errors = {}
        if not self.search_console_credentials:
            errors["pull_schedule"] = ("A scheduled pull needs the service-account key: paste it on the target's own "
                                       "page (Site targets) first.")
        problem = isinstance(self.pull_days, int) and pull_days_problem(self.pull_schedule, self.pull_days)
        if problem:
            errors["pull_days"] = problem
        if errors:
            raise ValidationError(errors)

    @property
    def org_id(self) -> str:
        return self.site.org_id

    @property
    def has_search_console_credentials(self) -> bool:
        return bool(self.search_console_credentials)

    def set_service_account(self, key_json: str) -> None:
        """Store a service-account key encrypted, replacing any stored one.

        Validated as a JSON object with the fields Google needs and an allowed ``token_uri``.
        """
        import json

        info = json.loads(key_json)
        if not isinstance(info, dict):
            raise ValueError("not a service-account key: expected a JSON object")
        missing = {"client_email", "private_key", "token_uri"} - set(info)
        if missing:
            raise ValueError(f"not a service-account key: missing {', '.join(sorted(missing))}")
        check_token_uri(info["token_uri"])
        self.search_console_credentials = crypto.encrypt(json.dumps(info))

    def service_account_info(self) -> dict | None:
        import json

        if not self.search_console_credentials:
            return None
        return json.loads(crypto.decrypt(self.search_console_credentials))


crypto.register_column("seoinsight.SiteTarget", "search_console_credentials")


def allowed_token_uris() -> list[str]:
    return list(getattr(settings, "SEARCH_CONSOLE_TOKEN_URIS", None) or [GOOGLE_TOKEN_URI])


def check_token_uri(uri) -> None:
    """Raise ValueError unless ``uri`` is one of the allowed token endpoints (exact match)."""
    if not isinstance(uri, str) or uri not in allowed_token_uris():
        raise ValueError(f"token_uri must be Google's token endpoint {GOOGLE_TOKEN_URI} "
                         f"(SEARCH_CONSOLE_TOKEN_URIS lists the allowed ones), not {str(uri)[:200]!r}")


class Page(models.Model):
    """A URL of a site target, one row per normalized URL. Created by ``map_reconcile``."""

    site_target = models.ForeignKey(SiteTarget, on_delete=models.CASCADE, related_name="pages")
    url = models.TextField(help_text="The URL as first seen.")
    url_normalized = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True, db_default=Now())

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["site_target", "url_normalized"], name="page_target_url_unique")
        ]

    def __str__(self):
        return self.url

import re
from datetime import UTC

from django import forms
from django.contrib import admin
from django.contrib.auth import admin as auth_admin
from django.contrib.auth.models import Group, User
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from .auth import org_link
from .hosts import prefix_problem, site_hosts
from .models import ApiToken, Membership, Org, PullSchedule, Site, SiteTarget, next_pull, pull_due, scheduled_pulls_on
from .orgscope import OrgScopedAdmin, OrgScopedInline, SuperuserOnlyAdmin

# What waits for a person comes first on the index (seoinsight.waiting: the apps register their queues).
admin.site.index_template = "admin/seoinsight_index.html"

# Users and groups belong to no org: editing them is a superuser's right (see seoinsight.orgscope).
admin.site.unregister(User)
admin.site.unregister(Group)


@admin.register(User)
class UserAdmin(SuperuserOnlyAdmin, auth_admin.UserAdmin):
    pass


@admin.register(Group)
class GroupAdmin(SuperuserOnlyAdmin, auth_admin.GroupAdmin):
    pass


# An org's settings, who belongs to it and its machine credentials are a superuser's decision
# (operator_group.LEFT_OUT): no org's staff reaches these pages, whatever permissions they hold.
class SaysWhoDecides:
    """Mix in before SuperuserOnlyAdmin: staff who reach one of its pages read why not and whom to ask (a 403)."""

    decided_by_superuser = "These settings are decided by a superuser."

    def _refused(self, request):
        opts = self.model._meta
        return TemplateResponse(request, "admin/superuser_only.html", {
            **self.admin_site.each_context(request), "title": f"{opts.verbose_name_plural.capitalize()}: a "
            "superuser's page", "opts": opts, "why": self.decided_by_superuser,
        }, status=403)

    def changelist_view(self, request, extra_context=None):
        if not request.user.is_superuser:
            return self._refused(request)
        return super().changelist_view(request, extra_context)

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        if not request.user.is_superuser:
            return self._refused(request)
        return super().changeform_view(request, object_id, form_url, extra_context)

    def delete_view(self, request, object_id, extra_context=None):
        if not request.user.is_superuser:
            return self._refused(request)
        return super().delete_view(request, object_id, extra_context)

    def history_view(self, request, object_id, extra_context=None):
        if not request.user.is_superuser:
            return self._refused(request)
        return super().history_view(request, object_id, extra_context)


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Org)
class OrgAdmin(SaysWhoDecides, SuperuserOnlyAdmin, admin.ModelAdmin):
    decided_by_superuser = ("An org's settings (its name, whether a plus tag names a site) and who belongs to it "
                            "are decided by a superuser, for every org at once.")
    list_display = ["id", "name", "created_at"]
    search_fields = ["id", "name"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(SaysWhoDecides, SuperuserOnlyAdmin, admin.ModelAdmin):
    decided_by_superuser = "Who belongs to which org is decided by a superuser."
    list_display = ["user", "org", "created_at"]
    list_filter = ["org"]
    search_fields = ["user__username", "org__id"]
    autocomplete_fields = ["user", "org"]


@admin.register(ApiToken)
class ApiTokenAdmin(SaysWhoDecides, SuperuserOnlyAdmin, admin.ModelAdmin):
    """Tokens are created with ``manage.py createapitoken``: the raw value is shown once, there."""

    decided_by_superuser = "An org's API tokens are created and revoked by a superuser."

    list_display = ["name", "org", "created_at", "last_used_at"]
    list_filter = ["org"]
    search_fields = ["name", "org__id"]
    readonly_fields = ["org", "name", "created_at", "last_used_at"]
    fields = readonly_fields

    def has_add_permission(self, request):
        return False


class HostListField(forms.CharField):
    """Host names, one per line or separated by commas; ``Site.clean`` normalises and checks each."""

    widget = forms.Textarea(attrs={"rows": 2})

    def prepare_value(self, value):
        return "\n".join(value) if isinstance(value, list | tuple) else value

    def to_python(self, value):
        return [host for host in re.split(r"[\s,]+", super().to_python(value)) if host]


class SiteForm(forms.ModelForm):
    aliases = HostListField(required=False, help_text=Site._meta.get_field("aliases").help_text)

    class Meta:
        model = Site
        fields = ["org", "domain", "aliases", "slug", "default_target"]


class TargetPrefixForm(forms.ModelForm):
    """A target's URL prefix is an http(s) URL on one of its site's hosts, or the operator confirms another host.

    Checked when the target is new or its prefix or site changes, so that a target saved before the rule, or
    confirmed once, does not stop every later save of its site's page.
    """

    use_prefix_anyway = forms.BooleanField(
        required=False, label="Use this prefix anyway",
        help_text="Only needed when the URL prefix is not on one of the site's hosts.")

    class Meta:
        model = SiteTarget
        fields = ["url_prefix", "use_prefix_anyway", "search_console_property"]

    def clean(self):
        data = super().clean()
        # On the site's page the site is the one being saved, with the domain and aliases just typed.
        site, prefix = data.get("site"), data.get("url_prefix")
        unchanged = self.instance.pk is not None and not {"url_prefix", "site"} & set(self.changed_data)
        if site is None or not prefix or unchanged:
            return data
        problem = prefix_problem(prefix, site_hosts(site), confirmed=data.get("use_prefix_anyway", False))
        if problem:
            self.add_error("url_prefix", problem)
        return data


def utc(moment) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


class TargetColumns:
    """Mix in first to a site target admin or inline: the id ``importfile --target`` takes, the scheduled pull."""

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if db_field.name in ("pull_schedule", "pull_days"):
            # A POST without them (a page loaded before they existed, a script) keeps the target's values.
            field.required = False
        return field

    @admin.display(description="id", ordering="pk")
    def target_id(self, target):
        return target.pk or "—"

    @admin.display(description="last / next pull")
    def pull_state(self, target):
        """What the schedule did and will do, as of now (the workers queue a due pull at their next look)."""
        if target.pull_schedule == PullSchedule.OFF:
            return "not scheduled"
        if not target.has_search_console_credentials:
            return "not pulled: no service-account key"
        if not scheduled_pulls_on():
            return "not pulled: this deployment queues no scheduled pulls (IMPORT_SCHEDULED_PULLS_EVERY is 0)"
        last = utc(target.pull_queued_at) if target.pull_queued_at else "never"
        schedule, now = (target.pull_schedule, target.pull_queued_at), timezone.now()
        upcoming = "due now" if pull_due(*schedule, now) else f"from {utc(next_pull(*schedule, now))}"
        return f"last queued {last} · next {upcoming}"


class SiteTargetInline(TargetColumns, OrgScopedInline, admin.TabularInline):
    model = SiteTarget
    form = TargetPrefixForm
    fields = ["target_id", "url_prefix", "use_prefix_anyway", "search_console_property", "pull_schedule", "pull_days",
              "pull_state"]
    readonly_fields = ["target_id", "pull_state"]
    extra = 0


@admin.register(Site)
class SiteAdmin(OrgScopedAdmin, admin.ModelAdmin):
    form = SiteForm
    list_display = ["domain", "aliases", "org", "slug", "default_target", "site_page", "created_at"]
    list_filter = ["org"]
    search_fields = ["domain", "slug", "hosts__host"]
    autocomplete_fields = ["org"]
    fields = ["org", "domain", "aliases", "host_names", "slug", "default_target", "site_page"]
    readonly_fields = ["host_names", "site_page"]
    inlines = [SiteTargetInline]

    @admin.display(description="figures")
    def site_page(self, site):
        """The site's page (the imports app's, named by URL only: the core imports no app), in the site's org."""
        if site.pk is None:
            return "—"
        return format_html('<a href="{}">site page</a>', org_link(reverse("insight:site", args=[site.pk]), site.org_id))

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        if "default_target" in form.base_fields:
            # The site's own targets only (none yet on a new site: save it, add targets, then choose).
            form.base_fields["default_target"].queryset = SiteTarget.objects.filter(site=obj) if obj \
                else SiteTarget.objects.none()
        return form

    @admin.display(description="hosts")
    def host_names(self, site):
        """What URLs are matched against, as saved: the domain and the aliases."""
        return ", ".join(sorted(site_hosts(site))) if site.pk else "—"


class WriteOnlyTextarea(forms.Textarea):
    """A textarea that never renders a value back, not even the one a refused form was posted with."""

    def format_value(self, value):
        return None


class SiteTargetForm(TargetPrefixForm):
    """The service-account key is write-only: never rendered back, replaced only when a new one is pasted.

    A key stays with the site it was pasted for: moving the target to another site needs the key again.
    The URL prefix is checked against the site's hosts (``TargetPrefixForm``).
    """

    service_account_key = forms.CharField(
        required=False,
        widget=WriteOnlyTextarea(attrs={"rows": 4, "autocomplete": "off", "placeholder": "Paste the JSON key file"}),
        help_text="Google service-account key (JSON) with access to the Search Console property. "
        "Stored encrypted; leave empty to keep the current key. Its token_uri must be Google's "
        "(https://oauth2.googleapis.com/token).",
    )
    clear_service_account_key = forms.BooleanField(required=False, label="Remove the stored key")

    class Meta:
        model = SiteTarget
        fields = ["site", "url_prefix", "use_prefix_anyway", "search_console_property"]

    def clean_service_account_key(self):
        key = self.cleaned_data["service_account_key"].strip()
        if key:
            try:
                self.instance.set_service_account(key)
            except (ValueError, TypeError) as exc:
                raise forms.ValidationError(f"Not a usable service-account key: {exc}") from None
        return key

    def clean(self):
        data = super().clean()
        stored = self.instance.pk and self.instance.has_search_console_credentials
        moved = stored and data.get("site") is not None and data["site"].pk != self.instance.site_id
        if moved and not data.get("service_account_key") and not data.get("clear_service_account_key"):
            self.add_error("service_account_key", "The site changed: paste the service-account key again for "
                           "the new site (the stored one does not follow), or remove the stored key.")
        return data

    def save(self, commit=True):
        if self.cleaned_data.get("clear_service_account_key") and not self.cleaned_data.get("service_account_key"):
            self.instance.search_console_credentials = ""
        return super().save(commit)


@admin.register(SiteTarget)
class SiteTargetAdmin(TargetColumns, OrgScopedAdmin, admin.ModelAdmin):
    """The site target admin; apps above the core add their actions by subclassing it (imports.admin)."""

    form = SiteTargetForm
    list_display = ["target_id", "__str__", "site", "search_console_property", "has_key", "pull_state", "created_at"]
    list_display_links = ["target_id", "__str__"]
    list_filter = ["site__org", "pull_schedule"]
    search_fields = ["url_prefix", "search_console_property", "site__domain"]
    autocomplete_fields = ["site"]
    fieldsets = [
        (None, {"fields": ["importfile_usage", "site", "url_prefix", "use_prefix_anyway", "search_console_property",
                           "service_account_key", "clear_service_account_key"]}),
        ("Scheduled pull", {
            "fields": ["pull_schedule", "pull_days", "pull_state"],
            "description": "The workers queue the Search Console pull of a scheduled target once a day or once a "
                           "week (UTC), each pull fetching the days refreshed up to yesterday again.",
        }),
    ]
    readonly_fields = ["importfile_usage", "pull_state"]

    @admin.display(boolean=True, description="service-account key")
    def has_key(self, target):
        return target.has_search_console_credentials

    @admin.display(description="id")
    def importfile_usage(self, target):
        if target.pk is None:
            return "given when saved"
        return f"{target.pk} — import a file into it with: manage.py importfile FILE --target {target.pk}"

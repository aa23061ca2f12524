"""Admin of deployment identity grants: superusers only.

A grant lets one org's service mailboxes read, with the settings' service account key or app-only app, the
addresses and domains it lists (``oauth.deployment_grants``). Org staff never see this page, its list or its rows
(``SuperuserOnlyAdmin``: a 403 and no entry in the index); what they see is the mailbox form's refusal.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.utils.safestring import mark_safe

from seoinsight.orgscope import SuperuserOnlyAdmin

from ..oauth import deployment_grants as grants
from .forms import TENANT_ALIASES
from ..models import DeploymentGrant, DeploymentIdentity


class AllowedField(forms.CharField):
    """The JSON list of addresses and domains, edited one per line (or comma-separated)."""

    widget = forms.Textarea(attrs={"rows": 4, "cols": 60, "spellcheck": "false"})

    def prepare_value(self, value):
        return "\n".join(value) if isinstance(value, (list, tuple)) else value

    def to_python(self, value):
        text = super().to_python(value)
        try:
            return grants.parse_allowed(text)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def validate(self, value):
        if not value:
            raise forms.ValidationError("List at least one address or domain: a grant that allows nothing is no "
                                        "grant (delete it instead).")


class DeploymentGrantForm(forms.ModelForm):
    allowed = AllowedField(
        label="Allowed addresses and domains",
        help_text=mark_safe(
            "One per line: <code>client.example</code> (every mailbox of that domain, not its subdomains) or "
            "<code>intake@client.example</code> (that mailbox only). Google: the users the service account may "
            "impersonate for this org. Microsoft: the mailboxes of the tenant below the app may read for this org."),
    )

    class Meta:
        model = DeploymentGrant
        fields = ["org", "identity", "tenant", "allowed", "note"]
        help_texts = {
            "identity": "Which of the settings' identities the org's keyless service mailboxes may use.",
            "tenant": "Microsoft only: the tenant id or domain (contoso.onmicrosoft.com) the mailboxes' tenant must "
                      "be. Empty for Google.",
        }

    def clean_tenant(self):
        return self.cleaned_data["tenant"].strip().lower()

    def clean(self):
        data = super().clean()
        identity, tenant = data.get("identity"), data.get("tenant", "")
        if identity == DeploymentIdentity.GOOGLE_SERVICE_ACCOUNT and tenant:
            self.add_error("tenant", "A tenant is Microsoft's only: clear it.")
        elif identity == DeploymentIdentity.MICROSOFT_APP and tenant in TENANT_ALIASES:
            self.add_error("tenant", f"A Microsoft grant needs the tenant's own id or domain, not "
                           f"“{tenant or 'none'}”.")
        return data


@admin.register(DeploymentGrant)
class DeploymentGrantAdmin(SuperuserOnlyAdmin, admin.ModelAdmin):
    form = DeploymentGrantForm
    list_display = ["org", "identity", "tenant", "allowed_shown", "note", "updated_at"]
    list_filter = ["identity", "org"]
    search_fields = ["org__id", "org__name", "tenant", "note"]
    ordering = ["org", "identity", "tenant"]

    @admin.display(description="allowed")
    def allowed_shown(self, grant):
        return ", ".join(grant.allowed)

"""The mailbox form: write-only secrets, folders as text, an explicit first-poll policy, auth per provider."""

from __future__ import annotations

import json
from datetime import timedelta

from django import forms
from django.utils.safestring import mark_safe

from seoinsight.models import SiteTarget

from .. import conf, post_actions
from ..providers import destination
from ..oauth import deployment_grants as grants
from ..models import (APP_FIELDS, DESTINATION_FIELDS, LOOPBACK_HOSTS, PROVIDER_AUTHS, Auth, DeploymentIdentity,
                      InitialMode, Mailbox, OAuthProvider, Provider, Security)

MIN_POLL_INTERVAL = 30  # seconds; below that we would only hammer the server
# The IMAP servers an issuer's XOAUTH2 tokens are for (a loopback server too, for tests and tunnels).
OAUTH_IMAP_HOSTS = {OAuthProvider.GOOGLE: ("imap.gmail.com",),
                    OAuthProvider.MICROSOFT: ("outlook.office365.com", "outlook.office.com")}
# Microsoft's tenant aliases that name no tenant: app-only access needs the real one.
TENANT_ALIASES = ("", "common", "organizations", "consumers")
# The setting that makes each deployment identity exist: without it a keyless service mailbox fails as not configured.
DEPLOYMENT_SETTINGS = {DeploymentIdentity.GOOGLE_SERVICE_ACCOUNT: "MAILPOLL_GOOGLE_SERVICE_ACCOUNT_FILE",
                       DeploymentIdentity.MICROSOFT_APP: "MAILPOLL_MICROSOFT_CLIENT_ID"}


class WriteOnlyTextarea(forms.Textarea):
    """A textarea that never renders a value back, not even the one just typed into a refused form."""

    def format_value(self, value):
        return None

# Help texts are HTML only when marked so (templates/admin/includes/fieldset.html escapes the others).
INITIAL_MODE_HELP = mark_safe(
    "What the first poll of each folder (also a folder added later) does; later polls continue from the "
    "folder's cursor. <b>New mail only</b>: fetch nothing now, take only mail that arrives from now on — "
    "the usual choice for a mailbox that already holds years of mail. <b>Since a date</b>: also fetch "
    "what arrived on or after the date below — to close a known gap. <b>Everything</b>: fetch the whole "
    "folder — for a mailbox dedicated to this intake."
)


class FolderListField(forms.CharField):
    """The JSON list of folder names, edited as ``INBOX, Invoices``."""

    def prepare_value(self, value):
        return ", ".join(value) if isinstance(value, (list, tuple)) else value

    def to_python(self, value):
        text = super().to_python(value)
        return [name.strip() for name in text.split(",")] if text else []

    def validate(self, value):
        super().validate(value)
        if any(not name for name in value):
            raise forms.ValidationError("A folder name cannot be empty: remove the extra comma.")
        repeated = sorted({name for name in value if value.count(name) > 1})
        if repeated:
            raise forms.ValidationError(f"Listed twice: {', '.join(repeated)}.")


class SecondsField(forms.IntegerField):
    """A DurationField edited as whole seconds."""

    def prepare_value(self, value):
        return int(value.total_seconds()) if isinstance(value, timedelta) else value

    def to_python(self, value):
        seconds = super().to_python(value)
        return None if seconds is None else timedelta(seconds=seconds)

    def validate(self, value):
        super().validate(value)
        if value is not None and value < timedelta(seconds=MIN_POLL_INTERVAL):
            raise forms.ValidationError(f"At least {MIN_POLL_INTERVAL} seconds: more often would only hammer the "
                                        "server.")


class SiteTargetChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, target):
        return f"{target.site.domain}: {target} [{target.site.org_id}]"


class MailboxForm(forms.ModelForm):
    """The secret is write-only: never rendered back, replaced only when a new one is typed."""

    password = forms.CharField(
        required=False, strip=False, label="Password",
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Password (or app password) of the IMAP account. Stored encrypted and never shown again; "
        "leave empty to keep the stored one. Changing the server, port, security or username needs it again.",
    )
    remove_secret = forms.BooleanField(required=False, label="Remove the stored secret")
    new_app_secret = forms.CharField(
        required=False, strip=True, label="App secret",
        widget=WriteOnlyTextarea(attrs={"rows": 3, "cols": 60, "autocomplete": "off", "spellcheck": "false"}),
        help_text="With the mailbox's own client id: its client secret. For a Gmail service account: the "
        "service account's JSON key (paste the whole file). Stored encrypted and never shown again; leave empty "
        "to keep the stored one. Changing the provider, auth, OAuth provider, client id or tenant needs it again.",
    )
    remove_app_secret = forms.BooleanField(required=False, label="Remove the stored app secret")
    folders = FolderListField(
        help_text=mark_safe("Comma-separated, e.g. <code>INBOX, Invoices</code>. Names as the server shows them "
                            "(sub-folders often as <code>INBOX/Reports</code> or <code>INBOX.Reports</code>)."),
        widget=forms.TextInput(attrs={"size": 60}),
    )
    poll_interval = SecondsField(
        label="Poll interval (seconds)", initial=120, widget=forms.NumberInput(attrs={"min": MIN_POLL_INTERVAL}),
        help_text=f"How often this mailbox is due: at least {MIN_POLL_INTERVAL} seconds (default 120). A pollmail "
        "cycle runs every MAILPOLL_INTERVAL seconds, so a shorter interval than that has no effect.",
    )
    # Declared without initial: the form must make the operator choose (a policy decision: docs/mail.md, "Which first poll to choose").
    initial_mode = forms.ChoiceField(choices=InitialMode.choices, widget=forms.RadioSelect,
                                     label="First poll", help_text=INITIAL_MODE_HELP)
    site_target = SiteTargetChoiceField(
        queryset=SiteTarget.objects.none(), required=False,
        help_text="Where CSV and Excel attachments are imported when no mail rule decides (domain: target "
        "[org]). Without one they wait in “Needs a site”; PDFs and bodies are still read.",
    )

    class Meta:
        model = Mailbox
        fields = ["org", "name", "enabled", "provider", "auth", "oauth_provider", "client_id", "tenant", "host",
                  "port", "security", "username", "folders", "poll_interval", "initial_mode", "initial_since",
                  "site_target", "live", "authserv_id", "require_authenticated_sender", "post_action",
                  "post_action_folder"]
        help_texts = {
            "auth": "IMAP: a password, or OAuth (Gmail or Outlook IMAP, then use Connect). Gmail API and Graph: "
                    "OAuth (a user's consent, then use Connect), or a service account (Google Workspace, "
                    "domain-wide delegation) / app-only (Microsoft, application permission Mail.Read; Mail.ReadWrite "
                    "for post-actions).",
            "oauth_provider": "IMAP with OAuth only: whose tokens the server takes (Gmail or Outlook IMAP).",
            "client_id": "Empty: the app of the MAILPOLL_GOOGLE_* / MAILPOLL_MICROSOFT_* settings (for app-only access and "
                         "a Gmail service account without a key: only for the addresses a superuser granted this org).",
            "tenant": "Microsoft only; empty: MAILPOLL_MICROSOFT_TENANT.",
            "host": "IMAP only (API mailboxes use the settings' endpoints).",
            "username": "The account's address (API mailboxes: the mailbox user to read, e.g. the one a "
                        "service account impersonates).",
            "port": "993 for TLS, 143 for STARTTLS (another port only where the deployment allows it).",
            "security": "TLS or STARTTLS (certificates are verified). None only for a server on this machine.",
            "initial_since": "Required with “Since a date”: mail received on or after this day.",
        }
        labels = {"initial_since": "Since", "oauth_provider": "OAuth provider", "client_id": "Client id"}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        targets = SiteTarget.objects.select_related("site").order_by("site__org_id", "site__domain", "url_prefix")
        if self.instance.pk:
            targets = targets.filter(site__org_id=self.instance.org_id)
        else:
            self.initial["folders"] = self.initial.get("folders") or ["INBOX"]
        self.fields["site_target"].queryset = targets
        if "auth" in self.fields:  # not on a view-only page
            self.fields["auth"].required = False  # clean_auth: required but for IMAP, where it was always a password

    def clean_auth(self):
        # A post that predates auth (scripts, an old tab) meant an IMAP password, the only auth there was.
        auth = self.cleaned_data.get("auth")
        if not auth and self.cleaned_data.get("provider") == Provider.IMAP:
            return Auth.PASSWORD
        if not auth:
            raise forms.ValidationError("Choose how the mailbox signs in.")
        return auth

    def clean_host(self):
        return self.cleaned_data["host"].strip().lower()

    def clean(self):
        data = super().clean()
        provider, auth = data.get("provider"), data.get("auth")
        if provider and auth and auth not in PROVIDER_AUTHS.get(provider, ()):
            takes = " or ".join(str(Auth(a).label) for a in PROVIDER_AUTHS[provider])
            self.add_error("auth", f"{Provider(provider).label} takes {takes}.")
        elif provider == Provider.IMAP:
            self._clean_imap(data)
        elif provider:
            # An API mailbox has no server of its own: its endpoints come from the settings.
            data.update(host="", port=Mailbox._meta.get_field("port").default, security=Security.TLS)
            data["oauth_provider"] = ""
            if data.get("live"):
                # Gmail's and Graph's push need an endpoint the internet can reach: they are polled.
                self.add_error("live", "Live (IMAP IDLE) is for IMAP mailboxes; Gmail API and Graph mailboxes are "
                                       "polled at their interval.")
        # Kept for the admin: a grant given to another app (or issuer), or whose destination moved, is dropped.
        # A consent is one account's (Connect checks it against the username) for one server: an IMAP mailbox's
        # host, port, security and account; an API mailbox's account (its endpoints come from the settings).
        self.app_changed = self.moved_app(data)
        if auth == Auth.OAUTH and self.instance.auth == Auth.OAUTH:
            destination = DESTINATION_FIELDS[1:] if provider == Provider.IMAP else ("username",)
            self.app_changed += [name.replace("_", " ") for name in destination
                                 if name in data and data[name] != getattr(self.instance, name)]
        if provider and auth:
            self._clean_app(data, provider, auth)
        self._clean_what_to_read(data)
        return data

    def _clean_imap(self, data) -> None:
        host, auth = data.get("host"), data.get("auth")
        if not host:
            self.add_error("host", "An IMAP mailbox needs its server.")
        # Before saving, in plain words; the poller and Test connection check again where they connect.
        if data.get("port") is not None and (problem := destination.port_problem(data["port"])):
            self.add_error("port", f"{problem[0].upper()}{problem[1:]}.")
        if host and (problem := destination.host_problem(host)):
            self.add_error("host", f"{problem}.")  # it opens with the host's name, as typed
        if data.get("security") == Security.NONE and host and host not in LOOPBACK_HOSTS:
            self.add_error("security", "No encryption is allowed only for a server on this machine (127.0.0.1, "
                           "localhost or ::1): the password would cross the network in clear text. "
                           "Choose TLS or STARTTLS.")
        if auth == Auth.OAUTH and not data.get("oauth_provider"):
            self.add_error("oauth_provider", "IMAP with OAuth needs whose tokens the server takes: Google (Gmail "
                           "IMAP) or Microsoft (Outlook IMAP).")
        elif auth == Auth.OAUTH and host and host not in (*OAUTH_IMAP_HOSTS[data["oauth_provider"]], *LOOPBACK_HOSTS):
            # An access token to the whole mailbox is presented only to its issuer's own IMAP server.
            self.add_error("host", f"{OAuthProvider(data['oauth_provider']).label} tokens are sent only to "
                           f"{' or '.join(OAUTH_IMAP_HOSTS[data['oauth_provider']])}.")
        if auth != Auth.PASSWORD:
            return
        data["oauth_provider"] = ""
        if not data.get("password") and (not self.instance.pk or self.instance.auth != Auth.PASSWORD):
            self.add_error("password", "A new mailbox needs the account's password." if not self.instance.pk
                           else "Password auth needs the account's password.")
        moved = self.moved_destination(data)
        if moved and not data.get("password") and not data.get("remove_secret"):
            # Else the stored password would follow the mailbox to a server of the editor's choice.
            self.add_error("password", f"The {', '.join(moved)} changed: type the password again for the new "
                           "destination (the stored one is not sent there), or remove the stored secret.")

    def _clean_app(self, data, provider: str, auth: str) -> None:
        """The OAuth app and its write-only secret: typed again when whose app it is changes."""
        secret, client_id = data.get("new_app_secret", ""), data.get("client_id", "").strip()
        data["client_id"], data["tenant"] = client_id, data.get("tenant", "").strip()
        issuer = {Provider.GMAIL: OAuthProvider.GOOGLE, Provider.GRAPH: OAuthProvider.MICROSOFT}.get(
            provider, data.get("oauth_provider", ""))
        if auth == Auth.PASSWORD:
            if secret or client_id or data["tenant"]:
                self.add_error("auth", "Password auth uses no OAuth app: clear the client id, tenant and app "
                               "secret, or choose OAuth.")
            return
        if data["tenant"] and issuer != OAuthProvider.MICROSOFT:
            self.add_error("tenant", "A tenant is Microsoft's only: clear it.")
        key = provider == Provider.GMAIL and auth == Auth.SERVICE
        if secret and key:
            self._check_service_account_key(secret)
        elif secret and not client_id:
            self.add_error("new_app_secret", "A client secret is used only with the mailbox's own client id (else the "
                           "settings' app and secret are used): type the client id, or clear the secret.")
        stored = bool(self.instance.app_secret) and not data.get("remove_app_secret")
        moved = self.moved_app(data)
        if moved and self.instance.app_secret and not secret and not data.get("remove_app_secret"):
            # Else the stored secret would be presented for an app (or to an issuer) of the editor's choice.
            self.add_error("new_app_secret", f"The {', '.join(moved)} changed: type the app secret again for the "
                           "new app (the stored one is not sent there), or remove the stored app secret.")
            return
        has_secret = bool(secret) or (stored and not moved)
        if client_id and not key and not has_secret:
            self.add_error("new_app_secret", "The mailbox's own client id needs its client secret (the settings' "
                           "secret belongs to the settings' client).")
        if key and not has_secret and not conf.get("MAILPOLL_GOOGLE_SERVICE_ACCOUNT_FILE"):
            self.add_error("new_app_secret", "A Gmail service account needs its JSON key here (or "
                           "MAILPOLL_GOOGLE_SERVICE_ACCOUNT_FILE in the settings).")
        tenant = ""
        if provider == Provider.GRAPH and auth == Auth.SERVICE:
            tenant = data["tenant"] or conf.get("MAILPOLL_MICROSOFT_TENANT")
            if tenant.lower() in TENANT_ALIASES:
                self.add_error("tenant", f"App-only access needs the organisation's tenant id or domain, not "
                               f"“{tenant or 'none'}”.")
                return
        identity = grants.identity_of(provider, auth, own_key=has_secret, own_client_id=bool(client_id))
        if identity and conf.get(DEPLOYMENT_SETTINGS[identity]):
            self._clean_grant(data, identity, tenant)

    def _clean_grant(self, data, identity: str, tenant: str) -> None:
        """A deployment identity reads only what a superuser granted the org: asked before anything is saved."""
        org_id = data["org"].pk if data.get("org") else self.instance.org_id
        username = data.get("username", "")
        if not org_id or not username:
            return  # their own errors say so
        problem = grants.problem(org_id, identity, username, tenant)
        if problem:
            self.add_error("username", f"{problem[0].upper()}{problem[1:]}.")

    def _check_service_account_key(self, text: str) -> None:
        try:
            key = json.loads(text)
        except ValueError:
            self.add_error("new_app_secret", "This is not a JSON key: paste the whole key file Google gave you.")
            return
        missing = [name for name in ("client_email", "private_key")
                   if not isinstance(key, dict) or not isinstance(key.get(name), str) or not key.get(name)]
        if missing:
            self.add_error("new_app_secret", f"This JSON is not a service account key: it lacks {', '.join(missing)}.")

    def _clean_what_to_read(self, data) -> None:
        mode, since = data.get("initial_mode"), data.get("initial_since")
        if mode == InitialMode.SINCE and since is None:
            self.add_error("initial_since", "“Since a date” needs a date.")
        elif mode and mode != InitialMode.SINCE and since is not None:
            self.add_error("initial_since", "A date is used only with “Since a date”: clear it or change the mode.")
        target = data.get("site_target")
        org_id = data["org"].pk if data.get("org") else self.instance.org_id
        if target is not None and org_id and target.site.org_id != org_id:
            self.add_error("site_target", f"This target belongs to org {target.site.org_id}, not {org_id}.")
        data["post_action_folder"] = data.get("post_action_folder", "").strip()
        field, problem = post_actions.setting_problem(data.get("post_action", ""), data["post_action_folder"],
                                                      {data.get("provider") or Provider.IMAP},
                                                      set(data.get("folders") or ()))
        if problem:
            self.add_error(field, problem)

    def moved_destination(self, data) -> list[str]:
        """The fields of where the stored password is sent that this edit changes (none on a new mailbox)."""
        if not self.instance.pk or not self.instance.secret:
            return []
        # clean() runs before the instance is updated: it still holds the stored values.
        return [name.replace("_", " ") for name in DESTINATION_FIELDS
                if name in data and data[name] != getattr(self.instance, name)]

    def moved_app(self, data) -> list[str]:
        """The fields of whose app the stored app secret and grant belong to that this edit changes."""
        if not self.instance.pk:
            return []
        return [name.replace("_", " ") for name in APP_FIELDS
                if name in data and data[name] != getattr(self.instance, name)]

    def save(self, commit=True):
        data = self.cleaned_data
        if data.get("auth") != Auth.PASSWORD:
            # Nothing would ever use it: a password is not kept where it is not sent.
            self.instance.set_secret("")
        elif data.get("password"):
            self.instance.set_secret(data["password"])
        elif data.get("remove_secret"):
            self.instance.set_secret("")
        if data.get("new_app_secret"):
            self.instance.set_app_secret(data["new_app_secret"])
        elif data.get("remove_app_secret") or data.get("auth") == Auth.PASSWORD:
            self.instance.set_app_secret("")
        return super().save(commit)

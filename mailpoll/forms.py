"""The mailbox form: write-only secret, folders as text, an explicit first-poll policy."""

from __future__ import annotations

from datetime import timedelta

from django import forms

from seoinsight.models import SiteTarget

from .models import LOOPBACK_HOSTS, InitialMode, Mailbox, Security

MIN_POLL_INTERVAL = 30  # seconds; below that we would only hammer the server
# Where the password is sent: changing any of these needs the password typed again.
DESTINATION_FIELDS = ("provider", "host", "port", "security", "username")

INITIAL_MODE_HELP = (
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
            raise forms.ValidationError(f"Poll at most every {MIN_POLL_INTERVAL} seconds.")


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
    folders = FolderListField(
        help_text="Comma-separated, e.g. <code>INBOX, Invoices</code>. Names as the server shows them "
        "(sub-folders often as <code>INBOX/Reports</code> or <code>INBOX.Reports</code>).",
        widget=forms.TextInput(attrs={"size": 60}),
    )
    poll_interval = SecondsField(
        label="Poll interval (seconds)", initial=120, widget=forms.NumberInput(attrs={"min": MIN_POLL_INTERVAL}),
        help_text="How often this mailbox is due. A pollmail cycle runs every MAILPOLL_INTERVAL seconds, so a "
        "shorter interval than that has no effect.",
    )
    # Declared without initial: the form must make the operator choose (seed 002: a policy decision).
    initial_mode = forms.ChoiceField(choices=InitialMode.choices, widget=forms.RadioSelect,
                                     label="First poll", help_text=INITIAL_MODE_HELP)
    site_target = SiteTargetChoiceField(
        queryset=SiteTarget.objects.none(), required=False,
        help_text="Where CSV and Excel attachments are imported (domain: target [org]). Without one they fail "
        "with a clear error; PDFs and bodies are still read.",
    )

    class Meta:
        model = Mailbox
        fields = ["org", "name", "enabled", "provider", "host", "port", "security", "username", "folders",
                  "poll_interval", "initial_mode", "initial_since", "site_target"]
        help_texts = {
            "port": "993 for TLS, 143 for STARTTLS.",
            "security": "TLS or STARTTLS (certificates are verified). None only for a server on this machine.",
            "initial_since": "Required with “Since a date”: mail received on or after this day.",
        }
        labels = {"initial_since": "Since"}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        targets = SiteTarget.objects.select_related("site").order_by("site__org_id", "site__domain", "url_prefix")
        if self.instance.pk:
            targets = targets.filter(site__org_id=self.instance.org_id)
        else:
            self.initial["folders"] = self.initial.get("folders") or ["INBOX"]
        self.fields["site_target"].queryset = targets

    def clean_host(self):
        return self.cleaned_data["host"].strip().lower()

    def clean_password(self):
        password = self.cleaned_data["password"]
        if not password and not self.instance.pk:
            raise forms.ValidationError("A new mailbox needs the account's password.")
        return password

    def clean(self):
        data = super().clean()
        moved = self.moved_destination(data)
        if moved and not data.get("password") and not data.get("remove_secret"):
            # Else the stored password would follow the mailbox to a server of the editor's choice.
            self.add_error("password", f"The {', '.join(moved)} changed: type the password again for the new "
                           "destination (the stored one is not sent there), or remove the stored secret.")
        host = data.get("host")
        if data.get("security") == Security.NONE and host and host not in LOOPBACK_HOSTS:
            self.add_error("security", "No encryption is allowed only for a server on this machine (127.0.0.1, "
                           "localhost or ::1): the password would cross the network in clear text. "
                           "Choose TLS or STARTTLS.")
        mode, since = data.get("initial_mode"), data.get("initial_since")
        if mode == InitialMode.SINCE and since is None:
            self.add_error("initial_since", "“Since a date” needs a date.")
        elif mode and mode != InitialMode.SINCE and since is not None:
            self.add_error("initial_since", "A date is used only with “Since a date”: clear it or change the mode.")
        target = data.get("site_target")
        org_id = data["org"].pk if data.get("org") else self.instance.org_id
        if target is not None and org_id and target.site.org_id != org_id:
            self.add_error("site_target", f"This target belongs to org {target.site.org_id}, not {org_id}.")
        return data

    def moved_destination(self, data) -> list[str]:
        """The fields of where the stored password is sent that this edit changes (none on a new mailbox)."""
        if not self.instance.pk or not self.instance.secret:
            return []
        # clean() runs before the instance is updated: it still holds the stored values.
        return [name.replace("_", " ") for name in DESTINATION_FIELDS
                if name in data and data[name] != getattr(self.instance, name)]

    def save(self, commit=True):
        if self.cleaned_data.get("password"):
            self.instance.set_secret(self.cleaned_data["password"])
        elif self.cleaned_data.get("remove_secret"):
            self.instance.set_secret("")
        return super().save(commit)

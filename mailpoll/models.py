"""Mailboxes polled for documents, their sync cursors, and what arrived.

A ``Request`` is one message, accepted or rejected — never silently dropped —
unique per (org, source, source_ref): the UNIQUE constraint, not a prior
SELECT, is what makes N pollers create exactly one row per message.
"""

from __future__ import annotations

import functools
import operator
from datetime import timedelta

from django.db import models
from django.db.models import Q, Value
from django.db.models.functions import Now

from imports.models import Import
from seoinsight import crypto
from seoinsight.models import Org, SiteTarget

from .cursor import CursorState

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
# The Mailbox fields a stored secret is bound to, read by the admin's form and by oauth's Connect.
# Where the password is sent: changing any of these needs the password typed again.
DESTINATION_FIELDS = ("provider", "host", "port", "security", "username")
# Whose app the app secret (and the grant) belong to: changing any of these needs the app secret typed again.
APP_FIELDS = ("provider", "auth", "oauth_provider", "client_id", "tenant")


class Provider(models.TextChoices):
    IMAP = "imap", "IMAP"
    GMAIL = "gmail", "Gmail API"
    GRAPH = "graph", "Microsoft Graph"


class Auth(models.TextChoices):
    # IMAP LOGIN with the encrypted ``secret``.
    PASSWORD = "password", "Password"
    # A user's consent (authorization code with PKCE), refreshed through the mailbox's OAuthGrant: XOAUTH2 for
    # IMAP, a bearer token for the APIs.
    OAUTH = "oauth", "OAuth (user consent)"
    # The organisation's own credentials, no user in the loop: a Google Workspace service account with
    # domain-wide delegation, or a Microsoft app's client credentials (application permission Mail.Read).
    SERVICE = "service", "Service account / app-only"


# Which auth each provider takes: IMAP has no service accounts, the APIs have no passwords.
PROVIDER_AUTHS = {
    Provider.IMAP: (Auth.PASSWORD, Auth.OAUTH),
    Provider.GMAIL: (Auth.OAUTH, Auth.SERVICE),
    Provider.GRAPH: (Auth.OAUTH, Auth.SERVICE),
}


def _provider_auth_pairs() -> Q:
    pairs = [Q(provider=provider, auth__in=list(auths)) for provider, auths in PROVIDER_AUTHS.items()]
    return functools.reduce(operator.or_, pairs)


class Security(models.TextChoices):
    TLS = "tls", "TLS (port 993)"
    STARTTLS = "starttls", "STARTTLS (port 143)"
    NONE = "none", "None (127.0.0.1 only)"


class OAuthProvider(models.TextChoices):
    GOOGLE = "google", "Google"
    MICROSOFT = "microsoft", "Microsoft"


class InitialMode(models.TextChoices):
    # First poll records the high-water mark and fetches nothing: the corpus starts now.
    NEW_ONLY = "new-only", "New mail only"
    # First poll fetches messages since initial_since (closes a known gap).
    SINCE = "since", "Since a date"
    # First poll fetches the whole folder.
    FULL = "full", "Everything"


class PostActionKind(models.TextChoices):
    """What the source mailbox's server is asked to do to a message once its documents are stored."""

    MARK_READ = "mark_read", "Mark as read"
    MOVE = "move", "Move to a folder"
    LABEL = "label", "Add a label (Gmail)"


# The post-actions that name a folder or a label.
POST_ACTIONS_WITH_DESTINATION = (PostActionKind.MOVE, PostActionKind.LABEL)
# A rule's post-action: the mailbox's, none for its messages, or its own.
RULE_AS_MAILBOX, RULE_LEAVE = "", "leave"
RULE_POST_ACTIONS = [(RULE_AS_MAILBOX, "As the mailbox says"), (RULE_LEAVE, "Leave the message as it is"),
                     *PostActionKind.choices]


def _post_action_checks(prefix: str, allowed: list[str]) -> list[models.CheckConstraint]:
    """A post-action is a known one, and names a folder or label exactly when it needs one."""
    needs = Q(post_action__in=POST_ACTIONS_WITH_DESTINATION)
    return [
        models.CheckConstraint(condition=Q(post_action__in=allowed), name=f"{prefix}_post_action_valid",
                               violation_error_message="Choose what to do to the message after storing it."),
        models.CheckConstraint(
            condition=(needs & ~Q(post_action_folder="")) | (~needs & Q(post_action_folder="")),
            name=f"{prefix}_post_action_destination",
            violation_error_message="Moving or labelling needs a folder or label name; other post-actions, none."),
    ]


class Mailbox(models.Model):
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="mailboxes")
    name = models.CharField(max_length=100)
    provider = models.CharField(max_length=10, choices=Provider.choices, default=Provider.IMAP)
    auth = models.CharField(max_length=10, choices=Auth.choices, default=Auth.PASSWORD)
    # Whose OAuth an IMAP mailbox uses (Gmail or Outlook IMAP); an API mailbox's is its provider's.
    oauth_provider = models.CharField(max_length=10, choices=OAuthProvider.choices, blank=True)
    # The OAuth app (client) and, for Microsoft, the tenant; empty: the MAILPOLL_GOOGLE_* / MAILPOLL_MICROSOFT_*
    # settings. ``app_secret`` is the client secret, or a Google service account's JSON key: encrypted, write-only.
    client_id = models.CharField(max_length=200, blank=True)
    tenant = models.CharField(max_length=100, blank=True, help_text="Microsoft tenant id or domain.")
    app_secret = models.TextField(blank=True, editable=False, help_text="Encrypted client secret or key.")
    host = models.CharField(max_length=253, blank=True)
    port = models.PositiveIntegerField(default=993)
    security = models.CharField(max_length=10, choices=Security.choices, default=Security.TLS)
    username = models.CharField(max_length=254)
    secret = models.TextField(blank=True, editable=False, help_text="Encrypted password or token.")
    folders = models.JSONField(default=list, help_text='Folders to poll, e.g. ["INBOX"].')
    poll_interval = models.DurationField(default=timedelta(seconds=120))
    # No default on purpose: the first poll is a policy decision (docs/mail.md, "Which first poll to choose").
    initial_mode = models.CharField(max_length=10, choices=InitialMode.choices)
    initial_since = models.DateField(null=True, blank=True)
    site_target = models.ForeignKey(
        SiteTarget, null=True, blank=True, on_delete=models.SET_NULL, related_name="mailboxes",
        help_text="Where CSV and Excel attachments are imported.",
    )
    # Sender authentication (mailpoll.message.sender_auth): only Authentication-Results headers written by the
    # receiving server named here count; anyone can write one naming another.
    authserv_id = models.CharField(
        max_length=253, blank=True, db_default="", verbose_name="authserv-id",
        help_text="The authserv-id your receiving server writes in Authentication-Results, e.g. mx.google.com.")
    require_authenticated_sender = models.BooleanField(
        default=False, db_default=False,
        help_text="Documents from senders it does not authenticate wait for triage; rules may say otherwise.")
    # After a message's documents are stored (mailpoll.post_actions); a rule may say otherwise for its messages.
    post_action = models.CharField(
        max_length=10, choices=[("", "Leave the message as it is"), *PostActionKind.choices], blank=True, default="",
        db_default="", verbose_name="after storing")
    post_action_folder = models.CharField(
        max_length=255, blank=True, default="", db_default="", verbose_name="to folder or label",
        help_text="Where to move the message, or the Gmail label to add.")
    enabled = models.BooleanField(default=True)
    # Its first folder is also watched with IMAP IDLE by one pollmail across replicas (mailpoll.live); IMAP only.
    live = models.BooleanField(default=False, db_default=False, help_text="Watch the first folder with IMAP IDLE (IMAP only).")
    last_polled_at = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)
    consecutive_failures = models.IntegerField(default=0)
    # Set after a failed poll: not due again before this (exponential backoff, sql.RECORD_POLL_FAILURE).
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "mailboxes"
        constraints = [
            models.UniqueConstraint(fields=["org", "name"], name="mailbox_org_name_unique",
                                    violation_error_message="This org already has a mailbox of that name."),
            models.CheckConstraint(
                condition=~Q(initial_mode="since") | Q(initial_since__isnull=False),
                name="mailbox_since_has_date",
                violation_error_message="“Since a date” needs the date.",
            ),
            # Plain-text credentials never cross a network. (An API mailbox has no IMAP security of its own: its
            # endpoints are https, or http on the loopback only, by check mailpoll.E003.)
            models.CheckConstraint(
                condition=~Q(security="none") | Q(host__in=LOOPBACK_HOSTS) | ~Q(provider="imap"),
                name="mailbox_plaintext_loopback_only",
                violation_error_message="No encryption is allowed only for a server on this machine: choose TLS or STARTTLS.",
            ),
            # Zero or less would make a mailbox due on every cycle, and its backoff zero.
            models.CheckConstraint(condition=Q(poll_interval__gt=timedelta(0)), name="mailbox_poll_interval_positive",
                                   violation_error_message="The poll interval must be more than zero."),
            # An unknown value must not quietly mean "no encryption" to a provider.
            models.CheckConstraint(condition=Q(security__in=Security.values), name="mailbox_security_valid",
                                   violation_error_message="Choose TLS, STARTTLS or none."),
            models.CheckConstraint(
                condition=_provider_auth_pairs(),
                name="mailbox_auth_fits_provider",
                violation_error_message="This provider does not sign in that way: IMAP takes a password or OAuth, the Gmail API and Graph OAuth or a service account."),
            # An IMAP server has to be somewhere; an API mailbox's endpoint comes from the settings.
            models.CheckConstraint(condition=~Q(provider="imap") | ~Q(host=""), name="mailbox_imap_has_host",
                                   violation_error_message="An IMAP mailbox needs its server."),
            # IMAP with OAuth must say whose tokens it presents (an API mailbox's issuer is its provider's).
            models.CheckConstraint(condition=~Q(provider="imap", auth="oauth") | ~Q(oauth_provider=""),
                                   name="mailbox_imap_oauth_has_issuer",
                                   violation_error_message="IMAP with OAuth needs whose tokens the server takes: Google or Microsoft."),
            *_post_action_checks("mailbox", ["", *PostActionKind.values]),
        ]

    def __str__(self):
        where = self.host if self.provider == Provider.IMAP else self.get_provider_display()
        return f"{self.name} ({self.username}@{where})"

    @property
    def issuer(self) -> str:
        """Whose OAuth tokens this mailbox uses: ``google``, ``microsoft``, or "" (none: a password)."""
        if self.auth == Auth.PASSWORD:
            return ""
        return {Provider.GMAIL: OAuthProvider.GOOGLE, Provider.GRAPH: OAuthProvider.MICROSOFT}.get(
            self.provider, self.oauth_provider)

    def set_app_secret(self, plaintext: str) -> None:
        self.app_secret = crypto.encrypt(plaintext) if plaintext else ""

    def get_app_secret(self) -> str:
        return crypto.decrypt(self.app_secret) if self.app_secret else ""

    def set_secret(self, plaintext: str) -> None:
        self.secret = crypto.encrypt(plaintext) if plaintext else ""

    def get_secret(self) -> str:
        return crypto.decrypt(self.secret) if self.secret else ""

    @property
    def folder_list(self) -> list[str]:
        return folder_list(self.folders)


def folder_list(folders) -> list[str]:
    """The folders a ``folders`` value names (JSON, so anything): its non-empty strings, else INBOX."""
    return [f for f in (folders or []) if isinstance(f, str) and f] or ["INBOX"]


crypto.register_column("mailpoll.Mailbox", "secret")
crypto.register_column("mailpoll.Mailbox", "app_secret")


class LiveWatch(models.Model):
    """Who watches a live mailbox right now: written by the pollmail holding its advisory lock (mailpoll.live).

    Display only: the lock decides, this row reports. A holder killed -9 leaves its row until the next
    holder overwrites it, or a supervisor removes it once the mailbox is no longer live.
    """

    mailbox = models.OneToOneField(Mailbox, on_delete=models.CASCADE, related_name="live_watch")
    host = models.CharField(max_length=255)
    pid = models.IntegerField()
    since = models.DateTimeField()
    last_event_at = models.DateTimeField(null=True, blank=True)
    last_event = models.CharField(max_length=200, blank=True)

    def __str__(self):
        return f"mailbox {self.mailbox_id} watched by {self.host}/{self.pid}"


class FolderCursor(models.Model):
    """How far a folder has been durably read, and what is wrong with it.

    A row without ``uidvalidity`` has no position yet (the folder failed before it
    was ever read): its next poll is a first poll. ``sweep_until`` is set while a
    first sweep or a UIDVALIDITY re-sweep is unfinished (``mailpoll.cursor``).
    """

    mailbox = models.ForeignKey(Mailbox, on_delete=models.CASCADE, related_name="cursors")
    folder = models.CharField(max_length=255)
    uidvalidity = models.BigIntegerField(null=True, blank=True)
    last_uid = models.BigIntegerField(default=0)
    sweep_until = models.BigIntegerField(
        null=True, blank=True,
        help_text="An unfinished sweep of the folder: its last UID when the sweep began. Empty once done.")
    sweep_since = models.DateField(null=True, blank=True, help_text="The date of an unfinished 'since' sweep.")
    # An API folder's cursor instead (Gmail history id or sweep cursor, Graph deltaLink), opaque here; empty
    # while it has none. It only ever moves over messages that are stored (mailpoll.sync.changes_sync).
    position = models.TextField(blank=True, db_default="")
    # A resync: the provider forgot the cursor, so the folder is read again in full, dedup absorbing what was
    # stored before. ``resync_started_at`` is set while one is unfinished; the count, the reason and when the
    # latest began stay.
    resyncs = models.IntegerField(db_default=0)
    resync_started_at = models.DateTimeField(null=True, blank=True)
    last_resync_at = models.DateTimeField(null=True, blank=True, help_text="When the latest resync started.")
    resync_reason = models.TextField(blank=True, db_default="")
    last_sync_ts = models.DateTimeField(null=True, blank=True)
    # The folder's problem at its last poll (it could not be read, or one message in it could not be stored,
    # named by UID); empty after a poll that read it through.
    last_error = models.TextField(blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["mailbox", "folder"], name="cursor_mailbox_folder_unique",
                                    violation_error_message="This mailbox has a cursor for that folder already."),
            models.CheckConstraint(condition=Q(uidvalidity__isnull=False) | Q(last_uid=0, sweep_until__isnull=True),
                                   name="cursor_position_needs_uidvalidity",
                                   violation_error_message="A UID position needs the UIDVALIDITY it belongs to."),
            models.CheckConstraint(condition=Q(sweep_since__isnull=True) | Q(sweep_until__isnull=False),
                                   name="cursor_sweep_since_only_in_a_sweep",
                                   violation_error_message="A sweep date belongs to an unfinished sweep only."),
            # One folder has one kind of cursor: IMAP's UIDs or an API's opaque position.
            models.CheckConstraint(condition=Q(position="") | Q(uidvalidity__isnull=True),
                                   name="cursor_one_kind_of_position",
                                   violation_error_message="A folder has a UID position or an API position, not both."),
        ]

    def __str__(self):
        if self.position:
            return f"{self.folder}: {'resyncing, ' if self.resync_started_at else ''}cursor {self.position[:40]}"
        if self.uidvalidity is None:
            return f"{self.folder}: never read"
        return f"{self.folder}: uidvalidity {self.uidvalidity}, last uid {self.last_uid}"

    def state(self) -> CursorState | None:
        """The stored position, for ``mailpoll.cursor``; None when there is none yet."""
        if self.uidvalidity is None:
            return None
        return CursorState(self.uidvalidity, self.last_uid, self.sweep_until, self.sweep_since)


class RuleAction(models.TextChoices):
    ROUTE = "route", "Route to a site target"
    IGNORE = "ignore", "Ignore (recorded, not imported)"
    TRIAGE = "triage", "Hold for triage"


class SenderAuth(models.TextChoices):
    AS_MAILBOX = "", "As the mailbox says"
    REQUIRED = "required", "Required"
    NOT_REQUIRED = "not_required", "Not required"


class RuleKind(models.TextChoices):
    CSV = "csv", "CSV"
    EXCEL = "excel", "Excel"
    PDF = "pdf", "PDF"
    BODY = "body", "Message body"


class MailRule(models.Model):
    """Where an org's mailed documents go: conditions (all optional, ANDed) and one action.

    Enabled rules are tried by ``position``, then id; the first that matches decides
    (``mailpoll.routing.decide``). The decision is copied onto each document with the rule's
    name, so its history survives the rule's edits and deletion.
    """

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="mail_rules")
    name = models.CharField(max_length=100)
    position = models.PositiveIntegerField(default=100, help_text="Lower runs first.")
    enabled = models.BooleanField(default=True)
    mailboxes = models.ManyToManyField(Mailbox, blank=True, related_name="rules",
                                       help_text="Only mail from these mailboxes; none: any of the org's.")
    folder = models.CharField(max_length=255, blank=True, help_text="Only mail from this folder, e.g. INBOX.")
    sender = models.CharField(max_length=320, blank=True,
                              help_text="An address or a domain, * and ? allowed: *@client.example, *.client.example")
    recipient = models.CharField(max_length=320, blank=True,
                                 help_text="A To, Cc or Delivered-To address, * and ? allowed.")
    plus_tag = models.CharField(max_length=64, blank=True,
                                help_text="A recipient's plus-address tag: reports+acme@… has the tag acme.")
    subject_contains = models.CharField(max_length=200, blank=True, help_text="Case-insensitive.")
    subject_regex = models.CharField(
        max_length=500, blank=True, verbose_name="subject pattern",
        help_text="A regular expression (RE2, case-insensitive; no backreferences or lookaround).")
    filename = models.CharField(max_length=255, blank=True, help_text="The attachment's name, * and ? allowed.")
    kinds = models.JSONField(default=list, blank=True, help_text="Only these kinds of document; none: any.")
    action = models.CharField(max_length=10, choices=RuleAction.choices, default=RuleAction.ROUTE)
    # RESTRICT: a target that rules still route to is not deleted from under them (its site or org may be).
    site_target = models.ForeignKey(SiteTarget, null=True, blank=True, on_delete=models.RESTRICT,
                                    related_name="mail_rules")
    sender_auth = models.CharField(max_length=12, choices=SenderAuth.choices, blank=True, default="",
                                   verbose_name="authenticated sender")
    post_action = models.CharField(max_length=10, choices=RULE_POST_ACTIONS, blank=True, default="", db_default="",
                                   verbose_name="after storing")
    post_action_folder = models.CharField(max_length=255, blank=True, default="", db_default="",
                                          verbose_name="to folder or label")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["org", "position", "id"]
        indexes = [models.Index(fields=["org", "position", "id"], name="mailrule_org_order")]
        constraints = [
            models.CheckConstraint(condition=Q(action__in=RuleAction.values), name="mailrule_action_valid",
                                   violation_error_message="Choose route, ignore or hold for triage."),
            models.CheckConstraint(condition=Q(sender_auth__in=SenderAuth.values), name="mailrule_sender_auth_valid",
                                   violation_error_message="Choose how the sender must be authenticated."),
            # A route names where; ignoring or holding names nowhere, so an edit cannot leave a stale target.
            models.CheckConstraint(
                condition=Q(action="route", site_target__isnull=False) | (~Q(action="route") & Q(site_target__isnull=True)),
                name="mailrule_target_iff_route",
                violation_error_message="A rule that routes needs a site target; one that does not, none."),
            *_post_action_checks("mailrule", [value for value, _ in RULE_POST_ACTIONS]),
        ]

    def __str__(self):
        return self.name


class RequestStatus(models.TextChoices):
    # Set once, at insert (mailpoll.sync.store), and never changed: the message is stored with its attachments.
    ACCEPTED = "accepted", "Accepted"
    # Set once, at insert (mailpoll.store): too big or unparseable, reject_reason says why. Still a row: nothing
    # is silent.
    REJECTED = "rejected", "Rejected"


class Request(models.Model):
    # No index of its own: UNIQUE (org, source, source_ref) starts with org and serves lookups by org.
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="requests", db_index=False)
    source = models.CharField(max_length=20, default="email")
    source_ref = models.CharField(max_length=300, help_text="Message-ID, or sha256:<hex> of the raw message.")
    mailbox = models.ForeignKey(Mailbox, null=True, blank=True, on_delete=models.SET_NULL, related_name="requests")
    folder = models.CharField(max_length=255, blank=True)
    uid = models.BigIntegerField(null=True, blank=True)
    # The message's id at an API provider (Gmail's message id, Graph's); IMAP messages have their uid instead.
    provider_ref = models.CharField(max_length=255, blank=True, db_default="")
    sender = models.CharField(max_length=500, blank=True)
    subject = models.CharField(max_length=1000, blank=True)
    received_at = models.DateTimeField(null=True, blank=True)
    body_text = models.TextField(blank=True)
    size = models.BigIntegerField(default=0)
    # What the rules read besides sender and subject (mailpoll.routing), kept so a rule's preview reads it too.
    recipients = models.JSONField(default=list, blank=True, db_default=Value([], output_field=models.JSONField()))
    # The raw Authentication-Results headers, topmost first: judged per mailbox authserv-id when read.
    auth_results = models.JSONField(default=list, blank=True, db_default=Value([], output_field=models.JSONField()))
    status = models.CharField(max_length=10, choices=RequestStatus.choices, default=RequestStatus.ACCEPTED)
    reject_reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["org", "source", "source_ref"], name="request_org_source_ref_unique"),
            models.CheckConstraint(condition=Q(status__in=RequestStatus.values), name="request_status_valid"),
            # A rejection is visible with its reason, never a bare "rejected".
            models.CheckConstraint(condition=~Q(status="rejected") | ~Q(reject_reason=""),
                                   name="request_rejected_has_reason"),
        ]

    def __str__(self):
        return self.subject or self.source_ref


class AttachmentKind(models.TextChoices):
    # A file of the message, stored under its hash (or skipped as metadata only).
    FILE = "file", "Attached file"
    # The message's own text as a document: its content is the Request's body_text, no file.
    BODY = "body", "Message body"


class AttachmentStatus(models.TextChoices):
    # Every move is in mailpoll.attachments.
    # In: stored (mailpoll.store), released by the watchdog or an operator, a failure requeued or retried, a
    # run that found the disk full (error says it waits for disk space; its job is retried with backoff).
    # Out: its process_attachment job starts a run (-> processing), or fails before it could (-> failed).
    PENDING = "pending", "Pending"
    # In: a job's run starts, at processing_started_at, or a newer attempt of that job takes it over from a run
    # that died (run_job_id, run_attempt). Out: the run ends (-> held | done | failed | pending to wait for disk
    # space), or the watchdog / an operator finds it stuck (-> pending, or failed once out of attempts).
    PROCESSING = "processing", "Processing"
    # In: a run's result is recorded while the downstream outbox is on, with its outbox entry in the same
    # transaction. Out: the downstream acknowledged it (-> done; a CSV/Excel becomes its Import only then), or
    # what should follow the acknowledgement cannot be done (-> failed).
    HELD = "held", "Held for downstream"
    # In: a run's result is recorded (outbox off), or the downstream acknowledged a held document. Out: never.
    DONE = "done", "Done"
    # In: its job failed, or it was stuck too often; error says why. Out: requeued or retried (-> pending).
    FAILED = "failed", "Failed"
    # In: stored as metadata only, not a document we process, or ignored by a mail rule (mailpoll.store);
    # skip_reason says why. Out: never.
    SKIPPED = "skipped", "Skipped"
    # In: stored while no rule routes it, its sender is not authenticated as required, or its mailbox has no
    # site target (mailpoll.store); route_reason says why. Waits for a person, so the watchdog leaves it alone.
    # Out: an operator routes it (-> pending with its job, once) or ignores it (-> skipped).
    NEEDS_ROUTE = "needs_route", "Needs a site"


class AttachmentQuerySet(models.QuerySet):
    def stuck(self, after_seconds: float):
        """Processing for longer than ``after_seconds``: its worker probably died (the watchdog's rule)."""
        return self.filter(
            status=AttachmentStatus.PROCESSING,
            processing_started_at__lt=Now() - timedelta(seconds=after_seconds),
        )


class Attachment(models.Model):
    request = models.ForeignKey(Request, on_delete=models.CASCADE, related_name="attachments")
    kind = models.CharField(max_length=10, choices=AttachmentKind.choices, default=AttachmentKind.FILE)
    document_type = models.CharField(max_length=10, blank=True, help_text="pdf, xlsx, xls, csv or body.")
    filename = models.CharField(max_length=255, help_text="Safe name, for display.")
    original_filename = models.CharField(max_length=500, blank=True)
    mime = models.CharField(max_length=255, blank=True)
    size = models.BigIntegerField(default=0)
    sha256 = models.CharField(max_length=64, blank=True)
    # Stored under its content hash, never under the sender's name.
    file = models.FileField(max_length=300, blank=True)
    status = models.CharField(max_length=12, choices=AttachmentStatus.choices, default=AttachmentStatus.PENDING)
    skip_reason = models.CharField(max_length=300, blank=True)
    context_text = models.TextField(blank=True)
    processing_started_at = models.DateTimeField(null=True, blank=True)
    # Runs charged to the document: each start counts one, a run that ended waiting for disk space gives it back.
    attempts = models.IntegerField(default=0)
    # The run that holds it (set by each start): its job and that job's attempt, the queue's fence. A newer
    # attempt of the same job takes its own processing row over at once; no other job can (mailpoll.attachments).
    run_job_id = models.UUIDField(null=True, blank=True)
    run_attempt = models.IntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    extracted_text = models.TextField(blank=True)
    source_import = models.ForeignKey(Import, null=True, blank=True, on_delete=models.SET_NULL,
                                      related_name="attachments", db_column="import_id")
    # The routing decision (mailpoll.routing), made at intake or by an operator: where a CSV / Excel is
    # imported, which rule said so (its name copied: the rule may change or go), and why.
    site_target = models.ForeignKey(SiteTarget, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="mail_attachments")
    rule = models.ForeignKey(MailRule, null=True, blank=True, on_delete=models.SET_NULL, related_name="attachments")
    rule_name = models.CharField(max_length=100, blank=True, db_default="")
    route_reason = models.CharField(max_length=300, blank=True, db_default="")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = AttachmentQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(fields=["processing_started_at"], name="attachment_processing",
                         condition=Q(status="processing")),
            # The triage list and its count on the admin's index: what waits for a person, oldest first.
            models.Index(fields=["created_at"], name="attachment_needs_route", condition=Q(status="needs_route")),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=AttachmentStatus.values), name="attachment_status_valid"),
            models.CheckConstraint(condition=Q(kind__in=AttachmentKind.values), name="attachment_kind_valid"),
            # The watchdog judges a run by its start: a processing row without one would never be found stuck.
            # A done row keeps the start of the run that finished it.
            models.CheckConstraint(
                condition=~Q(status__in=["processing", "held", "done"]) | Q(processing_started_at__isnull=False),
                name="attachment_started_when_processed"),
            # Waiting (or never work): no run in progress, so no start; a release or a retry clears it.
            models.CheckConstraint(
                condition=~Q(status__in=["pending", "skipped", "needs_route"]) | Q(processing_started_at__isnull=True),
                name="attachment_unstarted_when_waiting"),
            # A failure says why, for the operator deciding whether to retry it.
            models.CheckConstraint(condition=~Q(status="failed") | ~Q(error=""), name="attachment_failed_has_error"),
            # Waiting for a person: the triage list says why it waits.
            models.CheckConstraint(condition=~Q(status="needs_route") | ~Q(route_reason=""),
                                   name="attachment_needs_route_has_reason"),
        ]

    def __str__(self):
        return self.filename


class PostActionStatus(models.TextChoices):
    # Every move is in mailpoll.post_actions.
    # In: inserted with its stored message (mailpoll.sync.store), an error to retry, an operator's Try again.
    # Out: applied (-> done), the message is no longer there (-> gone), out of attempts (-> failed).
    PENDING = "pending", "Waiting"
    DONE = "done", "Done"
    # The message left the folder (or its UID names another since UIDVALIDITY changed): nothing to do, ever.
    GONE = "gone", "Message gone"
    # Every attempt failed; last_error says why. Only an operator's Try again moves it (-> pending).
    FAILED = "failed", "Failed"


class PostAction(models.Model):
    """What to do to one stored message at its source mailbox, and how far that got.

    Inserted in the transaction that stores the message, so it exists exactly when its documents are
    safe; applied by a later step of the poll on the poll's own session (``mailpoll.sync.after_store``),
    never before. It never touches intake: a failure is retried later and later, shown on the mailbox,
    and the folder's cursor never depends on it.
    """

    request = models.OneToOneField(Request, on_delete=models.CASCADE, related_name="post_action")
    mailbox = models.ForeignKey(Mailbox, on_delete=models.CASCADE, related_name="post_actions")
    folder = models.CharField(max_length=255)
    # Where the message is: an IMAP UID of the folder's UIDVALIDITY, or an API provider's message id.
    uid = models.BigIntegerField(null=True, blank=True)
    uidvalidity = models.BigIntegerField(null=True, blank=True)
    provider_ref = models.CharField(max_length=255, blank=True)
    action = models.CharField(max_length=10, choices=PostActionKind.choices)
    destination = models.CharField(max_length=255, blank=True)
    decided_by = models.CharField(max_length=120, help_text="The mailbox, or the rule (its name, as it was).")
    status = models.CharField(max_length=10, choices=PostActionStatus.choices, default=PostActionStatus.PENDING)
    attempts = models.IntegerField(default=0)
    next_try_at = models.DateTimeField()
    last_error = models.TextField(blank=True)
    # Set by a poller's claim, cleared when it records the outcome: a claim that finds it still set knows the
    # poller before it stopped (killed) somewhere between the two, having perhaps applied it already.
    claimed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # The poll's question: what is due for this mailbox now.
            models.Index(fields=["mailbox", "next_try_at"], name="postaction_due", condition=Q(status="pending")),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=PostActionStatus.values), name="postaction_status_valid"),
            models.CheckConstraint(condition=Q(action__in=PostActionKind.values), name="postaction_action_valid"),
            models.CheckConstraint(
                condition=(Q(action__in=POST_ACTIONS_WITH_DESTINATION) & ~Q(destination=""))
                | (~Q(action__in=POST_ACTIONS_WITH_DESTINATION) & Q(destination="")),
                name="postaction_destination"),
            # A UID means something only with its UIDVALIDITY; an API message has its id instead.
            models.CheckConstraint(
                condition=Q(uid__isnull=False, uidvalidity__isnull=False, provider_ref="")
                | Q(uid__isnull=True, uidvalidity__isnull=True) & ~Q(provider_ref=""),
                name="postaction_names_message"),
            models.CheckConstraint(condition=~Q(status="failed") | ~Q(last_error=""), name="postaction_failed_has_error"),
            models.CheckConstraint(condition=Q(status="pending", finished_at__isnull=True)
                                   | ~Q(status="pending") & Q(finished_at__isnull=False),
                                   name="postaction_finished_iff_not_pending"),
        ]

    def __str__(self):
        return f"{self.get_action_display()} {self.destination}".strip()


class GrantState(models.TextChoices):
    # Every move is in mailpoll.oauth.
    # In: connected or reconnected (oauth.connect). Out: the token endpoint refuses the grant for good
    # (-> needs_reauth).
    ACTIVE = "active", "Active"
    # In: a refresh answered invalid_grant or an AADSTS code that means the grant is dead; failure_reason says
    # which. Never refreshed again (no retry storm). Out: reconnected by someone (-> active).
    NEEDS_REAUTH = "needs_reauth", "Needs re-authorization"


class OAuthGrant(models.Model):
    """A mailbox's delegated OAuth grant: what it refreshes with, the current access token, and its health.

    Every secret is encrypted at rest (``seoinsight.crypto``) and write-only; ``mailpoll.oauth`` reads and
    changes a grant only under a row lock, so a rotated refresh token is never lost to a concurrent refresh.
    """

    mailbox = models.OneToOneField(Mailbox, on_delete=models.CASCADE, related_name="oauth_grant")
    provider = models.CharField(max_length=10, choices=OAuthProvider.choices)
    state = models.CharField(max_length=12, choices=GrantState.choices, default=GrantState.ACTIVE)
    refresh_token = models.TextField(blank=True, editable=False, help_text="Encrypted.")
    # msal's serialized token cache (Microsoft), as an alternative to a bare refresh token.
    token_cache = models.TextField(blank=True, editable=False, help_text="Encrypted.")
    access_token = models.TextField(blank=True, editable=False, help_text="Encrypted.")
    access_expires_at = models.DateTimeField(null=True, blank=True)
    # When the user consented (Google testing apps' refresh tokens die 7 days after it).
    authorized_at = models.DateTimeField()
    # The last successful refresh (Microsoft's refresh tokens die after 90 days without one).
    last_refreshed_at = models.DateTimeField(null=True, blank=True)
    # The last failed refresh, transient or final; empty again after a refresh that works.
    failure_reason = models.TextField(blank=True)
    failed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(provider__in=OAuthProvider.values), name="oauthgrant_provider_valid"),
            models.CheckConstraint(condition=Q(state__in=GrantState.values), name="oauthgrant_state_valid"),
            # The operator reconnecting a mailbox needs to know what the provider said, and when.
            models.CheckConstraint(
                condition=~Q(state="needs_reauth") | (~Q(failure_reason="") & Q(failed_at__isnull=False)),
                name="oauthgrant_needs_reauth_has_reason"),
            # A grant with nothing to refresh with would fail at its first expiry, silently until then.
            models.CheckConstraint(condition=~Q(refresh_token="") | ~Q(token_cache=""),
                                   name="oauthgrant_has_refresh_material"),
            # An access token without its expiry would be handed out forever.
            models.CheckConstraint(condition=Q(access_token="") | Q(access_expires_at__isnull=False),
                                   name="oauthgrant_access_token_has_expiry"),
        ]

    def __str__(self):
        return f"{self.get_provider_display()} grant of {self.mailbox_id}: {self.get_state_display()}"


crypto.register_column("mailpoll.OAuthGrant", "refresh_token")
crypto.register_column("mailpoll.OAuthGrant", "token_cache")
crypto.register_column("mailpoll.OAuthGrant", "access_token")


class DeploymentIdentity(models.TextChoices):
    # MAILPOLL_GOOGLE_SERVICE_ACCOUNT_FILE: signs for any user of the domains it was delegated (Gmail, service
    # auth, no key of the mailbox's own).
    GOOGLE_SERVICE_ACCOUNT = "google_service_account", "Google service account (MAILPOLL_GOOGLE_SERVICE_ACCOUNT_FILE)"
    # MAILPOLL_MICROSOFT_CLIENT_ID / _SECRET: reads any mailbox of a tenant that consented (Graph, app-only, no
    # client id of the mailbox's own).
    MICROSOFT_APP = "microsoft_app", "Microsoft app (MAILPOLL_MICROSOFT_CLIENT_ID, app-only)"


class DeploymentGrantQuerySet(models.QuerySet):
    def of(self, org_id: str, identity: str) -> DeploymentGrantQuerySet:
        return self.filter(org_id=org_id, identity=identity)


class DeploymentGrant(models.Model):
    """A superuser's leave for one org to read some mailboxes with a deployment-wide identity (``deployment_grants``).

    Without one, the org's service mailboxes that hold no key or app of their own read nothing. Only superusers
    see or change grants (``admin.grants``); the form and every poll check them (``deployment_grants.problem``).
    """

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="deployment_grants")
    identity = models.CharField(max_length=30, choices=DeploymentIdentity.choices)
    # Microsoft only: the tenant (id or domain, lower case) the mailboxes' tenant must be.
    tenant = models.CharField(max_length=100, blank=True)
    # Lower-case addresses (hr@contoso.test: that mailbox) and domains (client.example: its every mailbox).
    allowed = models.JSONField(default=list)
    note = models.CharField(max_length=200, blank=True, help_text="Why this org may (a contract, a ticket).")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = DeploymentGrantQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "identity", "tenant"], name="deploymentgrant_one_per_tenant",
                                    violation_error_message="This org already has a grant of that identity (and tenant): edit it instead."),
            models.CheckConstraint(condition=Q(identity__in=DeploymentIdentity.values),
                                   name="deploymentgrant_identity_valid",
                                   violation_error_message="Choose the Google service account or the Microsoft app."),
            # A Google grant has no tenant; a Microsoft grant without one would match a mailbox that names none.
            models.CheckConstraint(
                condition=Q(identity="google_service_account", tenant="") | (Q(identity="microsoft_app") & ~Q(tenant="")),
                name="deploymentgrant_tenant_iff_microsoft",
                violation_error_message="A Microsoft app grant names its tenant; a Google grant names none."),
        ]

    def __str__(self):
        where = f" in {self.tenant}" if self.tenant else ""
        return f"{self.get_identity_display()} for org {self.org_id}{where}"

"""Mailboxes, requests, attachments and raw messages for mail tests.

Attachment factories fill in the fields that go with the state they build
(the CHECK constraints of ``mailpoll.models`` hold them to it).
"""

from datetime import timedelta
from email.message import EmailMessage
from email.utils import make_msgid

import factory
from django.utils import timezone

from mailpoll import conf as mailpoll_conf
from mailpoll.models import (Attachment, AttachmentKind, AttachmentStatus, DeploymentGrant, DeploymentIdentity, Mailbox,
                             MailRule, Request, RequestStatus)
from mailpoll.sync.poller import Poller
from tests.factories import OrgFactory, SiteTargetFactory


class MailboxFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Mailbox
        skip_postgeneration_save = True

    org = factory.SubFactory(OrgFactory)
    name = factory.Sequence(lambda n: f"inbox{n}")
    host = "127.0.0.1"
    port = 143
    security = "none"
    # A service mailbox reads a mailbox named by its address (what a deployment grant can name).
    username = factory.LazyAttributeSequence(lambda mb, n: f"user{n}@client.example" if mb.auth == "service"
                                             else f"user{n}")
    folders = factory.LazyFunction(lambda: ["INBOX"])
    initial_mode = "full"
    site_target = factory.LazyAttribute(
        lambda mb: SiteTargetFactory(site__org=mb.org, url_prefix="https://shop.example/")
    )

    class Params:
        # API and OAuth mailboxes, not connected (no OAuthGrant): the settings' app unless client_id is given.
        gmail_oauth = factory.Trait(provider="gmail", auth="oauth", host="", port=993, security="tls")
        graph_oauth = factory.Trait(provider="graph", auth="oauth", host="", port=993, security="tls")
        gmail_service = factory.Trait(provider="gmail", auth="service", host="", port=993, security="tls")
        imap_oauth = factory.Trait(auth="oauth", oauth_provider="google", host="imap.gmail.com", port=993,
                                   security="tls")

    @factory.post_generation
    def password(self, create, extracted, **kwargs):
        if self.auth != "password":
            return  # an OAuth or service mailbox keeps no password
        self.set_secret(extracted or "secret")
        if create:
            self.save(update_fields=["secret"])

    # -- deployment grants (mailpoll.oauth.deployment_grants) ----------------------------------------------------------------
    @factory.post_generation
    def granted(self, create, extracted, **kwargs):
        """A service mailbox's org holds a grant of the settings' identity for its username, as a superuser gives
        it, so it polls as before grants existed; ``granted=False``: no grant (the grants tests' starting point)."""
        if create and extracted is not False and self.auth == "service":
            grant_for(self)


def grant_for(mailbox: Mailbox, *, allowed: list[str] | None = None) -> DeploymentGrant | None:
    """The mailbox's org's grant of the identity its provider uses, extended to ``allowed`` (default: its username).

    Microsoft: in the mailbox's tenant, else the settings' (as ``oauth_apps.app_for`` reads it); none without one.
    """
    google = mailbox.provider == "gmail"
    tenant = "" if google else (mailbox.tenant or mailpoll_conf.get("MAILPOLL_MICROSOFT_TENANT")).lower()
    if not google and not tenant:
        return None
    grant, _ = DeploymentGrant.objects.get_or_create(
        org=mailbox.org, identity=DeploymentIdentity.GOOGLE_SERVICE_ACCOUNT if google else DeploymentIdentity.MICROSOFT_APP,
        tenant=tenant)
    grant.allowed = sorted({*grant.allowed, *(entry.lower() for entry in (allowed or [mailbox.username]))})
    grant.save(update_fields=["allowed"])
    return grant


class RequestFactory(factory.django.DjangoModelFactory):
    """An accepted message of a mailbox; ``rejected=True`` with its reason."""

    class Meta:
        model = Request

    mailbox = factory.SubFactory(MailboxFactory)
    org = factory.SelfAttribute("mailbox.org")
    source_ref = factory.Sequence(lambda n: f"msg-{n}@client.example")
    folder = "INBOX"
    sender = "ana@client.example"
    subject = "April report"
    status = RequestStatus.ACCEPTED

    class Params:
        rejected = factory.Trait(
            status=RequestStatus.REJECTED,
            reject_reason="message is 30,000,000 bytes, over the 26,214,400-byte limit",
        )


class MailRuleFactory(factory.django.DjangoModelFactory):
    """A rule routing to a new target of its org, unless told another action (which names no target)."""

    class Meta:
        model = MailRule

    org = factory.SubFactory(OrgFactory)
    name = factory.Sequence(lambda n: f"rule {n}")
    site_target = factory.LazyAttribute(
        lambda rule: SiteTargetFactory(site__org=rule.org, url_prefix="https://shop.example/")
        if rule.action == "route" else None)
    action = "route"


def _ago(minutes: float):
    return factory.LazyFunction(lambda: timezone.now() - timedelta(minutes=minutes))


class AttachmentFactory(factory.django.DjangoModelFactory):
    """A pending CSV attachment; the traits build the other states with the fields that go with them.

    ``processing`` started just now, ``stuck`` an hour ago (past the watchdog's 15 min),
    ``held`` (waiting for the downstream), ``done`` and ``failed`` after one run, ``skipped`` never a document.
    """

    class Meta:
        model = Attachment

    request = factory.SubFactory(RequestFactory)
    kind = AttachmentKind.FILE
    document_type = "csv"
    filename = "report.csv"
    original_filename = factory.SelfAttribute("filename")
    mime = "text/csv"
    size = 2048
    status = AttachmentStatus.PENDING

    class Params:
        processing = factory.Trait(status=AttachmentStatus.PROCESSING, attempts=1, processing_started_at=_ago(0))
        stuck = factory.Trait(status=AttachmentStatus.PROCESSING, attempts=1, processing_started_at=_ago(60))
        held = factory.Trait(status=AttachmentStatus.HELD, attempts=1, processing_started_at=_ago(1))
        done = factory.Trait(status=AttachmentStatus.DONE, attempts=1, processing_started_at=_ago(1))
        failed = factory.Trait(status=AttachmentStatus.FAILED, attempts=1, processing_started_at=_ago(1),
                               error="DocumentError: the PDF is encrypted")
        skipped = factory.Trait(status=AttachmentStatus.SKIPPED, document_type="", size=0,
                                skip_reason="empty attachment")


def mail(subject="Report", *, message_id="auto", body="See attached.", attachments=(), sender="ana@client.example",
         to="seo@agency.example", headers=()):
    """A raw RFC 5322 message; attachments are (filename, bytes, mime) triples, ``headers`` (name, value) pairs
    put on top, in order (an Authentication-Results a receiving server added, say)."""
    msg = EmailMessage()
    for name, value in headers:
        msg[name] = value
    msg["From"] = sender
    msg["To"] = to
    msg["Subject"] = subject
    if message_id == "auto":
        msg["Message-ID"] = make_msgid(domain="client.example")
    elif message_id:
        msg["Message-ID"] = message_id
    msg.set_content(body)
    for filename, data, mime in attachments:
        maintype, subtype = mime.split("/", 1)
        msg.add_attachment(data, maintype=maintype, subtype=subtype, filename=filename)
    return msg.as_bytes()


CSV = b"Page,Clicks,Impressions,CTR,Position,Date\nhttps://shop.example/a,3,30,10%,2.5,2026-11-01\n"


def mailbox_on(server, **fields) -> Mailbox:
    """A mailbox on a ``tests.support.fake_imap.FakeImapServer`` (plain IMAP, its password), first poll ``full``."""
    return MailboxFactory(host=server.host, port=server.port, security="none", username="agent",
                          password=server.password, initial_mode="full", **fields)


def poll_now(mailbox, poller=None) -> None:
    """One poll cycle, with this mailbox due whatever its interval; the mailbox is then read again."""
    Mailbox.objects.filter(pk=mailbox.pk).update(last_polled_at=None)
    (poller or Poller()).cycle()
    mailbox.refresh_from_db()

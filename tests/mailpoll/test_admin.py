"""The mail intake admin: health at a glance, a write-only secret, and the stuck view."""

import re
from datetime import UTC, date, datetime, timedelta

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from jobs.models import Job, JobStatus
from mailpoll.admin.display import ago
from mailpoll.admin.forms import MailboxForm
from mailpoll.models import Attachment, AttachmentStatus, FolderCursor, Mailbox, Request
from tests.factories import OrgFactory, SiteTargetFactory, UserFactory
from tests.mailpoll.factories import AttachmentFactory, MailboxFactory, RequestFactory

MAILBOXES_URL = reverse("admin:mailpoll_mailbox_changelist")
MAILBOX_ADD_URL = reverse("admin:mailpoll_mailbox_add")
REQUESTS_URL = reverse("admin:mailpoll_request_changelist")
ATTACHMENTS_URL = reverse("admin:mailpoll_attachment_changelist")
PASSWORD = "correct horse 7 battery"


def mailbox(org=None, **fields) -> Mailbox:
    """A TLS mailbox on a remote host, no site target, its secret PASSWORD."""
    fields = {"name": "intake", "host": "imap.example.com", "port": 993, "security": "tls",
              "username": "reports@example.com", "initial_mode": "new-only", "site_target": None, **fields}
    return MailboxFactory(org=org or OrgFactory(), password=PASSWORD, **fields)


def request_(box, **fields) -> Request:
    fields.setdefault("source_ref", f"msg-{Request.objects.count()}@example.com")
    return RequestFactory(mailbox=box, **fields)


def processing(req, started_ago: timedelta, **fields) -> Attachment:
    """A CSV attachment whose job started ``started_ago``."""
    return AttachmentFactory(request=req, processing=True, processing_started_at=timezone.now() - started_ago,
                             **fields)


def failed(req, **fields) -> Attachment:
    return AttachmentFactory(request=req, failed=True, error="the PDF is encrypted", **fields)


def form_data(org, **overrides) -> dict:
    data = {"org": org.pk, "name": "intake", "enabled": "on", "provider": "imap", "auth": "password",
            "host": "imap.example.com",
            "port": "993", "security": "tls", "username": "reports@example.com", "password": PASSWORD,
            "folders": "INBOX, Invoices", "poll_interval": "120", "initial_mode": "new-only", "initial_since": "",
            "site_target": ""}
    return {**data, **overrides}


def change_data(box, **overrides) -> dict:
    """What the change page posts: the form without org (read-only there) plus the cursor inline's management form."""
    data = form_data(box.org, password="", **overrides)
    del data["org"]
    cursors = box.cursors.count()
    return {**data, "cursors-TOTAL_FORMS": str(cursors), "cursors-INITIAL_FORMS": str(cursors),
            "cursors-MIN_NUM_FORMS": "0", "cursors-MAX_NUM_FORMS": "0"}


def listed(response) -> set:
    return {obj.pk for obj in response.context["cl"].result_list}


def run_action(client, url, action, objects):
    return client.post(url, {"action": action, "_selected_action": [str(o.pk) for o in objects]}, follow=True)


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("seconds, expected", [
    (-3, "just now"), (2, "just now"), (45, "45 s ago"), (130, "2 min ago"), (5 * 3600, "5 h ago"),
    (47 * 3600, "47 h ago"), (3 * 86400 + 60, "3 d ago"),
])
def test_ago(seconds, expected):
    assert ago(NOW - timedelta(seconds=seconds), now=NOW) == expected


@pytest.mark.django_db
@pytest.mark.parametrize("overrides, field, message", [
    ({"security": "none"}, "security", "No encryption is allowed only for a server on this machine"),
    ({"initial_mode": ""}, "initial_mode", "This field is required."),
    ({"initial_mode": "since"}, "initial_since", "“Since a date” needs a date."),
    ({"initial_since": "2026-01-01"}, "initial_since", "A date is used only with “Since a date”"),
    ({"folders": "INBOX, , Sent"}, "folders", "A folder name cannot be empty"),
    ({"folders": "INBOX, INBOX"}, "folders", "Listed twice: INBOX."),
    ({"folders": " "}, "folders", "This field is required."),
    ({"poll_interval": "5"}, "poll_interval", "At least 30 seconds"),
    ({"password": ""}, "password", "A new mailbox needs the account's password."),
])
def test_the_form_refuses_with_a_message_that_says_why(overrides, field, message):
    form = MailboxForm(data=form_data(OrgFactory(), **overrides))

    assert not form.is_valid()
    assert any(message in error for error in form.errors[field]), form.errors


@pytest.mark.django_db
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1"])
def test_plain_text_is_accepted_on_loopback(host):
    form = MailboxForm(data=form_data(OrgFactory(), security="none", host=host, port="143"))

    assert form.is_valid(), form.errors


@pytest.mark.django_db
def test_a_site_target_of_another_org_is_refused():
    org, target = OrgFactory(), SiteTargetFactory()

    form = MailboxForm(data=form_data(org, site_target=target.pk))

    assert not form.is_valid()
    assert form.errors["site_target"] == [f"This target belongs to org {target.site.org_id}, not {org.pk}."]


@pytest.mark.django_db
def test_changelist_shows_health_at_a_glance_and_filters_by_it(admin_client):
    org = OrgFactory()
    failing = mailbox(org, name="failing", consecutive_failures=3, last_error="LoginError: authentication failed",
                      last_error_at=timezone.now() - timedelta(minutes=2), last_polled_at=timezone.now())
    healthy = mailbox(org, name="healthy", last_success_at=timezone.now(), last_polled_at=timezone.now())
    fresh = mailbox(org, name="fresh")
    mailbox(org, name="off", enabled=False)

    response = admin_client.get(MAILBOXES_URL)
    html = response.content.decode()

    assert response.status_code == 200
    for text in ("failing 3 in a row", ">OK<", "never polled", ">disabled<", "reports@example.com@imap.example.com",
                 "LoginError: authentication failed", "(2 min ago)", "just now"):
        assert text in html, text
    assert listed(admin_client.get(MAILBOXES_URL, {"health": "failing"})) == {failing.pk}
    assert listed(admin_client.get(MAILBOXES_URL, {"health": "healthy"})) == {healthy.pk}
    assert listed(admin_client.get(MAILBOXES_URL, {"health": "never"})) == {fresh.pk}


@pytest.mark.django_db
def test_a_typed_secret_is_stored_encrypted_and_never_rendered_back(admin_client):
    org = OrgFactory()

    response = admin_client.post(MAILBOX_ADD_URL, form_data(org))

    assert response.status_code == 302, response.context["adminform"].form.errors
    box = Mailbox.objects.get(org=org, name="intake")
    raw_column = Mailbox.objects.values_list("secret", flat=True).get(pk=box.pk)
    assert box.get_secret() == PASSWORD
    assert PASSWORD not in raw_column
    assert (box.folders, box.poll_interval) == (["INBOX", "Invoices"], timedelta(seconds=120))

    html = admin_client.get(reverse("admin:mailpoll_mailbox_change", args=[box.pk])).content.decode()
    assert PASSWORD not in html
    assert raw_column not in html
    assert 'name="password"' in html and "stored (encrypted)" in html
    assert 'value="INBOX, Invoices"' in html


@pytest.mark.django_db
def test_a_view_only_user_sees_the_mailbox_but_neither_secret_nor_actions(client):
    box = mailbox()
    user = UserFactory(is_staff=True, org=box.org)  # a member of the mailbox's org (the admin is scoped by org)
    user.user_permissions.add(Permission.objects.get(codename="view_mailbox"))
    client.force_login(user)

    listing = client.get(MAILBOXES_URL).content.decode()
    html = client.get(reverse("admin:mailpoll_mailbox_change", args=[box.pk])).content.decode()

    assert "poll_now" not in listing
    assert "imap.example.com" in html and "stored (encrypted)" in html
    assert PASSWORD not in html and box.secret not in html


@pytest.mark.django_db
def test_an_empty_password_keeps_the_secret_and_the_checkbox_removes_it(admin_client):
    box = mailbox()
    FolderCursor.objects.create(mailbox=box, folder="INBOX", uidvalidity=7, last_uid=41, last_sync_ts=timezone.now())
    url = reverse("admin:mailpoll_mailbox_change", args=[box.pk])

    kept = admin_client.post(url, change_data(box, name="renamed"))
    box.refresh_from_db()
    assert kept.status_code == 302
    assert (box.name, box.get_secret()) == ("renamed", PASSWORD)

    admin_client.post(url, change_data(box, remove_secret="on"))
    box.refresh_from_db()
    assert box.secret == ""


@pytest.mark.django_db
@pytest.mark.parametrize("moved", [
    {"host": "imap.attacker.example"},
    {"port": "1993"},
    {"security": "starttls", "port": "143"},
    {"username": "someone@attacker.example"},
])
def test_re_pointing_a_mailbox_needs_the_password_again(admin_client, moved):
    box = mailbox()
    url = reverse("admin:mailpoll_mailbox_change", args=[box.pk])
    stored = box.secret

    refused = admin_client.post(url, change_data(box, **moved))

    assert refused.status_code == 200
    assert "type the password again for the new destination" in refused.context["adminform"].form.errors["password"][0]
    box.refresh_from_db()
    assert (box.host, box.port, box.username, box.secret) == ("imap.example.com", 993, "reports@example.com", stored)

    retyped = admin_client.post(url, {**change_data(box, **moved), "password": "the new server's password"})
    assert retyped.status_code == 302
    box.refresh_from_db()
    assert box.get_secret() == "the new server's password"  # the old one is gone, not kept beside it


@pytest.mark.django_db
def test_re_pointing_with_the_secret_removed_is_allowed(admin_client):
    box = mailbox()
    url = reverse("admin:mailpoll_mailbox_change", args=[box.pk])

    response = admin_client.post(url, change_data(box, host="imap.other.example", remove_secret="on"))

    assert response.status_code == 302
    box.refresh_from_db()
    assert (box.host, box.secret) == ("imap.other.example", "")


@pytest.mark.django_db
def test_an_unknown_security_is_refused_by_the_form_and_by_the_database():
    form = MailboxForm(data=form_data(OrgFactory(), security="ssl"))
    assert not form.is_valid() and "security" in form.errors

    box = mailbox()
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError, match="mailbox_security_valid"), transaction.atomic():
        Mailbox.objects.filter(pk=box.pk).update(security="ssl")


@pytest.mark.django_db
def test_plain_text_to_a_remote_host_is_refused_with_its_message(admin_client):
    org = OrgFactory()

    response = admin_client.post(MAILBOX_ADD_URL, form_data(org, security="none"))

    html = response.content.decode()
    assert response.status_code == 200
    assert "No encryption is allowed only for a server on this machine (127.0.0.1, localhost or ::1)" in html
    assert PASSWORD not in html  # a refused form does not echo the password either
    assert not Mailbox.objects.filter(org=org).exists()


@pytest.mark.django_db
def test_the_add_form_makes_the_operator_choose_the_first_poll(admin_client):
    html = admin_client.get(MAILBOX_ADD_URL).content.decode()

    radios = re.findall(r'<input type="radio" name="initial_mode"[^>]*>', html)
    assert len(radios) == 3
    assert not any("checked" in radio for radio in radios)


@pytest.mark.django_db
def test_the_change_page_shows_folder_cursors_read_only(admin_client):
    box = mailbox(initial_mode="since", initial_since=date(2026, 1, 1))
    FolderCursor.objects.create(mailbox=box, folder="Invoices", uidvalidity=1717, last_uid=4242,
                                last_sync_ts=timezone.now() - timedelta(minutes=3))

    html = admin_client.get(reverse("admin:mailpoll_mailbox_change", args=[box.pk])).content.decode()

    assert all(text in html for text in ("Invoices", "1717", "4242", "3 min ago"))
    assert 'name="cursors-0-last_uid"' not in html


@pytest.mark.django_db
def test_poll_now_clears_last_polled_at_of_enabled_mailboxes(admin_client):
    org = OrgFactory()
    due = mailbox(org, name="due", last_polled_at=timezone.now())
    off = mailbox(org, name="off", enabled=False, last_polled_at=timezone.now())

    response = run_action(admin_client, MAILBOXES_URL, "poll_now", [due, off])

    due.refresh_from_db()
    off.refresh_from_db()
    assert due.last_polled_at is None
    assert off.last_polled_at is not None
    assert messages_of(response) == [
        "1 mailbox marked due: any running pollmail is woken and polls them now; "
        "1 skipped (disabled mailboxes are never polled: enable them first)"
    ]


@pytest.mark.django_db
def test_requests_list_with_status_and_attachment_count(admin_client):
    box = mailbox()
    accepted = request_(box)
    processing(accepted, timedelta(minutes=1))
    rejected = request_(box, rejected=True, reject_reason="message is 30,000,000 bytes, over the limit")

    response = admin_client.get(REQUESTS_URL)
    html = response.content.decode()

    assert listed(response) == {accepted.pk, rejected.pk}
    assert "over the limit" in html and ">Rejected<" in html
    assert listed(admin_client.get(REQUESTS_URL, {"status__exact": "rejected"})) == {rejected.pk}
    assert listed(admin_client.get(REQUESTS_URL, {"q": "msg-0@"})) == {accepted.pk}
    detail = admin_client.get(reverse("admin:mailpoll_request_change", args=[accepted.pk])).content.decode()
    assert "report.csv" in detail and 'name="_save"' not in detail


@pytest.mark.django_db
def test_the_stuck_filter_lists_only_attachments_processing_too_long(admin_client):
    req = request_(mailbox())
    stuck = processing(req, timedelta(minutes=20))
    processing(req, timedelta(minutes=1))

    everything = admin_client.get(ATTACHMENTS_URL)
    response = admin_client.get(ATTACHMENTS_URL, {"stuck": "yes"})

    assert len(listed(everything)) == 2
    assert '<a href="?stuck=yes">1 attachment stuck</a> in processing for over 15 min' in everything.content.decode()
    assert listed(response) == {stuck.pk}


@pytest.mark.django_db
def test_release_moves_a_stuck_attachment_to_pending_and_queues_its_job(admin_client):
    req = request_(mailbox())
    stuck = processing(req, timedelta(minutes=20))
    young = processing(req, timedelta(minutes=1))

    response = run_action(admin_client, ATTACHMENTS_URL, "release", [stuck, young])

    stuck.refresh_from_db()
    young.refresh_from_db()
    assert (stuck.status, stuck.processing_started_at) == (AttachmentStatus.PENDING, None)
    assert young.status == AttachmentStatus.PROCESSING
    job = Job.objects.get(dedup_key=f"process_attachment:{stuck.pk}")
    assert (job.type, job.status, job.org_id, job.payload) == (
        "process_attachment", JobStatus.QUEUED, req.org_id, {"attachment_id": stuck.pk})
    assert not Job.objects.filter(dedup_key=f"process_attachment:{young.pk}").exists()
    assert messages_of(response) == [
        "1 attachment released and queued; 1 skipped (only attachments processing for over 15 min can be released)"
    ]


@pytest.mark.django_db
def test_retry_failed_requeues_failed_attachments_only(admin_client):
    req = request_(mailbox())
    given_up = failed(req, attempts=3)
    live = processing(req, timedelta(0))

    response = run_action(admin_client, ATTACHMENTS_URL, "retry", [given_up, live])

    given_up.refresh_from_db()
    live.refresh_from_db()
    assert (given_up.status, given_up.attempts, given_up.error) == (AttachmentStatus.PENDING, 0, "")
    assert live.status == AttachmentStatus.PROCESSING
    assert Job.objects.filter(dedup_key=f"process_attachment:{given_up.pk}", status=JobStatus.QUEUED).exists()
    assert messages_of(response)[0] == "1 attachment queued again; 1 skipped (only failed attachments can be retried)"


@pytest.mark.django_db
@pytest.mark.parametrize("url", [MAILBOXES_URL, REQUESTS_URL, ATTACHMENTS_URL])
def test_every_column_sorts(admin_client, url):
    req = request_(mailbox(last_success_at=timezone.now()))
    processing(req, timedelta(minutes=20))
    failed(req)
    columns = len(admin_client.get(url).context["cl"].list_display)

    for column in range(1, columns):
        for order in (str(column), f"-{column}"):
            response = admin_client.get(url, {"o": order})
            assert response.status_code == 200 and listed(response), f"sorting by column {order}"


# -- API and OAuth mailboxes in the form -------------------------------------------------------------------

def service_key(**fields) -> str:
    import json

    key = {"type": "service_account", "client_email": "reader@project.iam.gserviceaccount.com",
           "private_key": "-----BEGIN PRIVATE KEY-----\nMIIEv-plaintext-key\n-----END PRIVATE KEY-----\n", **fields}
    return json.dumps({k: v for k, v in key.items() if v is not None})


def api_data(org, provider="gmail", auth="oauth", **overrides) -> dict:
    return form_data(org, **{"provider": provider, "auth": auth, "password": "", **overrides})


@pytest.mark.django_db
@pytest.mark.parametrize("overrides, field, message", [
    ({"auth": "password"}, "auth", "Gmail API takes OAuth (user consent) or Service account / app-only."),
    ({"provider": "imap", "auth": "service"}, "auth", "IMAP takes Password or OAuth (user consent)."),
    ({"provider": "imap"}, "oauth_provider", "IMAP with OAuth needs whose tokens the server takes"),
    ({"provider": "imap", "oauth_provider": "google", "host": ""}, "host", "An IMAP mailbox needs its server."),
    ({"provider": "imap", "oauth_provider": "google", "host": "imap.attacker.example"}, "host",
     "Google tokens are sent only to imap.gmail.com."),
    ({"provider": "imap", "oauth_provider": "microsoft", "host": "imap.gmail.com"}, "host",
     "Microsoft tokens are sent only to outlook.office365.com or outlook.office.com."),
    ({"auth": "service"}, "new_app_secret", "A Gmail service account needs its JSON key here"),
    ({"auth": "service", "new_app_secret": "{not json"}, "new_app_secret", "This is not a JSON key"),
    ({"auth": "service", "new_app_secret": service_key(private_key=None)}, "new_app_secret",
     "This JSON is not a service account key: it lacks private_key."),
    ({"auth": "service", "new_app_secret": "[1, 2]"}, "new_app_secret", "it lacks client_email, private_key"),
    ({"new_app_secret": "a-client-secret"}, "new_app_secret", "A client secret is used only with the mailbox's own"),
    ({"provider": "graph", "client_id": "my-app"}, "new_app_secret", "The mailbox's own client id needs its client "
                                                                     "secret"),
    ({"tenant": "contoso.onmicrosoft.com"}, "tenant", "A tenant is Microsoft's only"),
    ({"live": "on"}, "live", "Live (IMAP IDLE) is for IMAP mailboxes"),
    ({"provider": "graph", "live": "on"}, "live", "Gmail API and Graph mailboxes are polled at their interval"),
    ({"provider": "graph", "auth": "service"}, "tenant", "App-only access needs the organisation's tenant id"),
    ({"provider": "imap", "auth": "password", "password": PASSWORD, "client_id": "x"}, "auth",
     "Password auth uses no OAuth app"),
])
def test_the_form_refuses_an_api_or_oauth_mailbox_with_a_message_that_says_why(overrides, field, message):
    form = MailboxForm(data=api_data(OrgFactory(), **overrides))

    assert not form.is_valid()
    assert any(message in error for error in form.errors.get(field, [])), form.errors


@pytest.mark.django_db
@pytest.mark.parametrize("overrides", [
    {},  # Gmail with the settings' OAuth app
    {"provider": "graph", "client_id": "my-app", "new_app_secret": "its-secret", "tenant": "contoso.example"},
    {"provider": "graph", "auth": "service", "tenant": "contoso.onmicrosoft.com"},
    {"auth": "service", "new_app_secret": service_key()},
    {"provider": "imap", "oauth_provider": "microsoft", "host": "outlook.office365.com", "security": "tls",
     "port": "993"},
])
def test_an_api_or_oauth_mailbox_needs_no_password_and_ignores_the_imap_server(overrides):
    fields = {"host": "imap.example.com", "security": "none", "port": "143", **overrides}
    form = MailboxForm(data=api_data(OrgFactory(), **fields))

    assert form.is_valid(), form.errors
    box = form.save()
    assert box.secret == ""
    if box.provider != "imap":
        assert (box.host, box.port, box.security, box.oauth_provider) == ("", 993, "tls", "")
    assert box.get_app_secret() == overrides.get("new_app_secret", "")


@pytest.mark.django_db
def test_a_service_account_key_is_stored_encrypted_and_never_rendered_back(admin_client):
    org, key = OrgFactory(), service_key()

    refused = admin_client.post(MAILBOX_ADD_URL, api_data(org, auth="service", new_app_secret=key, folders=""))
    assert refused.status_code == 200 and "MIIEv-plaintext-key" not in refused.content.decode()
    response = admin_client.post(MAILBOX_ADD_URL, api_data(org, auth="service", new_app_secret=key))

    assert response.status_code == 302, response.context["adminform"].form.errors
    box = Mailbox.objects.get(org=org)
    assert box.get_app_secret() == key and "MIIEv-plaintext-key" not in box.app_secret
    html = admin_client.get(reverse("admin:mailpoll_mailbox_change", args=[box.pk])).content.decode()
    assert "MIIEv-plaintext-key" not in html and box.app_secret not in html
    assert "stored (encrypted)" in html and "nothing to connect" in html


@pytest.mark.django_db
@pytest.mark.parametrize("moved", [{"tenant": "fabrikam.example"}, {"client_id": "another-app"},
                                   {"auth": "service"}, {"provider": "gmail", "tenant": ""}])
def test_changing_whose_app_it_is_needs_the_app_secret_again_and_drops_the_grant(admin_client, moved):
    from mailpoll.models import OAuthGrant

    box = MailboxFactory(graph_oauth=True, client_id="my-app", tenant="contoso.example", initial_mode="new-only",
                         site_target=None, name="intake", username="reports@example.com")
    box.set_app_secret("the-stored-secret")
    box.save()
    OAuthGrant.objects.create(mailbox=box, provider="microsoft", refresh_token="x", authorized_at=timezone.now())
    url = reverse("admin:mailpoll_mailbox_change", args=[box.pk])
    data = {**change_data(box, provider="graph", auth="oauth", client_id="my-app", tenant="contoso.example"),
            **moved}

    refused = admin_client.post(url, data)

    assert "type the app secret again for the new app" in refused.context["adminform"].form.errors["new_app_secret"][0]
    box.refresh_from_db()
    assert box.get_app_secret() == "the-stored-secret" and OAuthGrant.objects.filter(mailbox=box).exists()

    retyped = admin_client.post(url, {**data, "new_app_secret": service_key() if "auth" in moved else "new-secret"},
                                follow=True)
    assert retyped.status_code == 200 and not OAuthGrant.objects.filter(mailbox=box).exists()
    assert any("the mailbox's OAuth grant was removed; connect it again" in str(m) for m in retyped.context["messages"])


@pytest.mark.django_db
def test_moving_an_imap_mailbox_to_an_api_drops_its_password(admin_client):
    box = mailbox()
    url = reverse("admin:mailpoll_mailbox_change", args=[box.pk])

    response = admin_client.post(url, change_data(box, provider="gmail", auth="oauth"))

    assert response.status_code == 302, response.context["adminform"].form.errors
    box.refresh_from_db()
    assert (box.provider, box.auth, box.secret, box.host) == ("gmail", "oauth", "", "")


@pytest.mark.django_db
@pytest.mark.parametrize("provider, valid", [("imap", True), ("gmail", False)])
def test_a_post_without_auth_means_a_password_for_imap_only(provider, valid):
    data = {k: v for k, v in form_data(OrgFactory(), provider=provider).items() if k != "auth"}
    form = MailboxForm(data=data)

    assert form.is_valid() is valid, form.errors
    assert form.cleaned_data.get("auth") == "password" if valid else form.errors["auth"] == [
        "Choose how the mailbox signs in."]


@pytest.mark.django_db
@pytest.mark.parametrize("moved", [{"host": "127.0.0.1", "security": "none", "port": "143"},
                                   {"username": "someone.else@example.com"}])
def test_re_pointing_an_imap_oauth_mailbox_drops_its_grant(admin_client, moved):
    from mailpoll.models import OAuthGrant

    box = MailboxFactory(imap_oauth=True, name="intake", username="reports@example.com", initial_mode="new-only",
                         site_target=None)
    OAuthGrant.objects.create(mailbox=box, provider="google", refresh_token="x", authorized_at=timezone.now())
    same = {"auth": "oauth", "oauth_provider": "google", "host": "imap.gmail.com"}
    url = reverse("admin:mailpoll_mailbox_change", args=[box.pk])
    assert admin_client.post(url, change_data(box, **same, name="renamed")).status_code == 302
    assert OAuthGrant.objects.filter(mailbox=box).exists()  # an edit that moves nothing keeps the grant

    response = admin_client.post(url, change_data(box, **{**same, **moved}), follow=True)

    assert response.status_code == 200 and not OAuthGrant.objects.filter(mailbox=box).exists()
    assert any("OAuth grant was removed; connect it again" in str(m) for m in response.context["messages"])


@pytest.mark.django_db
@pytest.mark.parametrize("provider, issuer", [("gmail", "google"), ("graph", "microsoft")])
def test_another_account_on_an_api_oauth_mailbox_drops_its_grant(admin_client, provider, issuer):
    """The consent was one account's, checked at Connect against the username: a new username is not covered."""
    from mailpoll.models import OAuthGrant

    box = MailboxFactory(**{f"{provider}_oauth": True}, name="intake", username="reports@example.com",
                         initial_mode="new-only", site_target=None)
    OAuthGrant.objects.create(mailbox=box, provider=issuer, refresh_token="x", authorized_at=timezone.now())
    url = reverse("admin:mailpoll_mailbox_change", args=[box.pk])
    assert admin_client.post(url, change_data(box, provider=provider, auth="oauth", name="renamed")).status_code == 302
    assert OAuthGrant.objects.filter(mailbox=box).exists()  # an edit that moves nothing keeps the grant

    response = admin_client.post(url, change_data(box, provider=provider, auth="oauth",
                                                  username="ceo@example.com"), follow=True)

    assert response.status_code == 200 and not OAuthGrant.objects.filter(mailbox=box).exists()
    assert any("The username changed: the mailbox's OAuth grant was removed" in str(m)
               for m in response.context["messages"])

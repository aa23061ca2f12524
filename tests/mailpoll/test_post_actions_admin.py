"""Post-actions as operators meet them: forms that refuse what cannot work, the mailbox's page, the list, the
index, /metrics, the consent a grant is asked for; and the org's "plus tag names a site"."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone

from mailpoll.admin.forms import MailboxForm
from mailpoll.admin.rules import MailRuleForm
from mailpoll.models import Attachment, AttachmentStatus, PostAction, PostActionStatus
from mailpoll.oauth.apps import app_for
from mailpoll.oauth.connect import consent_scope
from mailpoll.sync.store import store_message
from seoinsight.metrics import DatabaseCollector
from tests.factories import OrgFactory, SiteFactory, SiteTargetFactory, UserFactory
from tests.mailpoll.factories import CSV, MailboxFactory, MailRuleFactory, mail
from tests.mailpoll.test_admin import form_data, run_action

pytestmark = pytest.mark.django_db

LIST_URL = reverse("admin:mailpoll_postaction_changelist")
GMAIL_MODIFY = "https://www.googleapis.com/auth/gmail.modify"
REPORT = [("Pages.csv", CSV, "text/csv")]


def operator(client, org):
    user = UserFactory(is_staff=True, org=org)
    user.user_permissions.add(*Permission.objects.filter(codename__in=[
        "view_mailbox", "change_mailbox", "view_postaction", "change_postaction", "view_attachment"]))
    client.force_login(user)
    return user


def failed_action(mailbox, uid=1, error="move failed: [TRYCREATE] Mailbox doesn't exist: Done") -> PostAction:
    store_message(mailbox, "INBOX", uid, mail(f"message {uid}"), uidvalidity=7)
    PostAction.objects.filter(request__uid=uid, request__mailbox=mailbox).update(
        status=PostActionStatus.FAILED, attempts=8, last_error=error, finished_at=timezone.now())
    return PostAction.objects.get(request__uid=uid, request__mailbox=mailbox)


# -- forms -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("fields", "field", "message"), [
    ({"post_action": "move"}, "post_action_folder", "Moving needs the folder to move to."),
    ({"post_action": "move", "post_action_folder": "Invoices"}, "post_action_folder", "Invoices is read for new mail"),
    ({"post_action": "label", "post_action_folder": "seo"}, "post_action", "Labels are Gmail's"),
    ({"post_action": "", "post_action_folder": "Done"}, "post_action_folder", "Only moving or labelling"),
])
def test_the_mailbox_form_refuses_a_post_action_that_cannot_work(fields, field, message):
    form = MailboxForm(form_data(OrgFactory(), **fields))
    assert not form.is_valid()
    assert message in " ".join(form.errors[field])


def test_the_mailbox_form_takes_a_move_to_another_folder():
    form = MailboxForm(form_data(OrgFactory(), post_action="move", post_action_folder=" Processed "))
    assert form.is_valid(), form.errors
    assert form.save().post_action_folder == "Processed"


def test_a_rule_is_checked_against_every_mailbox_it_may_apply_to():
    org = OrgFactory()
    MailboxFactory(org=org, provider="gmail", auth="service", host="")
    MailboxFactory(org=org)  # IMAP
    data = {"org": org.pk, "name": "label it", "position": "100", "enabled": "on", "action": "ignore",
            "post_action": "label", "post_action_folder": "seo"}
    form = MailRuleForm(data)
    assert not form.is_valid()
    assert "this applies to IMAP mailboxes too" in " ".join(form.errors["post_action"])


# -- the grant's consent -------------------------------------------------------------------------------------------


def test_the_consent_asks_for_changes_only_where_a_post_action_may_change_mail(google):
    gmail = MailboxFactory(provider="gmail", auth="oauth", host="", username="ana@client.example")
    other = MailboxFactory(org=gmail.org, provider="gmail", auth="oauth", host="", username="bob@client.example")
    assert GMAIL_MODIFY not in consent_scope(app_for(gmail))

    rule = MailRuleFactory(org=gmail.org, action="ignore", post_action="mark_read")
    rule.mailboxes.set([other])
    assert GMAIL_MODIFY not in consent_scope(app_for(gmail))
    assert GMAIL_MODIFY in consent_scope(app_for(other))
    rule.mailboxes.clear()  # any mailbox of the org
    assert GMAIL_MODIFY in consent_scope(app_for(gmail))
    # A refresh asks for reading only: the token carries what was consented.
    assert app_for(gmail).scopes == ("https://www.googleapis.com/auth/gmail.readonly",)


# -- the admin -----------------------------------------------------------------------------------------------------


def test_the_mailbox_says_what_waits_on_it(client):
    mailbox = MailboxFactory(site_target=None, post_action="move", post_action_folder="Done")
    failed_action(mailbox)
    store_message(mailbox, "INBOX", 2, mail("csv", attachments=REPORT), uidvalidity=7)  # waits for a site
    PostAction.objects.filter(request__uid=2).update(attempts=1, last_error="throttled")  # retrying
    operator(client, mailbox.org)

    page = client.get(reverse("admin:mailpoll_mailbox_change", args=[mailbox.pk])).content.decode()
    assert "1 post-action failed" in page and "1 post-action retrying" in page
    assert "1 document waiting for a site" in page
    listing = client.get(reverse("admin:mailpoll_mailbox_changelist")).content.decode()
    assert "1 post-action failed" in listing


def test_the_list_is_the_org_s_own_and_try_again_resumes_a_failed_one(client):
    mine = failed_action(MailboxFactory(post_action="move", post_action_folder="Done"))
    theirs = failed_action(MailboxFactory(post_action="move", post_action_folder="Done"))
    operator(client, mine.mailbox.org)

    listing = client.get(LIST_URL)
    assert {row.pk for row in listing.context["cl"].result_list} == {mine.pk}
    assert "Mailbox doesn&#x27;t exist: Done" in listing.content.decode()
    assert client.get(reverse("admin:mailpoll_postaction_change", args=[theirs.pk])).status_code == 404

    response = run_action(client, LIST_URL, "try_again", [mine])
    assert "1 post-action to be tried again" in response.content.decode()
    mine.refresh_from_db()
    assert (mine.status, mine.attempts, mine.finished_at) == ("pending", 0, None)
    assert PostAction.objects.get(pk=theirs.pk).status == "failed"


def test_the_index_counts_failed_post_actions(client):
    mailbox = MailboxFactory(post_action="mark_read")
    failed_action(mailbox, 1)
    failed_action(MailboxFactory(post_action="mark_read"), 1)  # another org's
    operator(client, mailbox.org)
    index = client.get(reverse("admin:index")).content.decode().replace("&amp;", "&")
    assert f'<a href="{LIST_URL}?status__exact=failed">Post-actions that failed on their mailbox</a>' in index
    assert "<strong>1</strong>" in index


def test_metrics_count_failing_post_actions_by_mailbox():
    mailbox = MailboxFactory(post_action="mark_read")
    failed_action(mailbox, 1)
    store_message(mailbox, "INBOX", 2, mail("two"), uidvalidity=7)
    PostAction.objects.filter(request__uid=2).update(attempts=2, last_error="throttled")
    store_message(mailbox, "INBOX", 3, mail("three"), uidvalidity=7)  # never tried: not a problem
    families = {family.name: family for family in DatabaseCollector().collect()}
    samples = families["seoinsight_mail_post_actions_failing"].samples
    assert sorted((s.labels["state"], s.value) for s in samples) == [("failed", 1), ("retrying", 1)]


# -- "plus tag names a site" ---------------------------------------------------------------------------------------


def test_a_plus_tag_equal_to_a_site_slug_routes_to_its_default_target_when_the_org_allows_it():
    org = OrgFactory(plus_tag_routes_to_site=True)
    site = SiteFactory(org=org, domain="acme.example", slug="acme")
    site.default_target = SiteTargetFactory(site=site)
    site.save()
    mailbox = MailboxFactory(org=org, site_target=None)

    store_message(mailbox, "INBOX", 1, mail("report", to="reports+Acme@agency.example", attachments=REPORT))
    routed = Attachment.objects.get(request__uid=1)
    assert (routed.status, routed.site_target_id) == (AttachmentStatus.PENDING, site.default_target_id)
    assert routed.route_reason == "the plus tag 'acme' names the site acme.example"

    org.plus_tag_routes_to_site = False
    org.save()
    store_message(mailbox, "INBOX", 2, mail("report 2", to="reports+acme@agency.example", attachments=REPORT))
    assert Attachment.objects.get(request__uid=2).status == AttachmentStatus.NEEDS_ROUTE


def test_a_site_s_default_target_is_one_of_its_own():
    site = SiteFactory(slug="acme")
    site.default_target = SiteTargetFactory(site=SiteFactory(org=site.org))
    with pytest.raises(ValidationError, match="this site's own targets"):
        site.full_clean()
    site.default_target = SiteTargetFactory(site=site)
    site.full_clean()

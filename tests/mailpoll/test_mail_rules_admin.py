"""Mail rules and the triage queue in the admin: org-scoped, checked on save, previewed, routed once."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from jobs.models import Job
from mailpoll.models import Attachment, AttachmentStatus, MailRule
from mailpoll.sync.store import store_message
from seoinsight.metrics import DatabaseCollector
from tests.factories import OrgFactory, SiteTargetFactory, UserFactory
from tests.mailpoll.factories import CSV, MailboxFactory, MailRuleFactory, mail

pytestmark = pytest.mark.django_db

RULES_URL = reverse("admin:mailpoll_mailrule_changelist")
ADD_URL = reverse("admin:mailpoll_mailrule_add")
ATTACHMENTS_URL = reverse("admin:mailpoll_attachment_changelist")
WAITING_URL = f"{ATTACHMENTS_URL}?status__exact=needs_route"


def staff_of(org, *codenames):
    user = UserFactory(is_staff=True, org=org)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return user


def operator(client, org):
    user = staff_of(org, "view_mailrule", "add_mailrule", "change_mailrule", "view_attachment", "change_attachment")
    client.force_login(user)
    return user


def waiting_csv(mailbox, uid=1, sender="ana@acme.example", subject="Weekly SEO report") -> Attachment:
    store_message(mailbox, "INBOX", uid, mail(subject, sender=sender, attachments=[("Pages.csv", CSV, "text/csv")]))
    return Attachment.objects.get(request__uid=uid, request__mailbox=mailbox)


def rule_form(org, target, **overrides) -> dict:
    data = {"org": org.pk, "name": "Acme", "position": "100", "enabled": "on", "folder": "", "sender": "acme.example",
            "recipient": "", "plus_tag": "", "subject_contains": "", "subject_regex": "", "filename": "",
            "sender_auth": "", "action": "route", "site_target": target.pk}
    return {**data, **overrides}


@pytest.fixture
def org():
    return OrgFactory(id="agency")


@pytest.fixture
def intake(org):
    return MailboxFactory(org=org, site_target=None, name="reports@agency")


def test_a_rule_is_saved_in_its_org_and_listed_with_its_conditions(client, org):
    target = SiteTargetFactory(site__org=org)
    operator(client, org)
    response = client.post(ADD_URL, rule_form(org, target, kinds=["csv", "excel"], plus_tag=" ACME "))
    assert response.status_code == 302, response.context["adminform"].form.errors
    rule = MailRule.objects.get()
    assert (rule.org_id, rule.site_target_id, rule.kinds, rule.plus_tag) == ("agency", target.pk, ["csv", "excel"],
                                                                             "acme")
    listing = client.get(RULES_URL).content.decode()
    assert "from acme.example; tag acme; kind csv, excel" in listing


@pytest.mark.parametrize(("overrides", "field", "message"), [
    ({"subject_regex": r"(report)\1"}, "subject_regex", "backreferences and lookaround are not supported"),
    ({"site_target": ""}, "site_target", "A rule that routes needs the site target"),
    ({"action": "ignore"}, "site_target", "Only a rule that routes names a site target"),
])
def test_a_rule_that_could_not_run_as_written_is_refused(client, org, overrides, field, message):
    operator(client, org)
    response = client.post(ADD_URL, rule_form(org, SiteTargetFactory(site__org=org), **overrides))
    assert response.status_code == 200
    assert message in " ".join(response.context["adminform"].form.errors[field])
    assert not MailRule.objects.exists()


def test_a_member_of_two_orgs_cannot_route_one_orgs_mail_into_the_others_site(client, org):
    other = OrgFactory()
    user = staff_of(org, "view_mailrule", "add_mailrule")
    user.memberships.create(org=other)
    client.force_login(user)
    response = client.post(ADD_URL, rule_form(org, SiteTargetFactory(site__org=other)))
    assert "This site target belongs to another org." in response.context["adminform"].form.errors["site_target"]
    assert not MailRule.objects.exists()


def test_another_orgs_rules_are_out_of_sight(client, org):
    theirs = MailRuleFactory(org=OrgFactory(), name="their rule")
    operator(client, org)
    assert "their rule" not in client.get(RULES_URL).content.decode()
    assert client.get(reverse("admin:mailpoll_mailrule_change", args=[theirs.pk])).status_code == 404
    target = SiteTargetFactory(site__org=org)
    response = client.post(reverse("admin:mailpoll_mailrule_preview", args=[theirs.pk]), rule_form(org, target))
    assert response.status_code == 404


def test_the_preview_shows_what_the_unsaved_rule_would_do_to_recent_mail(client, org, intake):
    waiting_csv(intake, 1, sender="ana@acme.example")
    waiting_csv(intake, 2, sender="bob@globex.example")
    MailRuleFactory(org=org, name="earlier", position=1, sender="acme.example", subject_contains="monthly")
    target = SiteTargetFactory(site__org=org, url_prefix="https://acme.example/")
    operator(client, org)

    response = client.post(reverse("admin:mailpoll_mailrule_preview_add"), rule_form(org, target))
    page = response.content.decode()
    assert response.status_code == 200
    assert "this rule matches 1 document" in page and "ana@acme.example" in page
    assert "bob@globex.example" not in page
    assert response.context["rows"][0]["target"] == str(target)
    assert response.context["rows"][0]["reason"] == "routed by rule 'Acme'"
    assert not MailRule.objects.filter(name="Acme").exists()  # nothing saved

    refused = client.post(reverse("admin:mailpoll_mailrule_preview_add"), rule_form(org, target, subject_regex="("))
    assert "nothing was previewed" in refused.content.decode()


def test_the_preview_says_when_an_earlier_rule_decides_first(client, org, intake):
    waiting_csv(intake, 1)
    MailRuleFactory(org=org, name="earlier", position=1, action="ignore")
    operator(client, org)
    response = client.post(reverse("admin:mailpoll_mailrule_preview_add"),
                           rule_form(org, SiteTargetFactory(site__org=org), position="50"))
    (row,) = response.context["rows"]
    assert (row["action"], row["earlier_rule"]) == ("ignore", "earlier")
    assert "(rule 'earlier' comes first)" in response.content.decode()


def test_the_index_says_what_waits_and_the_list_shows_why(client, org, intake):
    waiting_csv(intake, 1)
    waiting_csv(MailboxFactory(site_target=None), 2)  # another org's: not counted here
    operator(client, org)
    index = client.get(reverse("admin:index")).content.decode()
    assert 'id="waiting-for-you"' in index
    assert f'<a href="{WAITING_URL}">Documents waiting for a site</a>' in index.replace("&amp;", "&")
    assert "<strong>1</strong>" in index
    listing = client.get(WAITING_URL).content.decode()
    assert "ana@acme.example" in listing and "Pages.csv" in listing
    assert "no rule matched and the mailbox has no site target" in listing


def test_the_index_shows_no_queue_to_a_user_who_may_not_view_it(client, org, intake):
    waiting_csv(intake, 1)
    client.force_login(staff_of(org, "view_mailrule"))
    assert 'id="waiting-for-you"' not in client.get(reverse("admin:index")).content.decode()


def test_route_to_asks_for_a_target_of_the_documents_org_then_imports_once(client, org, intake):
    document = waiting_csv(intake, 1)
    target = SiteTargetFactory(site__org=org, url_prefix="https://acme.example/")
    foreign = SiteTargetFactory()
    user = operator(client, org)
    ask = client.post(ATTACHMENTS_URL, {"action": "route_to", "_selected_action": [document.pk]})
    page = ask.content.decode()
    # As options: the selected documents' ids are in the page too, and one may equal the foreign target's.
    assert f'<option value="{target.pk}">' in page and f'<option value="{foreign.pk}">' not in page

    forged = client.post(ATTACHMENTS_URL, {"action": "route_to", "_selected_action": [document.pk], "apply": "1",
                                           "target": foreign.pk})
    assert forged.status_code == 302
    document.refresh_from_db()
    assert document.status == AttachmentStatus.NEEDS_ROUTE

    client.post(ATTACHMENTS_URL, {"action": "route_to", "_selected_action": [document.pk], "apply": "1",
                                  "target": target.pk})
    again = client.post(ATTACHMENTS_URL, {"action": "route_to", "_selected_action": [document.pk], "apply": "1",
                                          "target": target.pk}, follow=True)
    assert "None of the selected documents waits for a site." in again.content.decode()
    document.refresh_from_db()
    assert (document.status, document.site_target_id) == (AttachmentStatus.PENDING, target.pk)
    assert document.route_reason == f"routed by {user.username} in the admin"
    assert Job.objects.filter(type="process_attachment", payload__attachment_id=document.pk).count() == 1


def test_make_a_rule_from_this_opens_a_prefilled_rule(client, org, intake):
    document = waiting_csv(intake, 1, sender="ana@acme.example", subject="Weekly SEO report")
    operator(client, org)
    page = client.get(reverse("admin:mailpoll_attachment_change", args=[document.pk])).content.decode()
    link = html.unescape(re.search(r'href="([^"]+)">Make a rule from this<', page).group(1))
    assert link.startswith(ADD_URL)
    # What the link says, plus a field the message cannot say: only the message's fields are prefilled.
    form = client.get(f"{link}&site_target=999").context["adminform"].form
    assert (form.initial["org"], form.initial["sender"], form.initial["subject_contains"],
            form.initial["mailboxes"]) == ("agency", "ana@acme.example", "Weekly SEO report", [str(intake.pk)])
    assert "site_target" not in form.initial


def test_metrics_count_the_documents_waiting_for_a_site(org, intake):
    waiting_csv(intake, 1)
    waiting_csv(intake, 2)
    families = {family.name: family for family in DatabaseCollector().collect()}
    samples = families["seoinsight_mail_documents_waiting_for_site"].samples
    assert [(s.labels["mailbox"], s.value) for s in samples] == [(str(intake.pk), 2)]


def test_route_to_reached_from_the_index_counts_what_it_skipped(client, org, intake):
    # The index links to the list filtered on "waits for a site": routed documents leave that filter.
    routed, other = waiting_csv(intake, 1), waiting_csv(intake, 2, subject="Another report")
    target = SiteTargetFactory(site__org=org)
    operator(client, org)
    response = client.post(WAITING_URL, {"action": "route_to", "_selected_action": [routed.pk], "apply": "1",
                                         "target": target.pk}, follow=True)
    said = [str(message) for message in response.context["messages"]]
    assert said == [f"1 document routed to {target} and queued"]
    other.refresh_from_db()
    assert other.status == AttachmentStatus.NEEDS_ROUTE

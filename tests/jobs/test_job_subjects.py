"""What a job is for, on the jobs list (jobs.subjects, and the describers imports and mailpoll register),
and the internal noop type left out of that list unless asked for."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from imports.searchconsole_api import enqueue_api_import
from jobs import subjects
from jobs.models import Job, JobStatus
from tests.factories import ImportFactory, JobFactory, OrgFactory, SiteFactory, SiteTargetFactory, UserFactory
from tests.mailpoll.factories import AttachmentFactory, MailboxFactory, RequestFactory
from tests.support.fixtures import media  # noqa: F401  (fixture)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]

JOBS_URL = reverse("admin:jobs_job_changelist")


def admin_url(row) -> str:
    return reverse(f"admin:{row._meta.app_label}_{row._meta.model_name}_change", args=[row.pk])


def org_with_site(org_id: str):
    """An org, its site ``<org_id>.example`` and the site's one target."""
    org = OrgFactory(id=org_id)
    target = SiteTargetFactory(site=SiteFactory(org=org, domain=f"{org_id}.example"),
                               url_prefix=f"https://{org_id}.example/")
    return org, target


def attachment_job(attachment) -> Job:
    return JobFactory(type="process_attachment", org_id=attachment.request.org_id,
                      payload={"attachment_id": attachment.pk})


def listed(response) -> set:
    return {job.pk for job in response.context["cl"].result_list}


@pytest.mark.parametrize("payload, named", [
    ({"import_id": 7}, 7),
    ({"import_id": "8"}, 8),  # an id written as text still names its row
    ({"import_id": None}, None),
    ({}, None),
    (None, None),
    (["import_id"], None),
    ({"import_id": True}, None),  # JSON true is not the id 1
    ({"import_id": 0}, None),
    ({"import_id": -1}, None),
    ({"import_id": 2.0}, None),
    ({"import_id": "x7"}, None),
    ({"import_id": "²"}, None),  # a digit to str.isdigit, not to int()
    ({"import_id": 2**63}, None),  # past bigint: names no row, and must not reach the query
    ({"import_id": {"id": 7}}, None),
])
def test_payload_ids_keeps_what_can_be_a_row_id(payload, named):
    job = SimpleNamespace(pk="job", payload=payload)
    assert subjects.payload_ids([job], "import_id") == ({"job": named} if named else {})


def test_each_apps_job_types_are_described_by_the_row_their_payload_names():
    org, target = org_with_site("acme")
    upload = ImportFactory(site_target=target, filename="april.csv")  # the real service queues its import_csv job
    reconcile = JobFactory(type="map_reconcile", org_id="acme", payload={"site_target_id": target.pk})
    mailbox = MailboxFactory(org=org, name="Reports", site_target=target)
    routed = AttachmentFactory(request=RequestFactory(mailbox=mailbox), filename="may.csv", site_target=target)
    unrouted = AttachmentFactory(request=RequestFactory(mailbox=mailbox), filename="notes.pdf")
    orphan = AttachmentFactory(request=RequestFactory(mailbox=mailbox), filename="old.csv")
    orphan.request.mailbox = None
    orphan.request.save(update_fields=["mailbox"])
    jobs = {"upload": upload.job, "reconcile": reconcile, "routed": attachment_job(routed),
            "unrouted": attachment_job(unrouted), "orphan": attachment_job(orphan)}

    found = subjects.describe(Job.objects.filter(pk__in=[job.pk for job in jobs.values()]))

    assert {name: found[job.pk] for name, job in jobs.items()} == {
        "upload": subjects.Subject("acme.example · april.csv", type(upload), upload.pk),
        "reconcile": subjects.Subject("acme.example · target https://acme.example/", type(target), target.pk),
        "routed": subjects.Subject("acme.example · may.csv from mailbox Reports", type(routed), routed.pk),
        "unrouted": subjects.Subject("notes.pdf from mailbox Reports", type(unrouted), unrouted.pk),
        "orphan": subjects.Subject("old.csv", type(orphan), orphan.pk),  # its mailbox was deleted
    }


def test_an_api_pull_is_named_by_its_kind():
    _, target = org_with_site("acme")
    pull = ImportFactory(site_target=target)
    pull.kind, pull.original_filename = "api", ""
    pull.save(update_fields=["kind", "original_filename"])
    job = enqueue_api_import(pull)

    assert subjects.describe([job])[job.pk].label == f"acme.example · Search Console API import {pull.pk}"


def test_a_payload_naming_another_orgs_row_describes_nothing():
    _, ours = org_with_site("acme")
    globex, theirs = org_with_site("globex")
    their_import = ImportFactory(site_target=theirs)
    their_attachment = AttachmentFactory(request=RequestFactory(mailbox=MailboxFactory(org=globex)))
    jobs = [
        JobFactory(type="import_csv", org_id="acme", payload={"import_id": their_import.pk}),
        JobFactory(type="map_reconcile", org_id="acme", payload={"site_target_id": theirs.pk}),
        JobFactory(type="process_attachment", org_id="acme", payload={"attachment_id": their_attachment.pk}),
    ]
    own = JobFactory(type="map_reconcile", org_id="acme", payload={"site_target_id": ours.pk})

    assert set(subjects.describe([*jobs, own])) == {own.pk}


def test_jobs_without_a_subject_are_left_out_without_a_query(django_assert_num_queries):
    jobs = [JobFactory(type="noop"), JobFactory(type="import_csv", payload={}),
            JobFactory(type="process_attachment", payload={"attachment_id": "none"}),
            JobFactory(type="deliver_outbox", payload={"import_id": 1})]  # a key it does not read, of a type with none

    with django_assert_num_queries(0):
        assert subjects.describe(jobs) == {}


def test_a_page_of_jobs_is_described_in_one_query_per_describer(django_assert_num_queries):
    org, target = org_with_site("acme")
    imports = [ImportFactory(site_target=target) for _ in range(5)]
    mailbox = MailboxFactory(org=org)
    attachments = [AttachmentFactory(request=RequestFactory(mailbox=mailbox)) for _ in range(5)]
    jobs = list(Job.objects.filter(pk__in=[imp.job_id for imp in imports]
                                   + [attachment_job(a).pk for a in attachments]))

    with django_assert_num_queries(2):
        found = subjects.describe(jobs)
    assert len(found) == 10


# -- the jobs list ------------------------------------------------------------------------------------------


def test_the_list_and_the_job_page_link_each_job_to_its_subject(admin_client):
    org, target = org_with_site("acme")
    imp = ImportFactory(site_target=target, filename="april.csv")
    attachment = AttachmentFactory(request=RequestFactory(mailbox=MailboxFactory(org=org, name="Reports")),
                                   filename="may.csv")
    attachment_job(attachment)

    html = admin_client.get(JOBS_URL).content.decode()
    page = admin_client.get(reverse("admin:jobs_job_change", args=[imp.job_id])).content.decode()

    assert f'<a href="{admin_url(imp)}" title="acme.example · april.csv">acme.example · april.csv</a>' in html
    assert f'<a href="{admin_url(attachment)}" title="may.csv from mailbox Reports">' in html
    assert f'<a href="{admin_url(imp)}" title="acme.example · april.csv">' in page


def staff_client(client, org, *permissions: str):
    """``client`` logged in as a staff member of ``org`` holding ``permissions`` ("app.codename")."""
    user = UserFactory(is_staff=True, org=org)
    user.user_permissions.set(Permission.objects.filter(
        content_type__app_label__in={p.split(".")[0] for p in permissions},
        codename__in={p.split(".")[1] for p in permissions}))
    client.force_login(user)
    return client


def test_a_staff_user_sees_the_subject_of_their_orgs_jobs_only_and_a_link_only_where_they_may_look(client):
    org, target = org_with_site("acme")
    _, theirs = org_with_site("globex")
    imp = ImportFactory(site_target=target, filename="april.csv")
    forged = JobFactory(type="import_csv", org_id="acme",
                        payload={"import_id": ImportFactory(site_target=theirs, filename="secret.csv").pk})

    jobs_only = staff_client(client, org, "jobs.view_job").get(JOBS_URL)
    with_imports = staff_client(client, org, "jobs.view_job", "imports.view_import").get(JOBS_URL)

    assert listed(jobs_only) == {imp.job_id, forged.pk}
    for response in (jobs_only, with_imports):
        html = response.content.decode()
        assert "globex" not in html and "secret.csv" not in html
    assert 'title="acme.example · april.csv">acme.example · april.csv</span>' in jobs_only.content.decode()
    assert admin_url(imp) not in jobs_only.content.decode()
    assert f'<a href="{admin_url(imp)}"' in with_imports.content.decode()


def test_a_long_label_is_cut_on_the_list_and_whole_in_its_title(admin_client):
    _, target = org_with_site("acme")
    label = "acme.example · a-very-long-export-name-from-the-search-console-of-the-client-site.csv"
    ImportFactory(site_target=target, filename=label.split(" · ")[1])

    html = admin_client.get(JOBS_URL).content.decode()

    assert f'title="{label}">{label[:59]}…</a>' in html


def test_noop_jobs_are_hidden_by_default_and_listed_on_request(admin_client):
    _, target = org_with_site("acme")
    imp = ImportFactory(site_target=target)
    noop = JobFactory(type="noop", org_id="acme")

    default = admin_client.get(JOBS_URL)

    assert listed(default) == {imp.job_id}
    assert "?internal=shown" in default.content.decode()
    assert listed(admin_client.get(JOBS_URL, {"internal": "shown"})) == {imp.job_id, noop.pk}
    assert listed(admin_client.get(JOBS_URL, {"type": "noop"})) == {noop.pk}
    assert listed(admin_client.get(JOBS_URL, {"_facets": "1"})) == {imp.job_id}  # the filters' counts too
    assert admin_client.get(reverse("admin:jobs_job_change", args=[noop.pk])).status_code == 200


def test_an_action_reaches_a_noop_job_only_where_the_list_shows_it(admin_client):
    noop = JobFactory(type="noop", org_id="acme")
    cancel = {"action": "cancel_selected_jobs", "_selected_action": [str(noop.pk)]}

    admin_client.post(JOBS_URL, cancel)
    assert Job.objects.get(pk=noop.pk).status == JobStatus.QUEUED

    admin_client.post(f"{JOBS_URL}?internal=shown", cancel)
    assert Job.objects.get(pk=noop.pk).status == JobStatus.FAILED

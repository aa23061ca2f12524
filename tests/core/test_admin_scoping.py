"""The admin is scoped by org, for every registered ModelAdmin.

Two orgs, ``alpha`` and ``bravo``, each with one row of every model the admin
shows; a staff user who is a member of alpha only and holds every permission.
Each test iterates over ``admin.site._registry``, so a ModelAdmin registered
later is covered without a new test — and ``test_every_registered_admin_is_scoped``
fails until it is scoped and has a row in ``build_org``.
"""

import hashlib
import json
from datetime import date

import pytest
from django.contrib import admin
from django.contrib.admin import AdminSite
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.forms import ModelChoiceField
from django.test import RequestFactory
from django.urls import reverse
from django.utils import timezone

from imports.models import ColumnMapping, Import, UrlMetric
from insight.models import Alert, AlertKind, Annotation
from jobs.models import Job, ZombieJob
from outbox.models import Entry
from mailpoll.models import Attachment, AttachmentStatus, FolderCursor, Mailbox, MailRule, PostAction, Request
from seoinsight.checks import check_every_admin_is_org_scoped
from seoinsight.models import ApiToken, Membership, Org, Page, Site, SiteTarget
from seoinsight.orgscope import OrgScopedAdmin, SuperuserOnlyAdmin, org_path, unscoped_admins
from tests.core.test_admin import KEY
from tests.factories import (
    ImportFactory,
    JobFactory,
    OrgFactory,
    SiteFactory,
    SiteTargetFactory,
    UserFactory,
    api_token,
)
from tests.mailpoll.factories import AttachmentFactory, MailboxFactory
from tests.mailpoll.factories import RequestFactory as MailRequestFactory

# Some tests build zombies (zombies_possible: tests/conftest.py); build_org stores an import's file (media).
pytestmark = pytest.mark.usefixtures("zombies_possible", "media")

User = get_user_model()

SCOPED = sorted((m for m, a in admin.site._registry.items() if isinstance(a, OrgScopedAdmin)),
                key=lambda m: m._meta.label)
# Rows of no org, or of every org at once (the process list, the schedules): no org's staff reaches them.
SUPERUSER_ONLY = sorted((m for m, a in admin.site._registry.items() if isinstance(a, SuperuserOnlyAdmin)),
                        key=lambda m: m._meta.label)
AUTOCOMPLETES = sorted(
    {(model, name) for model, model_admin in admin.site._registry.items()
     for name in model_admin.autocomplete_fields}
    | {(inline.model, name) for model_admin in admin.site._registry.values() for inline in model_admin.inlines
       for name in inline.autocomplete_fields},
    key=lambda pair: (pair[0]._meta.label, pair[1]),
)


def label(model) -> str:
    return model._meta.label


def build_org(org_id: str) -> dict:
    """One row of every model the admin shows, all of org ``org_id``; every text names the org."""
    org = OrgFactory(id=org_id, name=f"{org_id.title()} Corp")
    member = UserFactory(username=f"{org_id}-member", org=org)
    token, _ = api_token(org, name=f"{org_id}-token")
    site = SiteFactory(org=org, domain=f"{org_id}.example")
    target = SiteTargetFactory(site=site, url_prefix=f"https://{org_id}.example/",
                               search_console_property=f"sc-domain:{org_id}.example")
    target.set_service_account(json.dumps(KEY))  # so the pull action would queue an import for it
    target.save()
    # An operator's type: the list hides the internal noop by default.
    job = JobFactory(org_id=org_id, type="map_reconcile", failed=True, dedup_key=f"map_reconcile:{org_id}")
    zombie = JobFactory(org_id=org_id, stale=True)
    imp = ImportFactory(site_target=target, filename=f"{org_id}-report.csv")
    metric = UrlMetric.objects.create(site_target=target, url=f"https://{org_id}.example/a",
                                      url_normalized=f"https://{org_id}.example/a", period_start=date(2026, 10, 1),
                                      period_end=date(2026, 10, 1), clicks=1, source_import=imp)
    mailbox = MailboxFactory(org=org, name=f"{org_id}-inbox", host=f"imap.{org_id}.example", security="tls",
                             username=f"reports@{org_id}.example", site_target=target)
    FolderCursor.objects.create(mailbox=mailbox, folder=f"{org_id}-folder", uidvalidity=1, last_uid=1)
    request = MailRequestFactory(mailbox=mailbox, source_ref=f"<{org_id}@mail.example>",
                                 subject=f"{org_id} report", body_text=f"{org_id} confidential body")
    attachment = AttachmentFactory(request=request, filename=f"{org_id}.csv", document_type="csv", failed=True,
                                   error=f"{org_id} failure")
    rule = MailRule.objects.create(org=org, name=f"{org_id} rule", sender=f"{org_id}.example", site_target=target)
    rule.mailboxes.add(mailbox)
    post_action = PostAction.objects.create(
        request=request, mailbox=mailbox, folder="INBOX", uid=1, uidvalidity=1, action="move",
        destination=f"{org_id}-done", decided_by="the mailbox", status="failed", attempts=8,
        last_error=f"{org_id} refused the move", next_try_at=timezone.now(), finished_at=timezone.now())
    mapping = ColumnMapping.objects.create(
        org=org, signature=hashlib.sha256(org_id.encode()).hexdigest(), headers=[f"{org_id} page", "Visits"],
        mapping={"url": f"{org_id} page", "clicks": "Visits"})
    entry = Entry.objects.create(org=org, document_ref=f"{org_id}-document", source="email",
                                 document={"filename": f"{org_id}.csv"}, last_error=f"{org_id} downstream refused")
    alert = Alert.objects.create(site=site, kind=AlertKind.PAGE_DROP, page_url=f"https://{org_id}.example/a",
                                 period_start=date(2026, 10, 1), period_end=date(2026, 10, 7), before=100, after=10)
    note = Annotation.objects.create(site=site, day=date(2026, 10, 3), text=f"{org_id} moved to HTTPS")
    return {
        Org: org, User: member, Membership: Membership.objects.get(user=member, org=org), ApiToken: token,
        Site: site, SiteTarget: target, Job: job, ZombieJob: ZombieJob.objects.get(pk=zombie.pk), Import: imp,
        UrlMetric: metric, Mailbox: mailbox, Request: request, Attachment: attachment, Entry: entry,
        MailRule: rule, PostAction: post_action, ColumnMapping: mapping, Alert: alert, Annotation: note,
    }


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    # Four users per test: the production hasher's deliberate slowness would dominate the run.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def alpha(db):
    return build_org("alpha")


@pytest.fixture
def bravo(db):
    return build_org("bravo")


@pytest.fixture
def staff(alpha):
    """A staff user of alpha holding every permission, but not a superuser."""
    user = UserFactory(username="alpha-staff", is_staff=True, org=alpha[Org])
    user.user_permissions.set(Permission.objects.all())
    return user


@pytest.fixture
def staff_client(client, staff, bravo):
    client.force_login(staff)
    return client


@pytest.fixture
def staff_request(staff):
    request = RequestFactory().get("/admin/")
    request.user = staff
    return request


def url(model, view, *args) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def snapshot(world: dict) -> dict:
    """Every column of every row of ``world``, and how many jobs and imports its org has."""
    rows = {label(model): list(model._base_manager.filter(pk=obj.pk).values()) for model, obj in world.items()}
    org_id = world[Org].pk
    rows["job count"] = Job.objects.filter(org_id=org_id).count()
    rows["import count"] = Import.objects.filter(org_id=org_id).count()
    return rows


def assert_no_trace_of_bravo(response):
    html = response.content.decode().lower()
    assert "bravo" not in html, html[max(html.find("bravo") - 300, 0):html.find("bravo") + 100]


# -- The guard ----------------------------------------------------------------------------------------------


def test_every_registered_admin_is_scoped_and_covered_here(alpha):
    assert unscoped_admins() == [], (
        "Mix in seoinsight.orgscope.OrgScopedAdmin (OrgScopedInline for an inline), or SuperuserOnlyAdmin "
        "for a model that belongs to no org"
    )
    assert check_every_admin_is_org_scoped() == []
    missing = [label(m) for m in SCOPED if m not in alpha]
    assert missing == [], f"add a row of {missing} to build_org() so these tests cover its admin"


def test_an_unscoped_admin_or_inline_is_reported():
    site = AdminSite(name="probe")
    site.register(Page)

    class PlainInline(admin.TabularInline):
        model = Site

    class ScopedOrgAdmin(OrgScopedAdmin, admin.ModelAdmin):
        inlines = [PlainInline]

    site.register(Org, ScopedOrgAdmin)

    found = unscoped_admins(site)

    assert len(found) == 2
    assert "admin of seoinsight.Page" in found[0]
    assert "PlainInline (inline of" in found[1]


@pytest.mark.parametrize("model, path", [
    (Org, "pk"),
    (Membership, "org"),
    (ApiToken, "org"),
    (Site, "org"),
    (SiteTarget, "site__org"),
    (Page, "site_target__site__org"),
    (Job, "org_id"),          # the seed's org_id TEXT, no foreign key
    (ZombieJob, "org_id"),    # a proxy
    (Import, "org"),          # its own org, not the longer way through site_target
    (UrlMetric, "site_target__site__org"),  # never through the nullable source_import
    (Mailbox, "org"),
    (FolderCursor, "mailbox__org"),
    (Request, "org"),
    (Attachment, "request__org"),
    (User, "memberships__org"),
    (Group, None),
], ids=lambda v: v if isinstance(v, str) or v is None else label(v))
def test_org_path(model, path):
    assert org_path(model) == path


# -- Every registered admin ---------------------------------------------------------------------------------


@pytest.mark.parametrize("model", SCOPED, ids=label)
def test_the_list_shows_only_the_staff_users_orgs(model, staff_client, alpha, bravo):
    response = staff_client.get(url(model, "changelist"))

    assert response.status_code == 200
    listed = set(response.context["cl"].queryset.values_list("pk", flat=True))
    assert alpha[model].pk in listed
    assert bravo[model].pk not in listed
    assert_no_trace_of_bravo(response)  # list filters and counts included


@pytest.mark.parametrize("model", SCOPED, ids=label)
def test_a_superuser_sees_every_org(model, admin_client, alpha, bravo):
    response = admin_client.get(url(model, "changelist"))

    listed = set(response.context["cl"].queryset.values_list("pk", flat=True))
    assert {alpha[model].pk, bravo[model].pk} <= listed
    assert admin_client.get(url(model, "change", bravo[model].pk)).status_code == 200


@pytest.mark.parametrize("model", SCOPED, ids=label)
def test_another_orgs_object_is_a_404_on_every_object_view(model, staff_client, alpha, bravo):
    theirs = bravo[model]
    for view in ("change", "history", "delete"):
        assert staff_client.get(url(model, view, theirs.pk)).status_code == 404, view
    assert staff_client.post(url(model, "delete", theirs.pk), {"post": "yes"}).status_code == 404
    assert model._base_manager.filter(pk=theirs.pk).exists()

    own = staff_client.get(url(model, "change", alpha[model].pk))
    assert own.status_code == 200
    assert_no_trace_of_bravo(own)  # choices of every select, inlines included


@pytest.mark.parametrize("model", SCOPED, ids=label)
def test_the_add_page_offers_nothing_of_another_org(model, staff_client, staff_request, bravo):
    response = staff_client.get(url(model, "add"))

    if admin.site._registry[model].has_add_permission(staff_request):
        assert response.status_code == 200
        assert_no_trace_of_bravo(response)
    else:
        assert response.status_code == 403


@pytest.mark.parametrize("model", SCOPED, ids=label)
def test_actions_on_another_orgs_rows_change_nothing(model, staff_client, staff_request, alpha, bravo):
    actions = admin.site._registry[model].get_actions(staff_request)
    before = snapshot(bravo)

    for action in actions:
        staff_client.post(url(model, "changelist"),
                          {"action": action, "_selected_action": [bravo[model].pk], "post": "yes"})

    assert snapshot(bravo) == before, f"one of {list(actions)} reached another org's rows"


@pytest.mark.parametrize("model", SCOPED, ids=label)
def test_form_choices_offer_only_the_staff_users_orgs(model, staff_request, alpha, bravo):
    """Every model-choice field of the add and change forms and of their inlines, declared fields included."""
    model_admin = admin.site._registry[model]
    forms = []
    for obj in (None, alpha[model]):
        if obj is None and not model_admin.has_add_permission(staff_request):
            continue
        forms.append(model_admin.get_form(staff_request, obj, change=obj is not None)(instance=obj))
        for formset, _ in model_admin.get_formsets_with_inlines(staff_request, obj):
            bound = formset(instance=obj or model())
            forms += [*bound.forms, bound.empty_form]

    for form in forms:
        for name, field in form.fields.items():
            if not isinstance(field, ModelChoiceField):
                continue
            related = field.queryset.model._meta.concrete_model
            if related in bravo:
                offered = set(field.queryset.values_list("pk", flat=True))
                assert bravo[related].pk not in offered, f"{type(form).__name__}.{name} offers bravo's row"


@pytest.mark.parametrize("source, field_name", AUTOCOMPLETES, ids=lambda v: v if isinstance(v, str) else label(v))
def test_autocomplete_offers_only_the_staff_users_orgs(source, field_name, staff_client, staff_request, alpha,
                                                       bravo):
    related = source._meta.get_field(field_name).remote_field.model
    response = staff_client.get(reverse("admin:autocomplete"), {
        "app_label": source._meta.app_label, "model_name": source._meta.model_name, "field_name": field_name,
        "term": "",
    })

    if not admin.site._registry[related].has_view_permission(staff_request):
        assert response.status_code == 403  # users: superuser-only, a plain scoped select in the form
        return
    assert response.status_code == 200
    offered = {row["id"] for row in response.json()["results"]}
    assert str(alpha[related].pk) in offered
    assert str(bravo[related].pk) not in offered


# -- Forged posts, users and orgs ---------------------------------------------------------------------------


def test_a_forged_post_cannot_attach_another_orgs_rows(staff_client, alpha, bravo):
    mailbox = {"org": bravo[Org].pk, "name": "stolen", "enabled": "on", "provider": "imap",
               "host": "imap.example.com", "port": "993", "security": "tls", "username": "x@example.com",
               "password": "pw", "folders": "INBOX", "poll_interval": "120", "initial_mode": "new-only",
               "initial_since": "", "site_target": bravo[SiteTarget].pk}
    refused = staff_client.post(url(Mailbox, "add"), mailbox)
    assert refused.status_code == 200
    assert set(refused.context["adminform"].form.errors) == {"org", "site_target"}

    allowed = staff_client.post(url(Mailbox, "add"), {**mailbox, "org": alpha[Org].pk,
                                                      "site_target": alpha[SiteTarget].pk})
    assert allowed.status_code == 302
    assert not Mailbox.objects.filter(org=bravo[Org], name="stolen").exists()


@pytest.mark.parametrize("model", SUPERUSER_ONLY, ids=label)
def test_a_superuser_only_list_is_refused_to_staff_holding_every_permission(model, staff_client, admin_client):
    assert staff_client.get(url(model, "changelist")).status_code == 403
    assert url(model, "changelist") not in staff_client.get(reverse("admin:index")).content.decode()
    assert admin_client.get(url(model, "changelist")).status_code == 200


def test_users_and_groups_are_for_superusers_only(staff_client, admin_client, staff, bravo):
    for model in (User, Group):
        assert staff_client.get(url(model, "changelist")).status_code == 403
    assert staff_client.get(url(User, "change", staff.pk)).status_code == 403
    assert "auth/user" not in staff_client.get(reverse("admin:index")).content.decode()
    assert admin_client.get(url(User, "change", bravo[User].pk)).status_code == 200


@pytest.mark.parametrize("model", [Org, Membership, ApiToken], ids=label)
def test_orgs_memberships_and_tokens_are_a_superusers_decision(model, staff_client, staff_request, admin_client,
                                                                alpha):
    """operator_group.LEFT_OUT: an org's settings, who belongs to it and its machine credentials."""
    own = alpha[model]
    for view, args in [("changelist", ()), ("add", ()), ("change", (own.pk,)), ("history", (own.pk,)),
                       ("delete", (own.pk,))]:
        assert staff_client.get(url(model, view, *args)).status_code == 403, view
    assert staff_client.post(url(model, "delete", own.pk), {"post": "yes"}).status_code == 403
    assert model._base_manager.filter(pk=own.pk).exists()
    model_admin = admin.site._registry[model]
    assert not model_admin.has_module_permission(staff_request)
    assert not model_admin.has_view_permission(staff_request, own)
    assert url(model, "changelist") not in staff_client.get(reverse("admin:index")).content.decode()

    assert admin_client.get(url(model, "changelist")).status_code == 200
    assert admin_client.get(url(model, "change", own.pk)).status_code == 200
    assert url(model, "changelist") in admin_client.get(reverse("admin:index")).content.decode()


def test_a_staff_user_cannot_join_an_org_or_change_its_name(staff_client, alpha, bravo):
    joined = staff_client.post(url(Membership, "add"), {"user": alpha[User].pk, "org": bravo[Org].pk})
    assert joined.status_code == 403
    assert not Membership.objects.filter(user=alpha[User], org=bravo[Org]).exists()

    renamed = staff_client.post(url(Org, "change", alpha[Org].pk), {
        "name": "Renamed", "memberships-TOTAL_FORMS": "0", "memberships-INITIAL_FORMS": "0"})
    assert renamed.status_code == 403
    assert Org.objects.get(pk=alpha[Org].pk).name == "Alpha Corp"


def test_a_staff_user_cannot_create_an_org(staff_client):
    assert staff_client.post(url(Org, "add"), {"id": "charlie", "name": "Charlie"}).status_code == 403
    assert not Org.objects.filter(pk="charlie").exists()


def test_a_staff_user_of_no_org_sees_nothing(client, alpha):
    user = UserFactory(username="nobody", is_staff=True)
    user.user_permissions.set(Permission.objects.all())
    client.force_login(user)
    for model in SCOPED:
        response = client.get(url(model, "changelist"))
        assert list(response.context["cl"].queryset) == [], label(model)


def test_counts_on_a_list_page_count_only_the_staff_users_orgs(staff_client, bravo):
    from datetime import timedelta

    from django.utils import timezone

    Attachment.objects.filter(pk=bravo[Attachment].pk).update(
        status=AttachmentStatus.PROCESSING, processing_started_at=timezone.now() - timedelta(days=1))

    response = staff_client.get(url(Attachment, "changelist"))

    assert response.context["subtitle"] is None  # "1 stuck attachment" would be bravo's

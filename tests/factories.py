"""factory-boy factories. Job factories fill in timestamps that match the state they build."""

from datetime import timedelta

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from jobs.models import Job, JobStatus
from seoinsight.models import ApiToken, Membership, Org, Site, SiteTarget


class OrgFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Org
        django_get_or_create = ("id",)

    id = factory.Sequence(lambda n: f"org{n}")
    name = factory.LazyAttribute(lambda o: o.id.title())


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.PostGenerationMethodCall("set_password", "pw-for-tests")

    @factory.post_generation
    def org(self, create, extracted, **kwargs):
        if create and extracted:
            Membership.objects.create(user=self, org=extracted)
        if create:
            self.save()


class SiteFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Site

    org = factory.SubFactory(OrgFactory)
    domain = factory.Sequence(lambda n: f"site{n}.example")


class SiteTargetFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = SiteTarget

    site = factory.SubFactory(SiteFactory)
    url_prefix = factory.LazyAttribute(lambda t: f"https://{t.site.domain}/")


def api_token(org, name="client"):
    """Create a token; returns (ApiToken, raw token)."""
    return ApiToken.issue(org, name)


class JobFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Job

    org_id = "demo"
    type = "noop"
    payload = factory.LazyFunction(dict)
    status = JobStatus.QUEUED

    class Params:
        running = factory.Trait(
            status=JobStatus.RUNNING,
            attempts=1,
            started_at=factory.LazyFunction(timezone.now),
        )
        stale = factory.Trait(
            status=JobStatus.RUNNING,
            attempts=1,
            started_at=factory.LazyFunction(lambda: timezone.now() - timedelta(hours=1)),
        )
        done = factory.Trait(
            status=JobStatus.DONE,
            attempts=1,
            started_at=factory.LazyFunction(lambda: timezone.now() - timedelta(seconds=2)),
            finished_at=factory.LazyFunction(timezone.now),
            report=factory.LazyFunction(dict),
        )
        failed = factory.Trait(
            status=JobStatus.FAILED,
            attempts=1,
            started_at=factory.LazyFunction(lambda: timezone.now() - timedelta(seconds=2)),
            finished_at=factory.LazyFunction(timezone.now),
            error="boom",
        )


def import_file(target, path, *, filename=None, period=None, user=None):
    """An Import of the file at ``path`` for ``target``, with its queued job, as the upload view makes it."""
    import uuid
    from pathlib import Path

    from django.core.files import File
    from django.db import transaction

    from imports.handlers import enqueue_import
    from imports.models import Import, ImportKind

    name = filename or Path(path).name
    imp = Import(
        org_id=target.site.org_id,
        site_target=target,
        kind=ImportKind.XLSX if name.lower().endswith(".xlsx") else ImportKind.CSV,
        uid=uuid.uuid4().hex,
        original_filename=name,
        period_start=period[0] if period else None,
        period_end=period[1] if period else None,
        created_by=user,
    )
    with open(path, "rb") as handle:
        imp.file.save(name, File(handle), save=False)
    imp.size = imp.file.size
    with transaction.atomic():
        imp.save()
        enqueue_import(imp)
    return imp

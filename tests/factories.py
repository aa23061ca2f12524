"""factory-boy factories. Job and Import factories fill in timestamps that match the state they build."""

from datetime import timedelta
from pathlib import Path

import factory
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from django.utils import timezone

from imports.models import Import, ImportStatus
from imports.services import create_import
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


# What an ImportFactory imports when given neither ``path`` nor ``content``.
EXPORT = b"Page,Clicks,Impressions,CTR,Position,Date\nhttps://site.example/a,1,10,10%,3.2,2026-11-01\n"


class ImportFactory(factory.Factory):
    """An Import made by the real service (``imports.services.create_import``): its file stored, its job queued.

    The file is ``path`` or ``content`` (bytes) named ``filename``; ``period=(start, end)``. The traits move
    the Import and its ``import_csv`` job on as a worker would: ``running`` (claimed), ``done`` (counts as
    given, the job's ``report``), ``failed`` (``error`` on both, as on_fail copies it); ``progress`` is the job's.
    """

    class Meta:
        model = Import

    class Params:
        path = None
        period = None
        queued = factory.Trait(status=ImportStatus.QUEUED)
        running = factory.Trait(status=ImportStatus.RUNNING)
        done = factory.Trait(status=ImportStatus.DONE)
        failed = factory.Trait(status=ImportStatus.FAILED, error="boom")

    site_target = factory.SubFactory(SiteTargetFactory)
    content = factory.LazyAttribute(lambda o: Path(o.path).read_bytes() if o.path else EXPORT)
    filename = factory.LazyAttribute(lambda o: Path(o.path).name if o.path else "export.csv")
    period_start = factory.LazyAttribute(lambda o: o.period[0] if o.period else None)
    period_end = factory.LazyAttribute(lambda o: o.period[1] if o.period else None)
    status = ImportStatus.QUEUED
    error = ""

    @classmethod
    def _create(cls, model_class, *, content, filename, status, error, read=0, inserted=0, updated=0, skipped=0,
                errors=0, report=None, progress=None, **service_args):
        imp = create_import(content=ContentFile(content), filename=filename, size=len(content), **service_args)
        if status == ImportStatus.QUEUED:
            return imp
        now = timezone.now()
        finished = now if status in (ImportStatus.DONE, ImportStatus.FAILED) else None
        # The claim counted an attempt and released the queue-scoped dedup key; a finished run has finished_at.
        job = {"status": JobStatus(status), "attempts": 1, "dedup_key": None, "progress": progress,
               "started_at": now - timedelta(seconds=2) if finished else now, "finished_at": finished}
        if status == ImportStatus.DONE:
            job["report"] = {} if report is None else report
        if status == ImportStatus.FAILED:
            job["error"] = error
        Job.objects.filter(pk=imp.job_id).update(**job)
        Import.objects.filter(pk=imp.pk).update(status=status, error=error, finished_at=finished, read=read,
                                                inserted=inserted, updated=updated, skipped=skipped, errors=errors)
        imp.refresh_from_db()
        return imp

"""What the Imports jobs are for, on the jobs list (``jobs.subjects``): the import, or the site target."""

from jobs import subjects
from seoinsight.models import SiteTarget

from .models import Import


def import_label(imp: Import) -> str:
    """'example.com · report.csv', or 'example.com · Search Console API import 12' for a pull."""
    return f"{imp.site_target.site} · {imp}"


def target_label(target: SiteTarget) -> str:
    return f"{target.site} · target {target}"


def register_job_subjects() -> None:
    # import_csv and import_api name their Import; map_reconcile and refresh_site_page only their site target.
    subjects.register(["import_csv", "import_api"], subjects.by_payload_id(
        "import_id", Import.objects.select_related("site_target__site"),
        org_of=lambda imp: imp.org_id, label=import_label))
    subjects.register(["map_reconcile", "refresh_site_page"], subjects.by_payload_id(
        "site_target_id", SiteTarget.objects.select_related("site"),
        org_of=lambda target: target.site.org_id, label=target_label))

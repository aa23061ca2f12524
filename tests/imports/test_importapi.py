import io
import json
from datetime import date

import pytest
from django.core.management import CommandError, call_command

from imports.models import Import, ImportKind
from jobs.models import Job
from tests.core.test_admin import KEY
from tests.factories import SiteTargetFactory

pytestmark = pytest.mark.django_db


def importapi(*args):
    out = io.StringIO()
    call_command("importapi", *[str(a) for a in args], stdout=out)
    return out.getvalue()


def test_queues_an_api_import_for_the_period():
    target = SiteTargetFactory(search_console_property="sc-domain:shop.example")
    target.set_service_account(json.dumps(KEY))
    target.save()
    out = importapi("--target", target.pk, "--start", "2026-10-01", "--end", "2026-10-28", "--totals")
    imp = Import.objects.get()
    assert (imp.kind, imp.period_start, imp.period_end) == (ImportKind.API, date(2026, 10, 1), date(2026, 10, 28))
    assert Job.objects.get(pk=imp.job_id).payload["by_date"] is False
    assert f"Import {imp.pk} queued" in out


@pytest.mark.parametrize(
    "prop, with_key, args, message",
    [
        ("", True, [], "has no Search Console property"),
        ("sc-domain:shop.example", False, [], "has no service-account key"),
        ("sc-domain:shop.example", True, ["--start", "2026-10-05", "--end", "2026-10-01"], "before --start"),
    ],
)
def test_refuses_what_cannot_work(prop, with_key, args, message):
    target = SiteTargetFactory(search_console_property=prop)
    if with_key:
        target.set_service_account(json.dumps(KEY))
        target.save()
    with pytest.raises(CommandError, match=message):
        importapi("--target", target.pk, *args)
    assert not Import.objects.exists()

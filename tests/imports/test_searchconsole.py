"""import_api: paging by startRow, resume, retries, access failures, on_fail coherence.

The token comes from a loopback token endpoint (real JWT signing and exchange);
the Search Console API is the library's HttpMockSequence, which records requests.
"""

import json
from datetime import date

import pytest

from imports import ingest, searchconsole_api, searchconsole_client
from imports.models import Import, ImportStatus, UrlMetric
from jobs import queue
from jobs.models import Job, JobStatus
from tests.factories import SiteTargetFactory
from tests.support.google import (
    ACCESS_TOKEN,
    ACCOUNT_EMAIL,
    PROPERTY,
    api_error,
    page,
    query_bodies,
    row,
    service_account_key,
)
from tests.support.processes import run_burst

START, END = date(2026, 10, 1), date(2026, 10, 3)


def pull(target, **options) -> tuple[Import, Job]:
    """Create an API import, run the queue dry (map_reconcile follows a success); return both, fresh."""
    imp = searchconsole_api.create_api_import(target, START, END, **options)
    run_burst()
    imp.refresh_from_db()
    return imp, Job.objects.get(pk=imp.job_id)


def test_pages_by_start_row_until_a_short_page(keyed_target, token_server, api, sleeps):
    http = api(
        page([row(PROPERTY + "a", "2026-10-01"), row(PROPERTY + "b", "2026-10-01")]),
        page([row(PROPERTY + "a", "2026-10-02"), row(PROPERTY + "b", "2026-10-02")]),
        page([row(PROPERTY + "a", "2026-10-03")]),
    )

    imp, job = pull(keyed_target, row_limit=2)

    assert job.status == JobStatus.DONE, job.error
    bodies = query_bodies(http)
    assert [b["startRow"] for b in bodies] == [0, 2, 4]
    assert bodies[0] == {"startDate": "2026-10-01", "endDate": "2026-10-03", "dimensions": ["page", "date"],
                         "rowLimit": 2, "startRow": 0, "dataState": "final"}
    uri, method, _, headers = http.request_sequence[0]
    assert method == "POST"
    assert "/sites/https%3A%2F%2Fwww.example.com%2F/searchAnalytics/query" in uri
    assert headers["authorization"] == f"Bearer {ACCESS_TOKEN}"
    # One token exchange, a JWT signed with the key, for the read-only scope.
    [grant] = token_server.grants
    assert grant["iss"] == ACCOUNT_EMAIL
    assert grant["scope"] == "https://www.googleapis.com/auth/webmasters.readonly"

    assert UrlMetric.objects.filter(site_target=keyed_target).count() == 5
    assert (imp.status, imp.read, imp.inserted, imp.updated, imp.error) == (ImportStatus.DONE, 5, 5, 0, "")
    assert job.progress["start_row"] == 5 and job.progress["counts"]["inserted"] == 5
    assert job.report["read"] == 5
    assert Job.objects.get(type="map_reconcile", payload__site_target_id=keyed_target.pk).status == JobStatus.DONE


def test_rows_land_in_url_metric_with_ctr_and_position(keyed_target, api, sleeps):
    http = api(page([
        row(PROPERTY + "pricing", clicks=12, impressions=340, ctr=0.03529411764705882, position=7.25),
        row("https://elsewhere.example/x"),
    ]))

    imp, job = pull(keyed_target, by_date=False)

    assert query_bodies(http)[0]["dimensions"] == ["page"]
    metric = UrlMetric.objects.get(site_target=keyed_target)
    assert (metric.url, metric.period_start, metric.period_end) == (PROPERTY + "pricing", START, END)
    assert (metric.clicks, metric.impressions) == (12, 340)
    assert metric.ctr == pytest.approx(0.03529411764705882) and metric.position == 7.25
    assert metric.source_import_id == imp.pk
    assert (imp.read, imp.inserted, imp.skipped) == (2, 1, 1)
    assert job.report["skipped_reasons"] == {"outside the site target": 1}


def test_importing_the_same_period_again_updates_rows(keyed_target, api, sleeps):
    api(page([row(PROPERTY + "a", "2026-10-01", clicks=1)]))
    pull(keyed_target)
    api(page([row(PROPERTY + "a", "2026-10-01", clicks=5)]))

    imp, _ = pull(keyed_target)

    assert (imp.inserted, imp.updated) == (0, 1)
    assert UrlMetric.objects.get(site_target=keyed_target).clicks == 5


def test_a_resumed_run_continues_at_the_checkpointed_start_row(keyed_target, api, sleeps):
    imp = searchconsole_api.create_api_import(keyed_target, START, END, row_limit=2)
    # A first run committed page 1 (rows 1-2) with its checkpoint, then its worker died.
    counts = ingest.Counts()
    first_page = [row(PROPERTY + "a", "2026-10-01"), row(PROPERTY + "b", "2026-10-01")]
    records = ingest.prepare(searchconsole_api.parsed_rows(first_page, 0), ingest.Scope(url_prefix=PROPERTY), counts)
    counts.inserted, counts.updated, _ = ingest.upsert(keyed_target.pk, imp.pk, records)
    Job.objects.filter(pk=imp.job_id).update(progress={"done": 2, "start_row": 2, "counts": counts.as_dict()})

    http = api(
        page([row(PROPERTY + "a", "2026-10-02"), row(PROPERTY + "b", "2026-10-02")]),
        page([row(PROPERTY + "a", "2026-10-03")]),
    )
    run_burst()

    assert [b["startRow"] for b in query_bodies(http)] == [2, 4]
    imp.refresh_from_db()
    assert (imp.status, imp.read, imp.inserted, imp.updated) == (ImportStatus.DONE, 5, 5, 0)
    assert UrlMetric.objects.filter(site_target=keyed_target).count() == 5


def test_429_waits_for_retry_after_then_goes_on(keyed_target, api, sleeps):
    http = api(api_error(429, "Quota exceeded", retry_after="7"), page([row(PROPERTY + "a", "2026-10-01")]))

    imp, job = pull(keyed_target)

    assert job.status == JobStatus.DONE, job.error
    assert sleeps == [7.0]
    assert [b["startRow"] for b in query_bodies(http)] == [0, 0]
    assert imp.inserted == 1


def test_5xx_is_retried_with_backoff_then_fails_clearly(keyed_target, api, sleeps):
    http = api(*[api_error(503, "Backend Error")] * searchconsole_client.MAX_ATTEMPTS)

    imp, job = pull(keyed_target)

    assert job.status == JobStatus.FAILED
    assert "Search Console API error 503 after 5 attempts: Backend Error" in job.error
    assert sleeps == [1.0, 2.0, 4.0, 8.0]
    assert len(http.request_sequence) == 5
    # on_fail: the Import tells the same story as its job.
    assert (imp.status, imp.error) == (ImportStatus.FAILED, job.error)
    assert imp.finished_at is not None


def test_no_access_to_the_property_fails_at_once_naming_it_and_the_account(keyed_target, api, sleeps):
    http = api(api_error(403, "User does not have sufficient permission for site 'https://www.example.com/'."))

    imp, job = pull(keyed_target)

    assert job.status == JobStatus.FAILED
    assert f"service account {ACCOUNT_EMAIL} has no access to Search Console property '{PROPERTY}'" in job.error
    assert "HTTP 403" in job.error
    assert len(http.request_sequence) == 1 and sleeps == []
    assert imp.status == ImportStatus.FAILED


def test_a_revoked_key_fails_at_the_token_exchange(keyed_target, token_server, api, sleeps):
    token_server.refuse = "Invalid JWT Signature."
    http = api()

    imp, job = pull(keyed_target)

    assert job.status == JobStatus.FAILED
    assert f"could not get a Search Console access token for service account {ACCOUNT_EMAIL}" in job.error
    assert "invalid_grant" in job.error
    assert http.request_sequence == []
    assert imp.status == ImportStatus.FAILED


def test_a_stored_key_that_cannot_sign_fails_clearly(keyed_target, token_server, api):
    key = service_account_key(token_server.uri)
    keyed_target.set_service_account(json.dumps({**key, "private_key": "-----BEGIN PRIVATE KEY-----\nnope\n"}))
    keyed_target.save()
    http = api()

    imp, job = pull(keyed_target)

    assert job.status == JobStatus.FAILED
    assert "the stored service-account key is not usable" in job.error
    assert http.request_sequence == [] and token_server.grants == []


def test_a_target_without_credentials_fails_clearly(db, api, token_server):
    target = SiteTargetFactory(url_prefix=PROPERTY, search_console_property=PROPERTY)
    http = api()

    imp, job = pull(target)

    assert job.status == JobStatus.FAILED
    assert f"site target {target.pk} ({target}) has no Search Console credentials" in job.error
    assert http.request_sequence == [] and token_server.grants == []
    assert (imp.status, imp.error) == (ImportStatus.FAILED, job.error)


def test_an_operator_failing_the_job_fails_the_import(keyed_target):
    imp = searchconsole_api.create_api_import(keyed_target, START, END)

    queue.mark_failed([imp.job_id], "stopped by operator")

    imp.refresh_from_db()
    assert (imp.status, imp.error) == (ImportStatus.FAILED, "stopped by operator")


@pytest.mark.parametrize("attempt, retry_after, expected", [
    (1, None, 1.0),
    (2, None, 2.0),
    (4, None, 8.0),
    (10, None, searchconsole_client.BACKOFF_MAX),
    (1, "7", 7.0),
    (3, "0", 0.0),
    (1, "-5", 0.0),
    (1, "86400", searchconsole_client.RETRY_AFTER_MAX),
    (2, "Wed, 21 Oct 2026 07:28:00 GMT", 2.0),  # an HTTP date: fall back to the backoff
])
def test_retry_delay(attempt, retry_after, expected):
    assert searchconsole_client.retry_delay(attempt, retry_after) == expected

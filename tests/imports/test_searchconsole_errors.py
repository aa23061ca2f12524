"""Search Console errors name the host only: a URL's path and query (keys in them are common, and an API or
token server may echo the request) never reach a recorded error or a log line."""

import logging
from datetime import date

import pytest

from imports import searchconsole_api, searchconsole_client
from jobs.models import Job, JobStatus
from tests.support.google import api_error
from tests.support.processes import run_burst

START, END = date(2026, 10, 1), date(2026, 10, 3)
SECRET = "s3cret-in-the-query"
ECHOED = f"https://searchconsole.googleapis.com/webmasters/v3/sites/x/searchAnalytics/query?key={SECRET}&alt=json"


def failed_pull(target) -> Job:
    imp = searchconsole_api.create_api_import(target, START, END)
    run_burst()
    imp.refresh_from_db()
    job = Job.objects.get(pk=imp.job_id)
    assert job.status == JobStatus.FAILED
    assert imp.error == job.error
    return job


@pytest.mark.parametrize("status", [400, 403, 503])
def test_an_api_error_that_echoes_the_request_url_is_recorded_with_its_host_only(keyed_target, api, sleeps,
                                                                                  caplog, status):
    caplog.set_level(logging.DEBUG)
    api(*[api_error(status, f"Request for {ECHOED} failed.")] * searchconsole_client.MAX_ATTEMPTS)

    job = failed_pull(keyed_target)

    assert "https://searchconsole.googleapis.com" in job.error
    assert SECRET not in job.error and "/searchAnalytics" not in job.error
    assert SECRET not in caplog.text  # (googleapiclient's own DEBUG line names the request it sent, no key)


def test_a_token_refusal_that_echoes_a_url_is_not_logged_with_it(keyed_target, token_server, api, sleeps, caplog):
    caplog.set_level(logging.DEBUG)
    token_server.refuse = f"Invalid JWT for {ECHOED}"
    api()

    job = failed_pull(keyed_target)

    assert "invalid_grant" in job.error
    assert SECRET not in job.error and "/searchAnalytics" not in job.error
    assert SECRET not in caplog.text  # (googleapiclient's own DEBUG line names the request it sent, no key)


def test_an_api_endpoint_with_userinfo_is_named_without_it(keyed_target, api, sleeps, monkeypatch):
    import http.client

    monkeypatch.setattr(searchconsole_client, "api_endpoint", f"https://robot:{SECRET}@127.0.0.1:9/v1/?key={SECRET}")

    class Dropping:
        def request(self, *args, **kwargs):
            raise http.client.RemoteDisconnected("Remote end closed connection without response")

    monkeypatch.setattr(searchconsole_client, "http_factory", Dropping)

    job = failed_pull(keyed_target)

    assert "could not reach the Search Console API at https://127.0.0.1 after 5 attempts" in job.error
    assert SECRET not in job.error and "robot" not in job.error

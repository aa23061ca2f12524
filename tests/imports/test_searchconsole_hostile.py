"""import_api against a Search Console API and a token endpoint that redirect or flood (issue 35).

Both are loopback servers reached through the client's real transport: a redirect is never followed (the host
it names receives nothing, no credential, no body), an answer is read to its bound and no further, and either
is a clear error recorded on the import at once, not retried.
"""

from datetime import date

import pytest

from imports import searchconsole_api, searchconsole_client
from imports.models import ImportStatus, UrlMetric
from jobs.models import Job, JobStatus
from seoinsight.bounded_http import TOKEN_BYTES
from tests.support.google import ACCOUNT_EMAIL, PROPERTY, ApiServer, api_error, page, row
from tests.support.hostile_http import Elsewhere, Flood, Redirect, Token
from tests.support.processes import run_burst

START, END = date(2026, 10, 1), date(2026, 10, 3)
ROW_LIMIT = 2  # a page's bound is then searchconsole_client.answer_bytes(2): 68,096 bytes
FLOOD = 32 * 1024 * 1024  # more than loopback's socket buffers hold: a client that stops reading is seen


@pytest.fixture
def api(monkeypatch):
    """``api(*answers)``: an ApiServer answering these, the client pointed at it; stopped at teardown."""
    started = []

    def start(*answers) -> ApiServer:
        server = ApiServer(answers).start()
        started.append(server)
        monkeypatch.setattr(searchconsole_client, "api_endpoint", server.uri)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def elsewhere():
    server = Elsewhere().start()
    yield server
    server.stop()


def failed_pull(target) -> Job:
    """Pull with ROW_LIMIT rows a page; the job failed, its error recorded on the import."""
    imp = searchconsole_api.create_api_import(target, START, END, row_limit=ROW_LIMIT)
    run_burst()
    imp.refresh_from_db()
    job = Job.objects.get(pk=imp.job_id)
    assert job.status == JobStatus.FAILED, "the pull did not fail"
    assert (imp.status, imp.error) == (ImportStatus.FAILED, job.error)
    assert UrlMetric.objects.filter(site_target=target).count() == 0
    return job


def read_before_stopping(error: str) -> int:
    return int(error.split("(read ", 1)[1].split(" before stopping", 1)[0].replace(",", ""))


# -- redirects ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("status", [302, 303, 307, 308])
def test_a_redirected_query_is_refused_and_the_other_host_receives_nothing(keyed_target, api, elsewhere, sleeps,
                                                                             status):
    server = api(Redirect(elsewhere.url("/steal?key=s3cret"), status), page([row(PROPERTY + "a", "2026-10-01")]))

    job = failed_pull(keyed_target)

    assert elsewhere.received == []
    assert (f"SearchConsoleError: the Search Console API at {server.uri.rstrip('/')} answered HTTP {status}, "
            f"a redirect to {elsewhere.url('')}, which is not followed") in job.error
    assert "s3cret" not in job.error and "/steal" not in job.error
    assert len(server.bodies) == 1 and sleeps == []  # not retried


@pytest.mark.parametrize("status", [302, 303, 307, 308])
def test_a_redirecting_token_endpoint_is_refused_and_the_other_host_receives_nothing(keyed_target, token_server,
                                                                                      api, elsewhere, sleeps,
                                                                                      status):
    token_server.hostile.append(Redirect(elsewhere.url("/token"), status))
    server = api(page([row(PROPERTY + "a", "2026-10-01")]))

    job = failed_pull(keyed_target)

    assert elsewhere.received == []  # neither the signed assertion nor anything else
    assert job.error.startswith(
        f"SearchConsoleError: could not get a Search Console access token for service account {ACCOUNT_EMAIL}: "
        f"the token endpoint at {token_server.uri.removesuffix('/token')} answered HTTP {status}, a redirect to "
        f"{elsewhere.url('')}, which is not followed")
    assert token_server.hostile == [] and token_server.grants == [] and sleeps == []
    assert server.bodies == []


# -- answers past their bound ------------------------------------------------------------------------------

@pytest.mark.parametrize("length", ["true", "none", "chunked", 10 ** 12, 1000])
def test_a_flooding_api_is_read_to_the_bound_and_no_further(keyed_target, api, sleeps, length):
    flood = Flood(FLOOD, length=length if length != 1000 else FLOOD + 1000)  # announced a little more than sent
    server = api(flood)
    bound = searchconsole_client.answer_bytes(ROW_LIMIT)

    job = failed_pull(keyed_target)

    assert (f"SearchConsoleError: the Search Console API at {server.uri.rstrip('/')} answered more than "
            f"{bound:,} bytes for a page of at most {ROW_LIMIT:,} rows (read ") in job.error
    assert bound < read_before_stopping(job.error) <= bound + 1
    assert flood.sent < FLOOD  # the connection was closed under it
    assert len(server.bodies) == 1 and sleeps == []


def test_a_compressed_flood_is_held_to_the_bound_once_decompressed(keyed_target, api, sleeps):
    server = api(Flood(16 * 1024 * 1024, compressed=True))  # about 16 KB on the wire

    job = failed_pull(keyed_target)

    bound = searchconsole_client.answer_bytes(ROW_LIMIT)
    assert f"answered more than {bound:,} bytes for a page of at most 2 rows" in job.error
    assert len(server.bodies) == 1 and sleeps == []


@pytest.mark.parametrize("length", ["true", 10 ** 12])
def test_a_flooding_token_endpoint_is_read_to_its_bound_and_no_further(keyed_target, token_server, api, sleeps,
                                                                        length):
    flood = Flood(FLOOD, length=length)
    token_server.hostile.append(flood)
    server = api(page([]))

    job = failed_pull(keyed_target)

    assert job.error.startswith(
        f"SearchConsoleError: could not get a Search Console access token for service account {ACCOUNT_EMAIL}: "
        f"the token endpoint at {token_server.uri.removesuffix('/token')} answered more than {TOKEN_BYTES:,} "
        "bytes, which is no token (read ")
    assert TOKEN_BYTES < read_before_stopping(job.error) <= TOKEN_BYTES + 1
    assert flood.sent < FLOOD
    assert token_server.grants == [] and sleeps == [] and server.bodies == []


def test_a_token_renewed_during_the_pull_is_held_to_its_own_bound(keyed_target, token_server, api, sleeps):
    """The API refuses the token mid-pull (401): the renewal is a token request too, bounded and named."""
    flood = Flood(FLOOD)
    token_server.hostile.extend([Token(), flood])  # the pull's first token, then the renewal's answer
    full = page([row(PROPERTY + "a", "2026-10-01"), row(PROPERTY + "b", "2026-10-01")])
    server = api(full, api_error(401, "Request had invalid authentication credentials."), page([]))

    imp = searchconsole_api.create_api_import(keyed_target, START, END, row_limit=ROW_LIMIT)
    run_burst()
    imp.refresh_from_db()

    assert imp.status == ImportStatus.FAILED
    assert imp.error.startswith(
        f"SearchConsoleError: could not get a Search Console access token for service account {ACCOUNT_EMAIL}: "
        f"the token endpoint at {token_server.uri.removesuffix('/token')} answered more than {TOKEN_BYTES:,} "
        "bytes, which is no token (read ")
    assert token_server.hostile == [] and flood.sent < FLOOD and sleeps == []
    assert len(server.bodies) == 2  # the second page was asked for once, refused, and not again
    assert UrlMetric.objects.filter(site_target=keyed_target).count() == 2  # the first page stays


def test_a_token_refused_mid_pull_is_renewed_once_and_the_pull_goes_on(keyed_target, token_server, api, sleeps):
    full = page([row(PROPERTY + "a", "2026-10-01"), row(PROPERTY + "b", "2026-10-01")])
    server = api(full, api_error(401, "Request had invalid authentication credentials."), page([]))

    imp = searchconsole_api.create_api_import(keyed_target, START, END, row_limit=ROW_LIMIT)
    run_burst()
    imp.refresh_from_db()

    assert imp.status == ImportStatus.DONE, imp.error
    assert len(token_server.grants) == 2 and len(server.bodies) == 3 and sleeps == []


def test_a_token_refused_again_after_its_renewal_means_no_access(keyed_target, token_server, api, sleeps):
    refused = api_error(401, "Request had invalid authentication credentials.")
    server = api(refused, refused, page([]))

    job = failed_pull(keyed_target)

    assert f"has no access to Search Console property {PROPERTY!r} (HTTP 401" in job.error
    assert len(token_server.grants) == 2 and len(server.bodies) == 2 and sleeps == []


def test_a_page_within_its_bound_is_read(keyed_target, api, sleeps):
    """The bound is the page's: a full page of long URLs passes."""
    long_url = PROPERTY + "x" * 1000
    api(page([row(f"{long_url}{n}", "2026-10-01") for n in range(ROW_LIMIT)]), page([]))

    imp = searchconsole_api.create_api_import(keyed_target, START, END, row_limit=ROW_LIMIT)
    run_burst()
    imp.refresh_from_db()

    assert imp.status == ImportStatus.DONE, imp.error
    assert UrlMetric.objects.filter(site_target=keyed_target).count() == ROW_LIMIT

"""import_api against real sockets on loopback that drop or refuse connections.

The API is ``tests.support.google.ApiServer`` (``searchconsole_client.api_endpoint``),
reached through the real ``httplib2.Http``; the token endpoint is TokenServer.
"""

import http.client
from datetime import date

import httplib2
import pytest
from google.auth.exceptions import TransportError

from imports import searchconsole_api, searchconsole_client
from imports.models import ImportStatus, UrlMetric
from jobs.models import Job, JobStatus
from tests.support.google import PROPERTY, ApiServer, keyed_site_target, page, row
from tests.support.loopback import free_port
from tests.support.processes import run_burst

START, END = date(2026, 10, 1), date(2026, 10, 3)
ROWS = [row(PROPERTY + "a", "2026-10-01"), row(PROPERTY + "b", "2026-10-02")]


@pytest.fixture
def servers():
    """Start ApiServers; all are stopped at teardown."""
    started = []

    def start(*args, **kwargs) -> ApiServer:
        server = ApiServer(*args, **kwargs).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def endpoint(monkeypatch):
    def point_at(uri: str) -> str:
        monkeypatch.setattr(searchconsole_client, "api_endpoint", uri)
        return uri

    return point_at


class Sleeps(list):
    then = staticmethod(lambda: None)


@pytest.fixture
def sleeps(monkeypatch):
    """The pauses between retries, recorded instead of slept; ``sleeps.then`` runs at each one."""
    slept = Sleeps()

    def sleep(seconds):
        slept.append(seconds)
        slept.then()

    monkeypatch.setattr(searchconsole_client, "sleep", sleep)
    return slept


def pull(target):
    imp = searchconsole_api.create_api_import(target, START, END)
    run_burst()
    imp.refresh_from_db()
    return imp, Job.objects.get(pk=imp.job_id)


def test_dropped_connections_are_retried_then_the_pull_goes_on(keyed_target, servers, endpoint, sleeps):
    api = servers([page(ROWS)], drop=3)
    endpoint(api.uri)

    imp, job = pull(keyed_target)

    assert job.status == JobStatus.DONE, job.error
    assert api.dropped == 3 and len(api.bodies) == 1
    assert sleeps and sleeps == [searchconsole_client.retry_delay(n, None) for n in range(1, len(sleeps) + 1)]
    assert UrlMetric.objects.filter(site_target=keyed_target).count() == 2
    assert imp.status == ImportStatus.DONE


def test_a_refused_connection_is_retried_until_the_api_listens(keyed_target, servers, endpoint, sleeps):
    port = free_port()
    endpoint(f"http://127.0.0.1:{port}/")
    api = []
    sleeps.then = lambda: api or api.append(servers([page(ROWS)], port=port))  # up after the first refusal

    imp, job = pull(keyed_target)

    assert job.status == JobStatus.DONE, job.error
    assert sleeps == [1.0]
    assert len(api[0].bodies) == 1 and imp.inserted == 2


def test_an_api_that_keeps_refusing_fails_after_the_retries_naming_the_endpoint(keyed_target, endpoint, sleeps):
    port = free_port()
    endpoint(f"http://127.0.0.1:{port}/")

    imp, job = pull(keyed_target)

    assert job.status == JobStatus.FAILED
    assert job.error.startswith(f"SearchConsoleError: could not reach the Search Console API at "
                                f"http://127.0.0.1:{port} after {searchconsole_client.MAX_ATTEMPTS} attempts: "
                                f"connection refused (ConnectionRefusedError: ")
    assert sleeps == [1.0, 2.0, 4.0, 8.0]
    assert (imp.status, imp.error) == (ImportStatus.FAILED, job.error)


def test_an_api_that_keeps_dropping_fails_after_the_retries_naming_the_endpoint(keyed_target, servers, endpoint,
                                                                                sleeps):
    api = servers([], drop=1000)
    endpoint(api.uri)

    imp, job = pull(keyed_target)

    assert job.status == JobStatus.FAILED
    assert f"could not reach the Search Console API at {api.uri.rstrip('/')} after 5 attempts" in job.error
    assert "connection closed without an answer (RemoteDisconnected" in job.error
    assert len(sleeps) == searchconsole_client.MAX_ATTEMPTS - 1


def test_a_refusing_token_endpoint_is_retried_then_named(db, settings, servers, endpoint, sleeps):
    token_uri = f"http://127.0.0.1:{free_port()}/token"
    settings.SEARCH_CONSOLE_TOKEN_URIS = [token_uri]
    target = keyed_site_target(PROPERTY, token_uri)
    api = servers([page(ROWS)])
    endpoint(api.uri)

    imp, job = pull(target)

    assert job.status == JobStatus.FAILED
    assert (f"could not reach Google's token endpoint at {token_uri.removesuffix('/token')} after 5 attempts: "
            "connection refused") in job.error
    assert len(sleeps) == searchconsole_client.MAX_ATTEMPTS - 1 and api.bodies == []


@pytest.mark.parametrize("error, expected", [
    (ConnectionRefusedError(111, "Connection refused"), "connection refused (ConnectionRefusedError: "),
    (http.client.RemoteDisconnected("Remote end closed connection without response"),
     "connection closed without an answer (RemoteDisconnected: Remote end closed"),
    (ConnectionResetError(104, "Connection reset by peer"), "connection reset (ConnectionResetError"),
    (TimeoutError("timed out"), "timed out ("),
    (httplib2.ServerNotFoundError("Unable to find the server at x"), "host not found (ServerNotFoundError"),
    (TransportError(http.client.RemoteDisconnected("gone")), "connection closed without an answer"),
    (http.client.IncompleteRead(b"abc", 10), "connection failed (IncompleteRead"),
    (TransportError("a message, no network error under it"), None),
    (ValueError("not the network"), None),
])
def test_network_failure(error, expected):
    found = searchconsole_client.network_failure(error)
    assert found == expected if expected is None else found.startswith(expected)

"""The import tests use the shared fixtures (tests/support/fixtures.py), and these for the Search Console API."""

import pytest

from imports import searchconsole_client
from tests.support.fixtures import acme, keyed_target, media, member, target, target_domain, token_server  # noqa: F401
from tests.support.tmpfs import media_tmpfs  # noqa: F401


@pytest.fixture
def api(monkeypatch):
    """``api(*responses)`` makes the API answer these, in order; returns the mock (it records requests)."""
    from googleapiclient.http import HttpMockSequence

    def respond(*responses):
        http = HttpMockSequence(list(responses))
        monkeypatch.setattr(searchconsole_client, "http_factory", lambda: http)
        return http

    return respond


@pytest.fixture
def sleeps(monkeypatch):
    """The pauses between the client's retries, recorded instead of slept."""
    slept = []
    monkeypatch.setattr(searchconsole_client, "sleep", slept.append)
    return slept

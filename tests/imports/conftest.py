"""Fixtures shared by the import tests.

``acme``, ``target`` and ``member``: an org with one site target and a logged-in
member, for the upload pages (a module with a ``target`` of its own uses that
one). ``media``: a MEDIA_ROOT of the test's own. ``token_server``: the loopback
OAuth endpoint the Search Console tests' keys point at.
"""

import pytest

from tests.factories import OrgFactory, SiteFactory, SiteTargetFactory, UserFactory
from tests.support.google import TokenServer


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def acme():
    return OrgFactory(id="acme", name="Acme Corp")


@pytest.fixture
def target(acme):
    return SiteTargetFactory(site=SiteFactory(org=acme, domain="acme.example"), url_prefix="https://acme.example/")


@pytest.fixture
def member(client, acme):
    user = UserFactory(username="ana", org=acme)
    client.force_login(user)
    return user


@pytest.fixture
def token_server(settings):
    server = TokenServer().start()
    settings.SEARCH_CONSOLE_TOKEN_URIS = [server.uri]  # only Google's endpoint otherwise
    yield server
    server.stop()

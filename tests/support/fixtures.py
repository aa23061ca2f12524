"""Fixtures shared by the test packages: their one copy.

``media``: a MEDIA_ROOT of the test's own. ``acme``, ``target`` and ``member``: an
org with one site target (``acme.example``; a module whose data is on another
domain overrides ``target_domain``) and a logged-in member, for the upload pages.
``token_server``: the loopback OAuth endpoint, the only one allowed;
``keyed_target``: a target of the Search Console property ``google.PROPERTY``
whose key gets its tokens there.

A conftest makes them available below it by importing them by name. A test
whose processes must see the rows asks for ``transactional_db`` (or marks itself
``django_db(transaction=True)``): the fixtures here that need the database take
it through ``db``, which is then transactional too.
"""

import pytest

from tests.factories import OrgFactory, SiteFactory, SiteTargetFactory, UserFactory
from tests.support.google import PROPERTY, TokenServer, keyed_site_target


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def acme(db):
    return OrgFactory(id="acme", name="Acme Corp")


@pytest.fixture
def target_domain():
    """The domain of ``target``'s site and URL prefix."""
    return "acme.example"


@pytest.fixture
def target(acme, target_domain):
    return SiteTargetFactory(site=SiteFactory(org=acme, domain=target_domain), url_prefix=f"https://{target_domain}/")


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


@pytest.fixture
def keyed_target(db, token_server):
    return keyed_site_target(PROPERTY, token_server.uri)

import pytest
from django.contrib.auth.models import Permission

from tests.factories import OrgFactory, UserFactory
from tests.mailpoll.factories import MailboxFactory
from tests.support import fake_graph
from tests.support.dovecot import dovecot  # noqa: F401  (session fixture: one real Dovecot per run)
from tests.support.fake_imap import FakeImapServer
from tests.support.fake_oauth import CLIENT_ID, CLIENT_SECRET, FakeTokenEndpoint
from tests.support.fixtures import media  # noqa: F401  (fixture)
from tests.support.gmail_mailboxes import gmail  # noqa: F401  (fixture: a FakeGmail the settings point at)


@pytest.fixture(autouse=True)
def own_media(media):  # noqa: F811  (the shared fixture, imported above)
    """Every mail test stores its files under a MEDIA_ROOT of its own."""
    return media


@pytest.fixture
def imap_mailbox(dovecot, db):  # noqa: F811  (the session fixture, imported above)
    """A Mailbox pointing at a fresh Dovecot user; returns a factory taking Mailbox fields."""

    def make(user=None, **fields):
        name, password = dovecot.add_user(user)
        fields.setdefault("initial_mode", "full")
        fields.setdefault("port", dovecot.port)
        mailbox = MailboxFactory(host=dovecot.host, username=name, password=password, **fields)
        return mailbox

    return make


@pytest.fixture
def fake_imap():
    """Start FakeImapServers; all are closed at teardown (which also frees a client stuck on one)."""
    servers = []

    def start(*args, **kwargs) -> FakeImapServer:
        servers.append(FakeImapServer(*args, **kwargs))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.fixture
def graph(settings):
    """A FakeGraph the Graph and Microsoft settings point at (its CA trusted), for the poller's tests."""
    fake = fake_graph.FakeGraph(page_size=10)
    settings.MAILPOLL_GRAPH_API_URL = fake.graph_url
    settings.MAILPOLL_MICROSOFT_AUTHORITY = fake.origin
    settings.MAILPOLL_MICROSOFT_TENANT = fake_graph.TENANT
    settings.MAILPOLL_MICROSOFT_CLIENT_ID = fake_graph.CLIENT_ID
    settings.MAILPOLL_MICROSOFT_CLIENT_SECRET = fake_graph.CLIENT_SECRET
    settings.MAILPOLL_API_CA_BUNDLE = fake.ca_file
    yield fake
    fake.stop()


# -- the admin's Connect: the providers' settings pointed at a fake_oauth endpoint, and who presses it ------

@pytest.fixture
def google(settings):
    fake = FakeTokenEndpoint("google").start()
    origin = fake.uri.rsplit("/", 1)[0]
    settings.MAILPOLL_GOOGLE_AUTH_URL, settings.MAILPOLL_GOOGLE_TOKEN_URL = f"{origin}/auth", fake.uri
    settings.MAILPOLL_GMAIL_API_URL = f"{origin}/"  # getProfile: who consented
    settings.MAILPOLL_GOOGLE_CLIENT_ID, settings.MAILPOLL_GOOGLE_CLIENT_SECRET = CLIENT_ID, CLIENT_SECRET
    yield fake
    fake.stop()


@pytest.fixture
def microsoft(settings):
    fake = FakeTokenEndpoint("microsoft").start()
    settings.MAILPOLL_MICROSOFT_AUTHORITY = fake.uri.split("/organizations/")[0]
    settings.MAILPOLL_MICROSOFT_TENANT = "organizations"
    settings.MAILPOLL_MICROSOFT_CLIENT_ID, settings.MAILPOLL_MICROSOFT_CLIENT_SECRET = CLIENT_ID, CLIENT_SECRET
    yield fake
    fake.stop()


@pytest.fixture
def editor(client):
    """A staff member of one org who may change its mailboxes, logged in; ``editor.org`` is that org."""
    org = OrgFactory()
    user = UserFactory(is_staff=True, org=org)
    user.user_permissions.add(*Permission.objects.filter(codename__in=["view_mailbox", "change_mailbox"]))
    client.force_login(user)
    user.org = org
    return user

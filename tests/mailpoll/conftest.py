import pytest

from tests.mailpoll.factories import MailboxFactory
from tests.support.dovecot import dovecot  # noqa: F401  (session fixture: one real Dovecot per run)
from tests.support.fake_imap import FakeImapServer
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

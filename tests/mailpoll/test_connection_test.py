"""*Test connection* (issue 24 §4): a headline in plain words; the details name kinds of error, never a server's words.

The classification (``providers.diagnosis``) against a table of exceptions; then the real thing: the real
Dovecot (a good login, a wrong password, a missing folder), a closed port, a host name that resolves to
nothing (``*.invalid``, answered by a resolver stub at the socket level so no query leaves the machine), a TLS
server on loopback whose certificate is not trusted or names another host, a server that never answers, and
the Gmail and Graph fakes; and the admin's button and action, org-scoped, changing nothing.
"""

import logging
import socket
import ssl
import threading
from types import SimpleNamespace

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from imapclient.exceptions import IMAPClientError, LoginError

from mailpoll.models import FolderCursor, Mailbox, Request
from mailpoll.oauth import tokens as oauth
from mailpoll.oauth.apps import NotConfigured, NotConnected, NotGranted
from mailpoll.oauth.tokens import NeedsReauthorization, TokenRefreshError
from mailpoll.providers.base import FolderError, PollInterrupted, ProviderError
from mailpoll.providers.changes import Throttled
from mailpoll.providers.diagnosis import headline
from mailpoll.sync.connection_check import check
from seoinsight.crypto import SecretUnreadable
from tests.factories import OrgFactory, UserFactory
from tests.mailpoll.factories import MailboxFactory, mail
from tests.support.fake_graph import USER as GRAPH_USER
from tests.support.gmail_mailboxes import gmail_mailbox
from tests.support.loopback import Listener, free_port, tls_files

MAILBOXES_URL = reverse("admin:mailpoll_mailbox_changelist")
GRANT = SimpleNamespace(pk=1, mailbox_id=2, provider="google")


def wrapped(outer: BaseException, inner: BaseException) -> BaseException:
    """``outer`` raised from ``inner``, as a provider wraps what failed under it."""
    outer.__cause__ = inner
    return outer


def cut(outer: BaseException, inner: BaseException) -> BaseException:
    """``outer`` raised ``from None`` while handling ``inner``: the cause hidden, as the API sources do."""
    outer.__context__, outer.__suppress_context__ = inner, True
    return outer


def certificate_error(code: int) -> ssl.SSLCertVerificationError:
    error = ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
    error.verify_code = code
    return error


@pytest.mark.parametrize("exc, folder, expected", [
    (wrapped(ProviderError("h:993: gaierror: [Errno -2] Name or service not known"),
             socket.gaierror(-2, "Name or service not known")), None, "host not found"),
    (wrapped(ProviderError("h:993: ConnectionRefusedError"), ConnectionRefusedError(111, "refused")), None,
     "connection refused"),
    (wrapped(ProviderError("h:993"), certificate_error(62)), None, "certificate not valid for this host"),
    (wrapped(ProviderError("h:993"), certificate_error(18)), None,
     "certificate not trusted (self-signed or unknown issuer)"),
    (wrapped(ProviderError("h:993"), certificate_error(20)), None,
     "certificate not trusted (self-signed or unknown issuer)"),
    (wrapped(ProviderError("h:993"), certificate_error(10)), None, "certificate expired"),
    (wrapped(ProviderError("h:993"), ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")), None,
     "TLS failed: check the port and the security setting"),
    (wrapped(ProviderError("IMAP login to h:143 as ana failed"),
             LoginError("b'[AUTHENTICATIONFAILED] Authentication failed.'")), None, "wrong user or password"),
    (wrapped(ProviderError("IMAP login"), LoginError("b'[UNAVAILABLE] Try again later'")), None,
     "login refused by the server"),
    (ProviderError("XOAUTH2 was refused for ana at imap.gmail.com:993, a fresh token too: b'[AUTHENTICATIONFAILED]'"),
     None, "the server refused the OAuth token"),
    (ProviderError("imap.example:993 does not offer XOAUTH2 (only PLAIN)"), None,
     "the server does not take OAuth tokens"),
    (wrapped(FolderError("h:143 Orders: select failed: Mailbox doesn't exist: Orders"),
             IMAPClientError("select failed")), "Orders", "folder Orders missing"),
    (FolderError("Gmail has no label 'Reports' (labels: INBOX)"), "Reports", "folder Reports missing"),
    (FolderError("folder Reports: Graph has no such folder (400 ErrorInvalidIdMalformed)"), "Reports",
     "folder Reports missing"),
    (FolderError("h:143 Private: select failed: [NOPERM] Permission denied"), "Private",
     "folder Private refused by the server"),
    (wrapped(PollInterrupted("h:993: the poll's deadline of 15 s passed"), ConnectionResetError(104, "reset")),
     None, "timed out"),
    (wrapped(ProviderError("h:993: TimeoutError: timed out"), TimeoutError("timed out")), None, "timed out"),
    (wrapped(ProviderError("h:993"), ConnectionResetError(104, "reset")), None, "connection closed by the server"),
    (cut(ProviderError("Gmail API at https://gmail.example could not be reached: connection refused (…)"),
         ValueError("not a network error")), None, "connection refused"),
    (ProviderError("Gmail API at https://gmail.example could not be reached: connection reset (…)"), None,
     "the server could not be reached"),
    (NeedsReauthorization(GRANT, "invalid_grant"), None, "needs re-authorization: use Connect again"),
    (wrapped(TokenRefreshError(GRANT, "no answer"), ConnectionRefusedError(111, "refused")), None,
     "the token could not be refreshed"),
    (NotConnected("mailbox=2 is not connected"), None, "not connected: use Connect"),
    (NotGranted(SimpleNamespace(pk=2), "not granted"), None,
     "this org has no grant of the deployment's identity for this address"),
    (NotConfigured("mailbox=2 has no OAuth client id"), None, "the OAuth app is not configured"),
    (SecretUnreadable("stored secret cannot be decrypted"), None, "the stored secret cannot be read: type it again"),
    (ProviderError("Google refused service account reader@p.iam for ana (unauthorized_client)"), None,
     "the provider refused the app's credentials"),
    (ProviderError("folder inbox: delta answered 403 ErrorAccessDenied: Access is denied."), None,
     "access denied to this mailbox"),
    (Throttled("Gmail kept throttling label INBOX after 5 attempts"), None,
     "the provider is throttling: try again later"),
    (ValueError("something nobody foresaw"), None, "the test failed: see the details"),
])
def test_each_failure_has_a_headline_in_plain_words(exc, folder, expected):
    assert headline(exc, folder=folder) == expected


# -- the real thing ------------------------------------------------------------------------------------------

pytestmark = pytest.mark.django_db


def test_a_good_mailbox_is_ok_with_what_its_folders_hold_and_nothing_changes(dovecot, imap_mailbox):
    mailbox = imap_mailbox(folders=["INBOX", "Orders"])
    dovecot.create_folder(mailbox.username, "Orders")
    dovecot.append_many(mailbox.username, "INBOX", [mail("one"), mail("two")])
    before = Mailbox.objects.values().get(pk=mailbox.pk)

    outcome = check(mailbox)

    assert (outcome.ok, outcome.headline) == (True, "OK: 2 folders, INBOX has 2 messages")
    assert outcome.details == ["INBOX: 2 messages", "Orders: 0 messages"]
    assert Mailbox.objects.values().get(pk=mailbox.pk) == before
    assert not Request.objects.exists() and not FolderCursor.objects.exists()
    assert b"\\Seen" not in dovecot.flags(mailbox.username, "INBOX", dovecot.uids(mailbox.username, "INBOX")[0])


def test_a_wrong_password_says_so_and_the_servers_answer_is_not_shown(dovecot, imap_mailbox, caplog):
    mailbox = imap_mailbox()
    mailbox.set_secret("not-the-password-4711")
    mailbox.save(update_fields=["secret"])

    with caplog.at_level(logging.DEBUG):
        outcome = check(mailbox)

    assert (outcome.ok, outcome.headline) == (False, "wrong user or password")
    assert "LoginError" in outcome.details[-1] and "AUTHENTICATIONFAILED" not in "".join(outcome.details)
    assert "not-the-password-4711" not in caplog.text + "".join(outcome.details)


def test_a_missing_folder_is_named_and_the_others_still_said(dovecot, imap_mailbox):
    mailbox = imap_mailbox(folders=["INBOX", "Orders"])
    dovecot.append(mailbox.username, "INBOX", mail("one"))

    outcome = check(mailbox)

    assert (outcome.ok, outcome.headline) == (False, "folder Orders missing")
    assert outcome.details[0] == "INBOX: 1 messages"
    assert outcome.details[1] == "Orders: folder Orders missing (FolderError ← error)"  # imaplib.IMAP4.error


def test_a_closed_port_is_connection_refused():
    outcome = check(MailboxFactory(host="127.0.0.1", port=free_port()))

    assert (outcome.ok, outcome.headline) == (False, "connection refused")
    assert "ConnectionRefusedError" in outcome.details[-1]


@pytest.fixture
def no_dns(monkeypatch):
    """``*.invalid`` (RFC 6761) answered as unknown here, at the socket level: no query leaves the machine."""
    resolve = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        if str(host).lower().endswith(".invalid"):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return resolve(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def test_an_unknown_host_is_host_not_found(no_dns):
    outcome = check(MailboxFactory(host="imap.mailbox.invalid", port=993, security="tls"))

    assert (outcome.ok, outcome.headline) == (False, "host not found")
    assert "gaierror" in outcome.details[-1]


@pytest.fixture
def tls_server(tmp_path):
    """A TLS server on loopback with a certificate for 127.0.0.1 signed by a CA of its own; (port, CA file)."""
    ca, cert, key = tls_files(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)

    def handshake(conn):
        try:
            with context.wrap_socket(conn, server_side=True) as tls:
                tls.sendall(b"* OK [CAPABILITY IMAP4rev1 AUTH=PLAIN] ready\r\n")
                tls.recv(1)
        except OSError:
            pass  # the client refused the certificate

    listener = Listener("tls-server", lambda conn: threading.Thread(target=handshake, args=(conn,),
                                                                    daemon=True).start())
    yield listener.port, str(ca)
    listener.close()


def test_a_certificate_of_an_unknown_issuer_is_not_trusted(tls_server):
    port, _ca = tls_server

    outcome = check(MailboxFactory(host="127.0.0.1", port=port, security="tls"))

    assert (outcome.ok, outcome.headline) == (False, "certificate not trusted (self-signed or unknown issuer)")
    assert "SSLCertVerificationError" in outcome.details[-1]


def test_a_trusted_certificate_for_another_host_is_not_valid_for_this_host(tls_server, monkeypatch):
    port, ca = tls_server
    monkeypatch.setenv("SSL_CERT_FILE", ca)  # the server's CA trusted, as the system's would be

    outcome = check(MailboxFactory(host="localhost", port=port, security="tls"))

    assert (outcome.ok, outcome.headline) == (False, "certificate not valid for this host")


def test_a_server_that_never_answers_times_out_at_the_deadline(fake_imap):
    server = fake_imap(silent=True)

    outcome = check(MailboxFactory(host=server.host, port=server.port), deadline=1)

    assert (outcome.ok, outcome.headline) == (False, "timed out: no answer within 1 s")


def test_gmail_labels_are_found_or_missing(gmail):
    assert check(gmail_mailbox()).headline == "OK: 1 folder, INBOX found"

    outcome = check(gmail_mailbox(folders=["INBOX", "Reports"]))

    assert (outcome.ok, outcome.headline) == (False, "folder Reports missing")
    assert not Request.objects.exists() and not FolderCursor.objects.exists()


def test_graph_folders_are_found_or_missing(graph):
    def graph_mailbox(folders):
        return MailboxFactory(provider="graph", auth="service", host="", security="tls", username=GRAPH_USER,
                              folders=folders)

    assert check(graph_mailbox(["inbox"])).headline == "OK: 1 folder, inbox found"

    outcome = check(graph_mailbox(["inbox", "Reports"]))

    assert (outcome.ok, outcome.headline) == (False, "folder Reports missing")
    assert not graph.requests_to("/$value")


@pytest.mark.django_db(transaction=True)  # a token is had in a transaction of its own
def test_an_oauth_mailbox_nobody_connected_says_to_connect(graph):
    outcome = check(MailboxFactory(graph_oauth=True, username=GRAPH_USER))

    assert (outcome.ok, outcome.headline) == (False, "not connected: use Connect")


# -- the admin ---------------------------------------------------------------------------------------------------

def test_the_button_shows_the_headline_and_folds_the_details(admin_client, dovecot, imap_mailbox):
    mailbox = imap_mailbox()
    url = reverse("admin:mailpoll_mailbox_test_connection", args=[mailbox.pk])

    page = admin_client.get(reverse("admin:mailpoll_mailbox_change", args=[mailbox.pk])).content.decode()
    response = admin_client.post(url)

    assert f'action="{url}"' in page and 'form="mailpoll-test-connection"' in page
    html = response.content.decode()
    assert "OK: 1 folder, INBOX has 0 messages" in html
    assert "<details><summary>details</summary>" in html
    assert admin_client.get(url).status_code == 405  # only a POST connects anywhere


@pytest.mark.django_db(transaction=True)  # a token is had in a transaction of its own
def test_a_connected_oauth_mailbox_is_tested_with_its_grants_token(admin_client, graph):
    mailbox = MailboxFactory(graph_oauth=True, username=GRAPH_USER, folders=["inbox"])
    oauth.connect(mailbox, "microsoft", refresh_token=graph.grant_refresh_token())

    response = admin_client.post(reverse("admin:mailpoll_mailbox_test_connection", args=[mailbox.pk]))

    assert "OK: 1 folder, inbox found" in response.content.decode()
    assert graph.grants_of("refresh_token")


def test_the_action_tests_each_selected_mailbox(admin_client, dovecot, imap_mailbox):
    good = imap_mailbox(name="good")
    closed = MailboxFactory(org=good.org, name="closed", host="127.0.0.1", port=free_port())

    response = admin_client.post(MAILBOXES_URL, {"action": "test_connection",
                                                 "_selected_action": [good.pk, closed.pk]})

    html = response.content.decode()
    assert "OK: 1 folder, INBOX has 0 messages" in html and "connection refused" in html
    assert html.index("closed") < html.index("good")


@pytest.fixture
def staff(client):
    """A staff member of one org, logged in, who may view its mailboxes; ``staff.grant(codename)`` adds a right."""
    org = OrgFactory()
    user = UserFactory(is_staff=True, org=org)
    user.user_permissions.add(Permission.objects.get(codename="view_mailbox"))
    client.force_login(user)
    return SimpleNamespace(org=org, client=client,
                           grant=lambda codename: user.user_permissions.add(Permission.objects.get(codename=codename)))


def test_it_needs_the_right_to_change_the_mailbox_and_stays_in_the_users_orgs(staff):
    own = MailboxFactory(org=staff.org, host="127.0.0.1", port=free_port())
    other = MailboxFactory(host="127.0.0.1", port=free_port())

    def press(mailbox):
        return staff.client.post(reverse("admin:mailpoll_mailbox_test_connection", args=[mailbox.pk]))

    assert press(own).status_code == 403
    assert "test_connection" not in staff.client.get(MAILBOXES_URL).content.decode()
    staff.grant("change_mailbox")
    assert press(own).status_code == 200
    assert press(other).status_code == 404
    refused = staff.client.post(MAILBOXES_URL, {"action": "test_connection", "_selected_action": [own.pk, other.pk]})
    assert refused.content.decode().count("connection refused") == 1

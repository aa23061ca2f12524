"""Where an org's mailbox may make the server connect (issue 35 item 9): mail ports, public addresses.

With the deployment's allowance off (the tests turn it on for their loopback servers: tests/conftest.py), the
mailbox form refuses a loopback host and a non-mail port in plain words; *Test connection* and the poller
refuse them at connect time, the listener never sees a connection; and a peer that is not IMAP (an SSH-like
banner carrying a token) is "not an IMAP server", its words shown nowhere.
"""

import socket
import threading

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from mailpoll.models import Mailbox
from mailpoll.providers import destination
from mailpoll.sync.connection_check import check
from mailpoll.sync.poller import Poller
from seoinsight import outbound
from tests.factories import OrgFactory, UserFactory
from tests.mailpoll.factories import MailboxFactory
from tests.support.loopback import Listener

pytestmark = pytest.mark.django_db

TOKEN = "s3cr3t-banner-4711"
BANNER = f"SSH-2.0-OpenSSH_9.6 internal-only-service token={TOKEN}\r\n".encode()


@pytest.fixture
def closed(settings):
    """The deployment's defaults: public addresses, ports 993 and 143."""
    settings.MAILPOLL_ALLOW_PRIVATE_HOSTS = False
    settings.MAILPOLL_EXTRA_PORTS = ""


class BannerServer:
    """A loopback service that sends an SSH-like banner with a secret to whoever connects, and counts them."""

    def __init__(self):
        self.connections = 0
        self._lock = threading.Lock()
        self.listener = Listener("banner", self._greet)
        self.host, self.port = self.listener.host, self.listener.port

    def _greet(self, conn: socket.socket) -> None:
        with self._lock:
            self.connections += 1
        try:
            conn.sendall(BANNER)
            conn.settimeout(5)
            conn.recv(1024)  # whatever the client says; then the connection is closed
        except OSError:
            pass
        finally:
            conn.close()


@pytest.fixture
def banner():
    server = BannerServer()
    yield server
    server.listener.close()


# -- the classification, pure ---------------------------------------------------------------------------------

@pytest.mark.parametrize("address, kind", [
    ("93.184.215.14", ""),
    ("2606:4700:4700::1111", ""),
    ("127.0.0.1", "loopback"),
    ("127.8.9.10", "loopback"),
    ("::1", "loopback"),
    ("10.0.0.5", "private"),
    ("172.16.3.4", "private"),
    ("192.168.1.1", "private"),
    ("fd00::1", "private"),
    ("::ffff:192.168.1.1", "private"),
    ("::ffff:127.0.0.1", "loopback"),
    ("169.254.169.254", "link-local"),
    ("fe80::1%eth0", "link-local"),
    ("0.0.0.0", "unspecified"),
    ("240.0.0.1", "reserved"),
    ("224.0.0.1", "multicast"),
    ("100.64.0.1", "not globally routed"),
    ("imap.example.com", "not an IP address"),
])
def test_each_address_is_classified(address, kind):
    assert outbound.address_kind(address) == kind


def test_a_name_that_resolves_to_one_inside_address_among_public_ones_is_refused_whole(monkeypatch):
    def getaddrinfo(host, port, *args, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", port)),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.1.2.3", port))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)

    with pytest.raises(outbound.AddressRefused, match=r"mail.partly.invalid is not a public address \(private\)"):
        outbound.public_addresses("mail.partly.invalid", 993)
    assert len(outbound.public_addresses("mail.partly.invalid", 993, allow_private=True)) == 2


@pytest.mark.parametrize("extra, port, allowed", [
    ("", 993, True), ("", 143, True), ("", 22, False), ("", 995, False),
    ("995, 1143", 1143, True), ("995", 22, False), ("*", 22, True), ("imaps", 25, False),
])
def test_mail_ports_and_the_ports_the_deployment_adds(settings, extra, port, allowed):
    settings.MAILPOLL_EXTRA_PORTS = extra
    assert (destination.port_problem(port) == "") is allowed


# -- the form --------------------------------------------------------------------------------------------------

@pytest.fixture
def staff(client):
    """A staff user of one org who may add mailboxes."""
    org = OrgFactory()
    user = UserFactory(is_staff=True, org=org)
    user.user_permissions.add(*Permission.objects.filter(codename__in=["view_mailbox", "add_mailbox",
                                                                       "change_mailbox"]))
    client.force_login(user)
    client.org = org
    return client


def imap_mailbox_form(org, **overrides) -> dict:
    return {"org": org.pk, "name": "probe", "enabled": "on", "provider": "imap", "auth": "password",
            "username": "agent", "password": "pw", "host": "127.0.0.1", "port": "22", "security": "none",
            "client_id": "", "tenant": "", "new_app_secret": "", "folders": "INBOX", "poll_interval": "120",
            "initial_mode": "full", "initial_since": "", "site_target": "", **overrides}


def test_the_form_refuses_a_loopback_host_and_a_port_that_is_no_mail_port(closed, staff):
    response = staff.post(reverse("admin:mailpoll_mailbox_add"), imap_mailbox_form(staff.org))

    assert response.status_code == 200, "the form was accepted"
    errors = response.context["adminform"].form.errors
    assert errors["port"] == ["Port 22 is not an IMAP port: a mailbox may use 143, 993 (MAILPOLL_EXTRA_PORTS adds "
                              "others)."]
    assert errors["host"] == ["127.0.0.1 is not a public address (loopback): a mailbox's server must be on the "
                              "internet (MAILPOLL_ALLOW_PRIVATE_HOSTS opens others)."]
    assert not Mailbox.objects.exists()


def test_a_name_that_resolves_inside_is_refused_too(closed, staff):
    response = staff.post(reverse("admin:mailpoll_mailbox_add"),
                          imap_mailbox_form(staff.org, host="localhost", port="993", security="tls"))

    errors = response.context["adminform"].form.errors
    assert "localhost is not a public address (loopback)" in errors["host"][0]
    assert "port" not in errors
    assert not Mailbox.objects.exists()


def test_with_the_allowance_the_form_saves_a_loopback_mailbox(settings, staff):
    settings.MAILPOLL_ALLOW_PRIVATE_HOSTS, settings.MAILPOLL_EXTRA_PORTS = True, "1143"

    response = staff.post(reverse("admin:mailpoll_mailbox_add"), imap_mailbox_form(staff.org, port="1143"))

    assert response.status_code == 302, response.context["adminform"].form.errors
    assert Mailbox.objects.get().port == 1143


# -- Test connection --------------------------------------------------------------------------------------------

def test_test_connection_never_shows_what_a_non_imap_peer_said(settings, banner, admin_client):
    settings.MAILPOLL_ALLOW_PRIVATE_HOSTS, settings.MAILPOLL_EXTRA_PORTS = True, "*"  # so it does connect
    mailbox = MailboxFactory(host=banner.host, port=banner.port, security="none")

    outcome = check(mailbox)
    html = admin_client.post(reverse("admin:mailpoll_mailbox_test_connection", args=[mailbox.pk])).content.decode()

    assert banner.connections == 2
    assert (outcome.ok, outcome.headline) == (False, "not an IMAP server")
    assert "not an IMAP server" in html
    for shown in (outcome.headline, *outcome.details, html):
        assert TOKEN not in shown and "SSH-2.0" not in shown


def test_test_connection_refuses_a_loopback_port_without_connecting(closed, banner, admin_client):
    mailbox = MailboxFactory(host=banner.host, port=banner.port, security="none")

    outcome = check(mailbox)

    assert outcome.ok is False
    assert outcome.headline == (f"not allowed: port {banner.port} is not an IMAP port: a mailbox may use 143, 993 "
                                "(MAILPOLL_EXTRA_PORTS adds others)")
    assert banner.connections == 0


def test_test_connection_refuses_a_loopback_host_on_a_mail_port_and_with_tls(settings, closed, banner):
    settings.MAILPOLL_EXTRA_PORTS = str(banner.port)  # the port is allowed: the address is what refuses

    for security in ("none", "tls", "starttls"):
        outcome = check(MailboxFactory(host="localhost", port=banner.port, security=security))
        assert outcome.headline == "not allowed: localhost is not a public address (loopback)", security
    assert banner.connections == 0


def test_a_name_is_resolved_once_and_the_checked_address_is_the_one_connected_to(settings, closed, monkeypatch,
                                                                                 banner):
    """DNS rebinding: a name public at the form's look and loopback at the connect is refused at the connect."""
    settings.MAILPOLL_EXTRA_PORTS = str(banner.port)
    answers = iter([("93.184.215.14",), ("127.0.0.1",)])
    resolve = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host == "mail.rebind.invalid":
            (address,) = next(answers)
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]
        return resolve(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)

    assert destination.host_problem("mail.rebind.invalid") == ""
    outcome = check(MailboxFactory(host="mail.rebind.invalid", port=banner.port, security="tls"))

    assert outcome.headline == "not allowed: mail.rebind.invalid is not a public address (loopback)"
    assert banner.connections == 0


# -- the poller ---------------------------------------------------------------------------------------------------

def test_the_poller_refuses_a_disallowed_host_and_records_why_on_the_mailbox(closed, banner):
    mailbox = MailboxFactory(host=banner.host, port=993, security="tls")

    Poller().poll(mailbox)

    mailbox.refresh_from_db()
    assert mailbox.last_error == "not allowed: 127.0.0.1 is not a public address (loopback)"
    assert mailbox.consecutive_failures == 1
    assert banner.connections == 0


def test_the_poller_records_a_non_imap_peer_without_its_words(settings, banner):
    settings.MAILPOLL_ALLOW_PRIVATE_HOSTS, settings.MAILPOLL_EXTRA_PORTS = True, "*"
    mailbox = MailboxFactory(host=banner.host, port=banner.port, security="none")

    Poller().poll(mailbox)

    mailbox.refresh_from_db()
    assert "not an IMAP server" in mailbox.last_error
    assert TOKEN not in mailbox.last_error and "SSH-2.0" not in mailbox.last_error


# -- the deployment's allowances, said by `check` -----------------------------------------------------------------

def test_the_system_check_says_when_the_deployment_opened_more(settings):
    from mailpoll.checks import check_destinations

    settings.MAILPOLL_ALLOW_PRIVATE_HOSTS, settings.MAILPOLL_EXTRA_PORTS = False, "995"
    assert check_destinations() == []

    settings.MAILPOLL_ALLOW_PRIVATE_HOSTS, settings.MAILPOLL_EXTRA_PORTS = True, "*"
    assert [message.id for message in check_destinations()] == ["mailpoll.W006", "mailpoll.W007"]

    settings.MAILPOLL_ALLOW_PRIVATE_HOSTS, settings.MAILPOLL_EXTRA_PORTS = False, "995, imaps"
    (error,) = check_destinations()
    assert (error.id, error.msg) == ("mailpoll.E004", "MAILPOLL_EXTRA_PORTS ('995, imaps') holds 'imaps', neither a "
                                                      "port (1-65535) nor *: left out.")


def test_check_names_the_mailboxes_the_poller_now_refuses(closed):
    from mailpoll.checks import check_mailboxes_may_connect

    loopback = MailboxFactory(name="on loopback", host="127.0.0.1", port=993, security="tls")
    ssh = MailboxFactory(name="on ssh", host="imap.client.example", port=22, security="tls")
    MailboxFactory(name="fine", host="imap.client.example", port=993, security="tls")
    MailboxFactory(name="disabled", host="10.0.0.5", port=993, security="tls", enabled=False)

    found = check_mailboxes_may_connect(databases=["default"])

    assert [(each.id, each.obj) for each in found] == [("mailpoll.W008", loopback), ("mailpoll.W008", ssh)]
    assert "cannot be polled: 127.0.0.1 is not a public address (loopback)." in found[0].msg
    assert "cannot be polled: port 22 is not an IMAP port" in found[1].msg


def test_hosts_written_oddly_resolve_to_what_they_are(closed):
    for host in ("127.1", "0x7f.0.0.1", "2130706433"):
        with pytest.raises(outbound.AddressRefused, match=r"\(loopback\)"):
            outbound.public_addresses(host, 993)

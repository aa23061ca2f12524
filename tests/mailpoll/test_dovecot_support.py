"""The private Dovecot and the dropping proxy behave as the mailpoll tests rely on."""

import socket
from datetime import UTC, datetime
from email.message import EmailMessage

import pytest
from imapclient import IMAPClient

from tests.support import dovecot as dovecot_support
from tests.support.dovecot import DovecotServer, DovecotUnavailable
from tests.support.tcpproxy import DroppingProxy


def message(n: int, body: str = "hello") -> bytes:
    msg = EmailMessage()
    msg["From"] = "sender@example.com"
    msg["To"] = "intake@example.com"
    msg["Subject"] = f"message {n}"
    msg["Message-ID"] = f"<m{n}@example.com>"
    msg.set_content(body)
    return msg.as_bytes().replace(b"\n", b"\r\n")


@pytest.fixture
def user(dovecot):
    name, _ = dovecot.add_user()
    return name


def test_login_with_imapclient(dovecot, user):
    client = IMAPClient(dovecot.host, port=dovecot.port, ssl=False, timeout=5)
    assert client.login(user, dovecot.passwords[user])
    assert b"UIDPLUS" in client.capabilities()
    client.logout()

    client = IMAPClient(dovecot.host, port=dovecot.port, ssl=False, timeout=5)
    with pytest.raises(IMAPClient.Error):
        client.login(user, "wrong")
    client.shutdown()


def test_appended_messages_show_in_uid_search(dovecot, user):
    uids = [dovecot.append(user, "INBOX", message(n)) for n in range(3)]

    assert uids == [1, 2, 3]
    with dovecot.session(user, "INBOX", readonly=True) as client:
        assert sorted(client.search("ALL")) == uids
    assert dovecot.message_count(user, "INBOX") == 3


def test_append_keeps_flags_and_date(dovecot, user):
    date = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
    uid = dovecot.append(user, "INBOX", message(1), flags=[b"\\Seen"], date=date)

    assert b"\\Seen" in dovecot.flags(user, "INBOX", uid)
    with dovecot.session(user, "INBOX", readonly=True) as client:
        internal = client.fetch([uid], ["INTERNALDATE"])[uid][b"INTERNALDATE"]
    assert internal.astimezone(UTC) == date


def test_body_peek_leaves_seen_unset(dovecot, user):
    raw = message(1)
    uid = dovecot.append(user, "INBOX", raw)

    with dovecot.session(user, "INBOX") as client:
        fetched = client.fetch([uid], ["BODY.PEEK[]", "RFC822.SIZE"])[uid]
    assert fetched[b"BODY[]"] == raw
    assert fetched[b"RFC822.SIZE"] == len(raw)
    assert b"\\Seen" not in dovecot.flags(user, "INBOX", uid)

    # The check means something: a plain BODY[] fetch does set \Seen.
    with dovecot.session(user, "INBOX") as client:
        client.fetch([uid], ["BODY[]"])
    assert b"\\Seen" in dovecot.flags(user, "INBOX", uid)


def test_expunge_removes_exactly_those_uids(dovecot, user):
    uids = dovecot.append_many(user, "INBOX", [message(n) for n in range(3)])

    dovecot.expunge(user, "INBOX", [uids[1]])

    assert dovecot.uids(user, "INBOX") == [uids[0], uids[2]]


def test_delete_and_recreate_changes_uidvalidity(dovecot, user):
    dovecot.create_folder(user, "Reports")
    dovecot.append_many(user, "Reports", [message(n) for n in range(2)])
    before = dovecot.uidvalidity(user, "Reports")

    dovecot.delete_folder(user, "Reports")
    dovecot.create_folder(user, "Reports")

    assert dovecot.uidvalidity(user, "Reports") != before
    assert dovecot.message_count(user, "Reports") == 0
    # UIDs start over in the new folder: only UIDVALIDITY tells the two apart.
    assert dovecot.append(user, "Reports", message(9)) == 1

    old, new = dovecot.recreate_folder(user, "Reports")
    assert old != new


def test_change_uidvalidity_keeps_inbox_messages(dovecot, user):
    uids = dovecot.append_many(user, "INBOX", [message(n) for n in range(2)])
    before = dovecot.uidvalidity(user, "INBOX")

    after = dovecot.change_uidvalidity(user, "INBOX")

    assert after != before
    assert dovecot.uidvalidity(user, "INBOX") == after
    assert dovecot.uids(user, "INBOX") == uids


def test_kick_drops_the_users_sessions(dovecot, user):
    client = dovecot.connect(user)
    client.select_folder("INBOX")
    assert user in dovecot.who()

    dovecot.kick(user)

    with pytest.raises(IMAPClient.AbortError):
        client.noop()
    with dovecot.session(user, "INBOX") as again:
        assert again.noop()


def test_proxy_passes_traffic_through(dovecot, user):
    uid = dovecot.append(user, "INBOX", message(1))
    with DroppingProxy(dovecot.port) as proxy:
        client = dovecot.connect(user, port=proxy.port)
        client.select_folder("INBOX")
        assert client.search("ALL") == [uid]
        client.logout()
    assert proxy.accepted == 1 and proxy.cuts == 0


def test_proxy_cuts_mid_fetch_once(dovecot, user):
    raw = message(1, body="x" * 200_000)
    uid = dovecot.append(user, "INBOX", raw)

    with DroppingProxy(dovecot.port) as proxy:
        client = dovecot.connect(user, port=proxy.port)
        client.select_folder("INBOX", readonly=True)
        proxy.cut_after(1000, marker=b" FETCH (")
        with pytest.raises(IMAPClient.AbortError):
            client.fetch([uid], ["BODY.PEEK[]"])
        assert proxy.wait_cut(timeout=0)

        # One-shot: the next session gets the whole message.
        client = dovecot.connect(user, port=proxy.port)
        client.select_folder("INBOX", readonly=True)
        assert client.fetch([uid], ["BODY.PEEK[]"])[uid][b"BODY[]"] == raw
        client.logout()
    assert proxy.cuts == 1 and proxy.accepted == 2


def test_proxy_drop_all_on_demand(dovecot, user):
    with DroppingProxy(dovecot.port) as proxy:
        client = dovecot.connect(user, port=proxy.port)
        client.select_folder("INBOX")

        assert proxy.drop_all() == 1

        with pytest.raises((IMAPClient.AbortError, OSError)):
            client.noop()


def test_failed_start_reports_the_log(tmp_path, monkeypatch):
    # Every port the server is offered is taken: the retries run out and the error
    # carries Dovecot's own explanation.
    with socket.create_server(("127.0.0.1", 0)) as busy:
        monkeypatch.setattr(dovecot_support, "free_port", lambda: busy.getsockname()[1])
        server = DovecotServer(tmp_path)
        with pytest.raises(DovecotUnavailable, match="Address already in use"):
            server.start()
    assert server._proc is None

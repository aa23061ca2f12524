"""IMAP with OAuth: XOAUTH2 against the real Dovecot, the tokens from a mailbox's grant, through the real Poller.

Dovecot's oauth2 passdb asks ``tests.support.fake_introspection`` about every token, which vouches only for
tokens the loopback token endpoint (``tests.support.fake_oauth``) issued to the production refresh code:
a mailbox logs in only with a token the grant machinery really obtained.
"""

from __future__ import annotations

import base64
import logging

import pytest

from mailpoll.models import GrantState, OAuthGrant, Request
from mailpoll.oauth.tokens import connect
from mailpoll.sync.poller import Poller
from mailpoll.providers.imap import XOAuth2, _refusal_said
from seoinsight import crypto
from tests.mailpoll.factories import MailboxFactory, mail, poll_now
from tests.support.fake_oauth import CLIENT_ID, CLIENT_SECRET, FakeTokenEndpoint
from tests.support.processes import wait_for

# The token machinery commits its refreshes in transactions of its own (never inside the test's).
pytestmark = pytest.mark.django_db(transaction=True)

FLAVOURS = ["google", "microsoft"]


@pytest.fixture
def issuer(dovecot, settings):
    """Start a FakeTokenEndpoint of a flavour, configured as that issuer's token endpoint; stopped at teardown."""
    started = []

    def start(flavour: str) -> FakeTokenEndpoint:
        fake = FakeTokenEndpoint(flavour).start()
        started.append(fake)
        if flavour == "google":
            settings.MAILPOLL_GOOGLE_TOKEN_URL = fake.uri
            settings.MAILPOLL_GOOGLE_CLIENT_ID, settings.MAILPOLL_GOOGLE_CLIENT_SECRET = CLIENT_ID, CLIENT_SECRET
        else:
            settings.MAILPOLL_MICROSOFT_AUTHORITY, _, _ = fake.uri.partition("/organizations/")
            settings.MAILPOLL_MICROSOFT_TENANT = "organizations"
            settings.MAILPOLL_MICROSOFT_CLIENT_ID = CLIENT_ID
            settings.MAILPOLL_MICROSOFT_CLIENT_SECRET = CLIENT_SECRET
        return fake

    yield start
    for fake in started:
        dovecot.introspection.forget(fake)
        fake.stop()


@pytest.fixture
def oauth_mailbox(dovecot, issuer):
    """An IMAP+OAuth mailbox on a fresh Dovecot user, connected (a grant with a refresh token, no access token).

    Returns ``(mailbox, fake)``: the fake token endpoint of its issuer, whose tokens Dovecot accepts for it.
    """

    def make(flavour: str, **fields):
        fake = issuer(flavour)
        user, _ = dovecot.add_user()
        mailbox = MailboxFactory(host=dovecot.host, port=dovecot.port, username=user, auth="oauth",
                                 oauth_provider=flavour, **fields)
        connect(mailbox, flavour, refresh_token=fake.grant())
        dovecot.introspection.trust(fake, user)
        return mailbox, fake

    return make


def subjects(mailbox):
    return sorted(Request.objects.filter(mailbox=mailbox).values_list("subject", flat=True))


def grant_of(mailbox) -> OAuthGrant:
    return OAuthGrant.objects.get(mailbox=mailbox)


def xoauth2_logins(dovecot, user: str, *, at_least: int = 0) -> int:
    """Dovecot's XOAUTH2 logins of ``user``, once its log (written by a process of its own) shows ``at_least``."""
    line = f"Login: user=<{user}>, method=XOAUTH2"
    wait_for(lambda: dovecot.log().count(line) >= at_least, timeout=10, message=f"{at_least} XOAUTH2 login(s)")
    return dovecot.log().count(line)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_an_oauth_mailbox_logs_in_with_xoauth2_and_its_mail_is_stored(dovecot, oauth_mailbox, flavour):
    mailbox, fake = oauth_mailbox(flavour)
    original_refresh = crypto.decrypt(grant_of(mailbox).refresh_token)
    dovecot.append_many(mailbox.username, "INBOX", [mail("m0"), mail("m1")])

    poll_now(mailbox)
    assert subjects(mailbox) == ["m0", "m1"]
    assert mailbox.last_error == "" and mailbox.consecutive_failures == 0
    assert fake.refreshes == 1 and xoauth2_logins(dovecot, mailbox.username, at_least=1) == 1
    grant = grant_of(mailbox)
    assert grant.state == GrantState.ACTIVE and crypto.decrypt(grant.access_token) == fake.issued[-1]
    if flavour == "microsoft":
        # Rotated: the refresh token the endpoint handed back is the one stored, the first is dead.
        assert crypto.decrypt(grant.refresh_token) == fake.current_refresh_tokens()[0] != original_refresh
    else:
        assert crypto.decrypt(grant.refresh_token) == original_refresh

    # The next poll presents the stored token, still valid: no refresh.
    dovecot.append(mailbox.username, "INBOX", mail("m2"))
    poll_now(mailbox)
    assert subjects(mailbox) == ["m0", "m1", "m2"]
    assert fake.refreshes == 1 and xoauth2_logins(dovecot, mailbox.username, at_least=2) == 2


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_token_dovecot_refuses_is_refreshed_once_and_the_poll_goes_on(dovecot, oauth_mailbox, flavour, caplog):
    mailbox, fake = oauth_mailbox(flavour)
    poll_now(mailbox)
    refused = fake.issued[-1]
    # Revoked at the mail server, an hour before its expiry (a password change, an admin's sign-out).
    dovecot.introspection.refuse(refused)
    dovecot.append(mailbox.username, "INBOX", mail("after"))

    poll_now(mailbox)
    assert subjects(mailbox) == ["after"]
    assert mailbox.last_error == "" and mailbox.consecutive_failures == 0
    assert fake.refreshes == 2 and crypto.decrypt(grant_of(mailbox).access_token) == fake.issued[-1] != refused
    assert f"mailbox={mailbox.pk} 127.0.0.1:{dovecot.port} refused its XOAUTH2 token" in caplog.text


def test_a_server_refusing_every_token_is_the_mailboxs_error_after_one_refresh(dovecot, oauth_mailbox):
    mailbox, fake = oauth_mailbox("google")
    dovecot.introspection.forget(fake)  # the server knows none of this issuer's tokens

    poll_now(mailbox)
    assert fake.refreshes == 2  # the first token, and one fresh one after the refusal: no more
    assert mailbox.consecutive_failures == 1
    assert mailbox.last_error.startswith(f"the server refused the OAuth token\nXOAUTH2 was refused for "
                                         f"{mailbox.username} at 127.0.0.1:{dovecot.port}")
    assert "[AUTHENTICATIONFAILED]" in mailbox.last_error and "status 401" in mailbox.last_error
    assert not [token for token in fake.issued if token in mailbox.last_error]
    # The grant is fine; the server is the problem: the mailbox is retried later (backoff), not reauthorized.
    assert grant_of(mailbox).state == GrantState.ACTIVE and mailbox.next_attempt_at is not None


@pytest.mark.parametrize("flavour, kill, reason", [
    ("google", FakeTokenEndpoint.revoke, "Token has been expired or revoked."),
    ("microsoft", FakeTokenEndpoint.expire_inactive, "AADSTS700082"),
])
def test_a_dead_grant_needs_reauthorization_and_stops_being_polled(dovecot, oauth_mailbox, imap_mailbox, flavour,
                                                                 kill, reason):
    mailbox, fake = oauth_mailbox(flavour)
    kill(fake, fake.current_refresh_tokens()[0])
    neighbour = imap_mailbox(org=mailbox.org)  # a password mailbox of the same org
    dovecot.append(neighbour.username, "INBOX", mail("for the neighbour"))
    dovecot.append(mailbox.username, "INBOX", mail("unreachable for now"))

    assert sorted(Poller().cycle()) == sorted([mailbox.pk, neighbour.pk])
    mailbox.refresh_from_db()
    neighbour.refresh_from_db()
    grant = grant_of(mailbox)
    assert grant.state == GrantState.NEEDS_REAUTH and reason in grant.failure_reason
    assert f"mailbox={mailbox.pk} needs re-authorization ({flavour})" in mailbox.last_error
    assert reason in mailbox.last_error
    assert xoauth2_logins(dovecot, mailbox.username) == 0 and subjects(mailbox) == []
    assert subjects(neighbour) == ["for the neighbour"] and neighbour.last_error == ""

    # Due again at once (as after "Poll now"), it is still not claimed: no retry storm at the token endpoint.
    refreshes = fake.refreshes
    type(mailbox).objects.filter(pk__in=[mailbox.pk, neighbour.pk]).update(last_polled_at=None)
    assert Poller().cycle() == [neighbour.pk]
    assert fake.refreshes == refreshes


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_grant_revoked_behind_a_refused_token_needs_reauthorization(dovecot, oauth_mailbox, flavour):
    """The user withdrew consent: the server refuses the token, and the refresh that follows is refused too."""
    mailbox, fake = oauth_mailbox(flavour)
    poll_now(mailbox)
    fake.revoke(fake.current_refresh_tokens()[0])  # the rotated one, for Microsoft
    dovecot.introspection.refuse(fake.issued[-1])

    poll_now(mailbox)
    assert fake.refreshes == 2 and grant_of(mailbox).state == GrantState.NEEDS_REAUTH
    assert f"mailbox={mailbox.pk} needs re-authorization ({flavour})" in mailbox.last_error
    assert Poller().cycle() == []


def test_a_server_without_xoauth2_gets_no_token_and_is_named(fake_imap, issuer):
    server = fake_imap()  # offers AUTH=PLAIN only
    fake = issuer("google")
    mailbox = MailboxFactory(host=server.host, port=server.port, security="none", username="agent",
                             auth="oauth", oauth_provider="google")
    connect(mailbox, "google", refresh_token=fake.grant())

    poll_now(mailbox)
    assert mailbox.last_error == ("the server does not take OAuth tokens\n"
                                  f"127.0.0.1:{server.port} does not offer XOAUTH2 (only PLAIN): OAuth needs "
                                  "Google's or Microsoft's IMAP (imap.gmail.com, outlook.office365.com)")
    assert "AUTHENTICATE" not in server.commands and "LOGIN" not in server.commands
    assert fake.refreshes == 1  # the token was obtained, never presented, and is not wasted on a retry


def test_a_mailbox_nobody_connected_says_so_and_is_not_claimed(dovecot, issuer):
    issuer("google")
    user, _ = dovecot.add_user()
    mailbox = MailboxFactory(host=dovecot.host, port=dovecot.port, username=user, auth="oauth",
                             oauth_provider="google")
    assert Poller().cycle() == []

    Poller().poll(mailbox)
    mailbox.refresh_from_db()
    assert f"mailbox={mailbox.pk} is not connected: use Connect" in mailbox.last_error


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_no_token_or_secret_in_any_log_record_at_debug(dovecot, oauth_mailbox, flavour, caplog):
    caplog.set_level(logging.DEBUG)
    mailbox, fake = oauth_mailbox(flavour)
    dovecot.append(mailbox.username, "INBOX", mail("m0"))
    poll_now(mailbox)
    dovecot.introspection.refuse(fake.issued[-1])  # so a refused exchange and a fresh token are logged too
    poll_now(mailbox)
    dovecot.introspection.forget(fake)
    poll_now(mailbox)  # and a final refusal, recorded as the mailbox's error

    text = "\n".join(record.getMessage() for record in caplog.records)
    # The logs were captured, imapclient's protocol lines at DEBUG included.
    assert "AUTHENTICATE **REDACTED**" in text and "write literal size" in text
    assert "XOAUTH2 was refused" in text and len(fake.issued) == 3
    secrets = [*fake.issued, *fake.live, CLIENT_SECRET]
    secrets += [base64.b64encode(f"user={mailbox.username}\1auth=Bearer {t}\1\1".encode()).decode()
                for t in fake.issued]
    leaked = [s for s in secrets if s in text]
    assert not leaked, f"{len(leaked)} of {len(secrets)} tokens and secrets are in the logs"


# -- the XOAUTH2 exchange, pure -------------------------------------------------------------------------------

def test_xoauth2_sends_the_token_once_answers_the_error_empty_then_aborts():
    mech = XOAuth2("ana@client.example", "ya29.tok")
    assert mech(b"") == b"user=ana@client.example\x01auth=Bearer ya29.tok\x01\x01"
    assert mech(b'{"status":"400","schemes":"Bearer","scope":"https://mail.google.com/"}') == b""
    assert mech.server_said == "status 400, scope https://mail.google.com/"
    assert mech(b"+ again") is None and mech(b"") is None
    assert "ya29" not in repr(mech)


@pytest.mark.parametrize("challenge, said", [
    (b'{"status":"401","schemes":"bearer","scope":"mail"}', "status 401, scope mail"),
    (b'{"status":"invalid_token"}', "status invalid_token"),
    (b'{"schemes":"bearer"}', ""),
    (b"", ""),
    (b"not json", ""),
    (b"\xff\xfe", ""),
    (b'["status", "401"]', ""),
    (b'{"status": "' + b"x" * 500 + b'"}', "status " + "x" * 100),
    (b"[" * 100_000, ""),  # nesting deeper than the parser goes
])
def test_what_an_xoauth2_refusal_says(challenge, said):
    assert _refusal_said(challenge, XOAuth2.ERROR_FIELDS, XOAuth2.FIELD_MAX) == said


def test_an_oversized_error_challenge_is_not_read():
    mech = XOAuth2("ana@client.example", "t")
    mech(b"")
    assert mech(b'{"status":"401","pad":"' + b"x" * XOAuth2.CHALLENGE_MAX + b'"}') == b""
    assert mech.server_said == ""

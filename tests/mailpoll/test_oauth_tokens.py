"""OAuth grants against a loopback token endpoint: refresh before expiry, rotation saved, dead grants stop.

The refresh is the production one (``oauth_refresh.TokenEndpoint``, over requests) against
``tests.support.fake_oauth``; the two-poller race runs in two real OS processes. The pure rules behind
these (refresh now?, what a refusal means, cliffs) have their tables in test_oauth_rules.py.
"""

from __future__ import annotations

import hashlib
import io
import logging
import textwrap
import threading
from datetime import UTC, datetime, timedelta

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction

from mailpoll.models import GrantState, OAuthGrant
from mailpoll.oauth.tokens import (REFRESH_MARGIN, NeedsReauthorization, RefreshDeferred, RefreshRefused, access_token,
                                   connect)
from mailpoll.oauth.refresh import HeldTokens, Refreshed, TokenEndpoint, TokenEndpointError
from seoinsight import crypto
from tests.mailpoll.factories import MailboxFactory
from tests.support.fake_oauth import CLIENT_ID, CLIENT_SECRET, FakeTokenEndpoint
from tests.support.guards import finishes_within
from tests.support.processes import ManagedProcess, process_env, wait_for

# Every test here reads what access_token() committed in its own transaction.
pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


class Clock:
    """An injectable clock that only moves when told."""

    def __init__(self, now: datetime = T0):
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def endpoints():
    started = []

    def start(flavour="google", **kwargs) -> FakeTokenEndpoint:
        started.append(FakeTokenEndpoint(flavour, **kwargs).start())
        return started[-1]

    yield start
    for fake in started:
        fake.stop()


def refresher(fake: FakeTokenEndpoint, secret: str = CLIENT_SECRET) -> TokenEndpoint:
    return TokenEndpoint(fake.uri, CLIENT_ID, secret, scope="offline_access https://outlook.office.com/IMAP",
                         timeout=10)


def granted(fake: FakeTokenEndpoint, clock: Clock, **kwargs) -> OAuthGrant:
    """A mailbox just connected to ``fake``'s provider, with a refresh token and no access token yet."""
    return connect(MailboxFactory(), fake.flavour, refresh_token=fake.grant(), clock=clock, **kwargs)


def stored_refresh_token(grant: OAuthGrant) -> str:
    return crypto.decrypt(OAuthGrant.objects.get(pk=grant.pk).refresh_token)


def test_a_token_is_refreshed_once_then_reused_until_the_margin_before_its_expiry(endpoints):
    fake, clock = endpoints("google", expires_in=3600), Clock()
    grant = granted(fake, clock)

    first = access_token(grant, refresh=refresher(fake), clock=clock)
    assert first == fake.issued[-1] and fake.refreshes == 1
    clock.advance(seconds=3600 - REFRESH_MARGIN.total_seconds() - 1)
    assert access_token(grant.mailbox, refresh=refresher(fake), clock=clock) == first
    assert fake.refreshes == 1

    clock.advance(seconds=1)  # now within the margin: replaced before it runs out, not after a 401
    second = access_token(grant, refresh=refresher(fake), clock=clock)
    assert second != first and second == fake.issued[-1] and fake.refreshes == 2
    row = OAuthGrant.objects.get(pk=grant.pk)
    assert row.last_refreshed_at == clock.now and row.access_expires_at == clock.now + timedelta(seconds=3600)


def test_a_token_the_provider_rejected_is_replaced_once_even_before_its_expiry(endpoints):
    fake, clock = endpoints("google", expires_in=3600), Clock()
    grant = granted(fake, clock)
    first = access_token(grant, refresh=refresher(fake), clock=clock)

    # A 401 for a token with an hour left: refreshed now, whatever its expiry says.
    second = access_token(grant, refresh=refresher(fake), clock=clock, rejected=first)
    assert second != first and fake.refreshes == 2
    # A second poller reporting the same old token finds the new one and refreshes nothing.
    assert access_token(grant, refresh=refresher(fake), clock=clock, rejected=first) == second
    assert fake.refreshes == 2


def test_a_rotated_refresh_token_is_stored_and_the_next_refresh_uses_it(endpoints):
    fake, clock = endpoints("microsoft"), Clock()
    grant = granted(fake, clock)
    original = stored_refresh_token(grant)

    access_token(grant, refresh=refresher(fake), clock=clock)
    (newest,) = fake.current_refresh_tokens()
    assert newest != original and stored_refresh_token(grant) == newest
    clock.advance(hours=2)
    access_token(grant, refresh=refresher(fake), clock=clock)  # the replaced token would be refused
    assert stored_refresh_token(grant) == fake.current_refresh_tokens()[0]
    assert OAuthGrant.objects.get(pk=grant.pk).state == GrantState.ACTIVE


def test_a_due_refresh_waits_for_the_grants_lock_and_uses_the_token_its_holder_saved(endpoints):
    """The second poller of a race, step by step: it finds the row locked, waits, and refreshes nothing."""
    fake, clock = endpoints("microsoft"), Clock()
    grant = granted(fake, clock)  # no access token: due
    poller: dict = {}

    def poll():
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                poller["pid"] = cursor.fetchone()[0]
            poller["token"] = access_token(grant, refresh=refresher(fake), clock=clock)
        finally:
            connection.close()

    def waiting_for_a_lock() -> bool:
        with connection.cursor() as cursor:
            cursor.execute("SELECT EXISTS (SELECT FROM pg_locks WHERE pid = %s AND NOT granted)", [poller.get("pid")])
            return cursor.fetchone()[0]

    with transaction.atomic():
        OAuthGrant.objects.select_for_update().get(pk=grant.pk)  # the first poller, mid-refresh
        thread = threading.Thread(target=poll)
        thread.start()
        wait_for(waiting_for_a_lock, timeout=20, message="the second poller waiting for the grant's row lock")
        OAuthGrant.objects.filter(pk=grant.pk).update(
            access_token=crypto.encrypt("saved-by-the-first"), access_expires_at=clock.now + timedelta(hours=1))
    thread.join(timeout=20)
    assert poller["token"] == "saved-by-the-first" and fake.refreshes == 0


def test_google_answers_without_a_refresh_token_and_the_stored_one_stays(endpoints):
    fake, clock = endpoints("google"), Clock()
    grant = granted(fake, clock)
    original = stored_refresh_token(grant)
    access_token(grant, refresh=refresher(fake), clock=clock)
    assert stored_refresh_token(grant) == original


@pytest.mark.parametrize("flavour, kill, reason", [
    ("google", "revoke", "invalid_grant: Token has been expired or revoked."),
    ("microsoft", "expire_inactive", "invalid_grant: AADSTS700082: The refresh token has expired due to inactivity."),
    ("microsoft", "revoke", "invalid_grant: AADSTS50173: The provided grant has expired due to it being revoked"),
])
def test_a_dead_grant_needs_reauthorization_with_the_providers_reason_and_is_never_refreshed_again(
        endpoints, flavour, kill, reason):
    fake, clock = endpoints(flavour), Clock()
    grant = granted(fake, clock, access_token="still-valid-for-a-moment", expires_in=60)
    getattr(fake, kill)(stored_refresh_token(grant))

    with pytest.raises(NeedsReauthorization) as raised:
        access_token(grant, refresh=refresher(fake), clock=clock)
    row = OAuthGrant.objects.get(pk=grant.pk)
    assert row.state == GrantState.NEEDS_REAUTH and row.failure_reason.startswith(reason)
    assert "Trace ID" not in row.failure_reason and row.failed_at == clock.now
    assert row.access_token == "" and raised.value.reason == row.failure_reason
    assert fake.refreshes == 1

    for _ in range(3):  # every later poll: the same verdict, and not one request
        clock.advance(hours=1)
        with pytest.raises(NeedsReauthorization):
            access_token(grant, refresh=refresher(fake), clock=clock)
    assert fake.refreshes == 1


def test_reconnecting_brings_a_needs_reauth_grant_back(endpoints):
    fake, clock = endpoints("microsoft"), Clock()
    grant = granted(fake, clock)
    fake.revoke(stored_refresh_token(grant))
    with pytest.raises(NeedsReauthorization):
        access_token(grant, refresh=refresher(fake), clock=clock)

    clock.advance(days=1)
    again = connect(grant.mailbox, "microsoft", refresh_token=fake.grant(), clock=clock)
    assert again.pk == grant.pk and again.state == GrantState.ACTIVE
    assert again.failure_reason == "" and again.authorized_at == clock.now
    assert access_token(grant, refresh=refresher(fake), clock=clock) == fake.issued[-1]


@pytest.mark.parametrize("status, body, expected", [
    (503, {"error": "temporarily_unavailable", "error_description": "AADSTS90033: A transient error has occurred."},
     "temporarily_unavailable: AADSTS90033"),
    (500, "<html>Internal Server Error</html>", "HTTP 500"),
    (429, {"error": "rate_limited"}, "rate_limited"),
])
def test_a_failing_endpoint_is_transient_the_grant_stays_active_and_the_next_poll_recovers(
        endpoints, status, body, expected):
    fake, clock = endpoints("microsoft"), Clock()
    grant = granted(fake, clock)
    fake.fail_next(status, body)

    with pytest.raises(RefreshDeferred):
        access_token(grant, refresh=refresher(fake), clock=clock)
    row = OAuthGrant.objects.get(pk=grant.pk)
    assert row.state == GrantState.ACTIVE and row.failure_reason.startswith(expected) and row.failed_at == clock.now

    clock.advance(minutes=2)
    assert access_token(grant, refresh=refresher(fake), clock=clock) == fake.issued[-1]
    row = OAuthGrant.objects.get(pk=grant.pk)
    assert row.failure_reason == "" and row.failed_at is None


def test_an_unreachable_endpoint_is_transient(endpoints):
    fake, clock = endpoints("google"), Clock()
    grant = granted(fake, clock)
    fake.stop()  # nothing listens on its port any more: connection refused

    with pytest.raises(RefreshDeferred, match="ConnectionError"):
        access_token(grant, refresh=refresher(fake), clock=clock)
    assert OAuthGrant.objects.get(pk=grant.pk).state == GrantState.ACTIVE


@pytest.mark.parametrize("flavour, expected", [
    ("google", "invalid_client: Unauthorized"),
    ("microsoft", "invalid_client: AADSTS7000215: Invalid client secret provided."),
])
def test_a_refused_client_is_a_configuration_error_not_a_dead_grant(endpoints, flavour, expected):
    fake, clock = endpoints(flavour), Clock()
    grant = granted(fake, clock)
    with pytest.raises(RefreshRefused):
        access_token(grant, refresh=refresher(fake, secret="an-old-secret"), clock=clock)
    row = OAuthGrant.objects.get(pk=grant.pk)
    assert row.state == GrantState.ACTIVE and row.failure_reason.startswith(expected)
    assert access_token(grant, refresh=refresher(fake), clock=clock) == fake.issued[-1]  # once fixed


def test_access_token_refuses_to_run_inside_an_outer_transaction(endpoints):
    fake, clock = endpoints("microsoft"), Clock()
    grant = granted(fake, clock)
    with transaction.atomic(), pytest.raises(RuntimeError, match="own transaction"):
        access_token(grant, refresh=refresher(fake), clock=clock)
    assert fake.refreshes == 0


def test_the_refresh_callable_is_an_interface_a_provider_library_can_implement():
    """What Gmail's google-auth or Graph's msal will plug in: held tokens in, Refreshed out."""
    clock = Clock()
    grant = connect(MailboxFactory(), "microsoft", token_cache='{"RefreshToken": {}}', clock=clock)
    seen = []

    def msal_like(held: HeldTokens) -> Refreshed:
        seen.append(held)
        return Refreshed("access-from-cache", 1800, token_cache='{"RefreshToken": {"new": 1}}')

    assert access_token(grant, refresh=msal_like, clock=clock) == "access-from-cache"
    assert seen == [HeldTokens(refresh_token="", token_cache='{"RefreshToken": {}}')]
    assert crypto.decrypt(OAuthGrant.objects.get(pk=grant.pk).token_cache) == '{"RefreshToken": {"new": 1}}'


def test_once_a_cache_holds_the_refresh_token_the_bare_one_from_connect_is_not_kept():
    clock = Clock()
    grant = connect(MailboxFactory(), "microsoft", refresh_token="bare-from-connect", clock=clock)

    def msal_like(held: HeldTokens) -> Refreshed:
        assert held.refresh_token == "bare-from-connect"  # the first refresh redeems it...
        return Refreshed("access", 1800, token_cache='{"RefreshToken": {"rotated": 1}}')

    access_token(grant, refresh=msal_like, clock=clock)
    row = OAuthGrant.objects.get(pk=grant.pk)
    assert row.refresh_token == ""  # ...and from then on the cache holds the current one
    assert crypto.decrypt(row.token_cache) == '{"RefreshToken": {"rotated": 1}}'


def test_rotatesecrets_reencrypts_a_grants_tokens_and_they_still_refresh(endpoints, settings):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.SECRETS_KEYS = [old]
    fake, clock = endpoints("microsoft"), Clock()
    grant = granted(fake, clock, token_cache='{"cache": 1}')
    access_token(grant, refresh=refresher(fake), clock=clock)
    settings.SECRETS_KEYS = [new, old]

    out = io.StringIO()
    call_command("rotatesecrets", stdout=out)
    for column in ("refresh_token", "token_cache", "access_token"):
        assert f"mailpoll.OAuthGrant.{column}: 1 rotated" in out.getvalue()
    settings.SECRETS_KEYS = [new]  # the old key can go
    assert access_token(grant, refresh=refresher(fake), clock=clock) == fake.issued[-1]
    clock.advance(hours=2)
    assert access_token(grant, refresh=refresher(fake), clock=clock) == fake.issued[-1] and fake.refreshes == 2


@pytest.mark.parametrize("fields", [
    {"state": "needs_reauth"},  # no reason: the operator would not know what to fix
    {"refresh_token": ""},  # nothing to refresh with
    {"state": "expired"},
    {"provider": "yahoo"},
])
def test_the_database_refuses_grants_that_break_the_rules(fields):
    grant = connect(MailboxFactory(), "google", refresh_token="rt", clock=Clock())
    with pytest.raises(IntegrityError), transaction.atomic():
        OAuthGrant.objects.filter(pk=grant.pk).update(**fields)


def test_secrets_never_reach_the_logs_even_at_debug(endpoints, caplog):
    caplog.set_level(logging.DEBUG)
    fake, clock = endpoints("microsoft"), Clock()
    grant = granted(fake, clock)
    secrets = [stored_refresh_token(grant), CLIENT_SECRET]

    access_token(grant, refresh=refresher(fake), clock=clock)  # a refresh with rotation
    secrets += [fake.issued[-1], *fake.current_refresh_tokens()]
    fake.revoke(fake.current_refresh_tokens()[0])
    clock.advance(hours=2)
    with pytest.raises(NeedsReauthorization) as raised:
        access_token(grant, refresh=refresher(fake), clock=clock)

    assert f"mailbox={grant.mailbox_id} access token refreshed" in caplog.text  # the logs were captured
    assert f"mailbox={grant.mailbox_id} OAuth grant needs re-authorization" in caplog.text
    # urllib3 stays at INFO (settings.LOGGING): at DEBUG it would log each request's target, query and all.
    assert "/oauth2/v2.0/token" not in caplog.text
    shown = caplog.text + str(raised.value) + repr(refresher(fake)) + repr(HeldTokens(*secrets[:2]))
    for secret in secrets:
        assert secret not in shown


@pytest.mark.processes
def test_two_pollers_refreshing_at_once_reach_the_endpoint_once_and_the_newer_token_survives(
        endpoints, processes, tmp_path):
    # Each answer takes a second: without the row lock both refreshes would be in flight at once, and the
    # second, sent with the rotated-away token, would be refused (invalid_grant) — the grant lost.
    fake, clock = endpoints("microsoft", delay=1.0), Clock(datetime.now(UTC))
    grant = granted(fake, clock)
    go = tmp_path / "go"

    def poller(name: str) -> ManagedProcess:
        code = textwrap.dedent(f"""
            import hashlib, time
            from pathlib import Path
            from django.db import connection
            from mailpoll.models import OAuthGrant
            from mailpoll.oauth.tokens import access_token
            from mailpoll.oauth.refresh import TokenEndpoint

            endpoint = TokenEndpoint({fake.uri!r}, {CLIENT_ID!r}, {CLIENT_SECRET!r}, timeout=20)
            grant = OAuthGrant.objects.get(pk={grant.pk})
            connection.ensure_connection()
            Path({str(tmp_path / name)!r}).touch()
            while not Path({str(go)!r}).exists():
                time.sleep(0.005)
            token = access_token(grant, refresh=endpoint)
            print("token sha256", hashlib.sha256(token.encode()).hexdigest())
        """)
        return processes(ManagedProcess, "shell", "-c", code, env=process_env())

    pollers = [poller("a"), poller("b")]
    wait_for(lambda: all((tmp_path / n).exists() for n in "ab") or not all(p.alive() for p in pollers),
             timeout=60, message="both pollers ready")
    go.touch()
    assert [p.wait(timeout=60) for p in pollers] == [0, 0], [p.output() for p in pollers]

    assert fake.refreshes == 1
    (issued,) = fake.issued
    digest = hashlib.sha256(issued.encode()).hexdigest()
    assert all(f"token sha256 {digest}" in p.output() for p in pollers)
    (newest,) = fake.current_refresh_tokens()
    row = OAuthGrant.objects.get(pk=grant.pk)
    assert row.state == GrantState.ACTIVE and crypto.decrypt(row.refresh_token) == newest
    assert crypto.decrypt(row.access_token) == issued


@pytest.mark.processes
def test_a_poller_killed_mid_refresh_leaves_the_grant_to_the_next_one(endpoints, processes, tmp_path):
    """kill -9 while it holds the row lock: PostgreSQL ends its transaction, nothing of it is saved."""
    fake, clock = endpoints("microsoft"), Clock(datetime.now(UTC))
    grant = granted(fake, clock)
    original = stored_refresh_token(grant)
    asking = tmp_path / "asking"
    code = textwrap.dedent(f"""
        import time
        from pathlib import Path
        from mailpoll.models import OAuthGrant
        from mailpoll.oauth.tokens import access_token

        def hung_endpoint(held):
            Path({str(asking)!r}).touch()
            time.sleep(120)

        access_token(OAuthGrant.objects.get(pk={grant.pk}), refresh=hung_endpoint)
    """)
    stuck = processes(ManagedProcess, "shell", "-c", code, env=process_env())
    wait_for(lambda: asking.exists() or not stuck.alive(), timeout=60, message="the poller inside its refresh")
    assert stuck.alive(), stuck.output()
    stuck.kill9()

    with finishes_within(30, "a refresh after the lock holder was killed"):
        token = access_token(grant, refresh=refresher(fake), clock=clock)
    assert token == fake.issued[-1]
    assert fake.refreshes == 1 and stored_refresh_token(grant) != original
    assert OAuthGrant.objects.get(pk=grant.pk).state == GrantState.ACTIVE


def test_a_refresh_verifies_a_private_https_endpoint_against_the_configured_ca_bundle(settings, tmp_path):
    from tests.support.fake_gmail import FakeGmail

    server = FakeGmail(refresh_token="r-1", tls_dir=tmp_path).start()
    try:
        endpoint = TokenEndpoint(server.token_uri, CLIENT_ID, CLIENT_SECRET, timeout=10)
        with pytest.raises(TokenEndpointError, match="SSLError"):
            endpoint(HeldTokens(refresh_token="r-1"))
        assert server.grants == []

        settings.MAILPOLL_API_CA_BUNDLE = server.ca_file
        refreshed = endpoint(HeldTokens(refresh_token="r-1"))
        assert refreshed.access_token in server.issued and server.grants == [{"refresh_token": "r-1"}]
    finally:
        server.stop()

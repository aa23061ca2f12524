"""The admin's Connect: authorization code with PKCE against the loopback token endpoint of fake_oauth.

The test plays the browser: the start view's redirect is followed to the fake's consent screen with
``requests`` (it answers 302 to our callback with a code), and the callback is then requested through the
Django test client, in the session that started it. The fake checks the PKCE verifier against the challenge
and refuses a code used twice, so a flow that skipped either would fail here.
"""

import logging
import re
import time
import urllib.parse
from datetime import timedelta

import pytest
import requests
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from mailpoll.models import GrantState, Mailbox, OAuthGrant
from mailpoll.oauth.connect import SESSION_KEY, refusal
from seoinsight import crypto
from seoinsight.models import Membership
from tests.factories import UserFactory
from tests.mailpoll.factories import MailboxFactory
from tests.support.fake_oauth import CLIENT_ID, CLIENT_SECRET, pkce_challenge

CALLBACK = reverse("admin:mailpoll_mailbox_oauth_callback")
REDIRECT_URI = f"http://testserver{CALLBACK}"

pytestmark = pytest.mark.django_db


def connect_url(box) -> str:
    return reverse("admin:mailpoll_mailbox_connect", args=[box.pk])


def change_url(box) -> str:
    return reverse("admin:mailpoll_mailbox_change", args=[box.pk])


def query_of(url: str) -> dict:
    return {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlsplit(url).query).items()}


def start(client, box) -> dict:
    """Press Connect: the query of the authorization request our start view redirects to."""
    response = client.post(connect_url(box))
    assert response.status_code == 302, response
    return {"url": response["Location"], **query_of(response["Location"])}


def consent(authorization: dict) -> str:
    """The user at the provider's consent screen: the callback URL (path and query) it redirects back to."""
    answer = requests.get(authorization["url"], allow_redirects=False, timeout=10)
    assert answer.status_code == 302, answer.text
    back = urllib.parse.urlsplit(answer.headers["Location"])
    assert f"{back.scheme}://{back.netloc}{back.path}" == REDIRECT_URI
    return f"{back.path}?{back.query}"


def finish(client, callback_url: str):
    return client.get(callback_url, follow=True)


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def pending_in(client) -> dict:
    return client.session.get(SESSION_KEY, {})


def edit_pending(client, state: str, **changes) -> None:
    session = client.session
    session[SESSION_KEY][state].update(changes)
    session.save()


def test_connect_stores_an_active_encrypted_grant_and_makes_the_mailbox_due(client, editor, google):
    box = MailboxFactory(org=editor.org, gmail_oauth=True, consecutive_failures=4, last_polled_at=timezone.now(),
                         next_attempt_at=timezone.now() + timedelta(hours=1))

    authorization = start(client, box)
    verifier = pending_in(client)[authorization["state"]]["code_verifier"]
    callback = consent(authorization)
    response = finish(client, callback)

    assert {k: authorization[k] for k in ("client_id", "redirect_uri", "response_type", "scope",
                                          "code_challenge_method", "access_type", "prompt")} == {
        "client_id": CLIENT_ID, "redirect_uri": REDIRECT_URI, "response_type": "code",
        "scope": "https://www.googleapis.com/auth/gmail.readonly", "code_challenge_method": "S256",
        "access_type": "offline", "prompt": "consent"}
    assert authorization["code_challenge"] == pkce_challenge(verifier) and len(verifier) >= 43
    assert response.redirect_chain[-1][0] == change_url(box)
    assert messages_of(response) == [f"{box.name} is connected to google: the next cycle of any running pollmail "
                                     "polls it."]
    grant = OAuthGrant.objects.get(mailbox=box)
    (refresh_token,) = google.current_refresh_tokens()
    assert (grant.provider, grant.state) == ("google", GrantState.ACTIVE)
    assert crypto.decrypt(grant.refresh_token) == refresh_token and refresh_token not in grant.refresh_token
    assert crypto.decrypt(grant.access_token) == google.issued[-1] and google.issued[-1] not in grant.access_token
    assert grant.access_expires_at > timezone.now() + timedelta(minutes=50)
    box.refresh_from_db()
    assert (box.last_polled_at, box.next_attempt_at, box.consecutive_failures) == (None, None, 0)
    assert pending_in(client) == {}  # used up
    exchange = google.exchanges[-1]
    assert (exchange["code_verifier"], exchange["redirect_uri"]) == (verifier, REDIRECT_URI)
    html = response.content.decode()
    for secret in (query_of(callback)["code"], verifier, refresh_token, google.issued[-1], CLIENT_SECRET):
        assert secret not in html


def test_a_microsoft_mailbox_asks_for_mail_read_and_offline_access(client, editor, microsoft):
    box = MailboxFactory(org=editor.org, graph_oauth=True)

    authorization = start(client, box)
    response = finish(client, consent(authorization))

    assert authorization["scope"] == "https://graph.microsoft.com/Mail.Read offline_access openid profile"
    assert "access_type" not in authorization
    assert (authorization["login_hint"], authorization["prompt"]) == (box.username, "select_account")
    assert urllib.parse.urlsplit(authorization["url"]).path == "/organizations/oauth2/v2.0/authorize"
    assert microsoft.exchanges[-1]["scope"] == authorization["scope"]
    assert OAuthGrant.objects.get(mailbox=box).provider == "microsoft"
    assert "is connected to microsoft" in messages_of(response)[0]


def test_reconnecting_a_grant_that_needs_re_authorization_makes_it_active_again(client, editor, google):
    box = MailboxFactory(org=editor.org, imap_oauth=True)
    OAuthGrant.objects.create(mailbox=box, provider="google", state=GrantState.NEEDS_REAUTH,
                              refresh_token=crypto.encrypt("1//dead"), authorized_at=timezone.now(),
                              failure_reason="invalid_grant: Token has been expired or revoked.",
                              failed_at=timezone.now())

    finish(client, consent(start(client, box)))

    grant = OAuthGrant.objects.get(mailbox=box)
    assert (grant.state, grant.failure_reason, grant.failed_at) == (GrantState.ACTIVE, "", None)
    assert crypto.decrypt(grant.refresh_token) == google.current_refresh_tokens()[0]


@pytest.mark.parametrize("verifier", ["not-the-verifier-of-this-challenge", ""])
def test_a_verifier_that_does_not_match_the_challenge_stores_nothing(client, editor, google, verifier):
    box = MailboxFactory(org=editor.org, gmail_oauth=True)
    authorization = start(client, box)
    edit_pending(client, authorization["state"], code_verifier=verifier)

    response = finish(client, consent(authorization))

    assert not OAuthGrant.objects.filter(mailbox=box).exists()
    (said,) = messages_of(response)
    assert said.startswith("The google token endpoint refused the code: invalid_grant: Missing code verifier.")


@pytest.mark.parametrize("tamper", ["unknown", "missing", "expired", "another user"])
def test_a_state_that_is_not_this_sessions_live_one_stores_nothing(client, editor, google, tamper):
    box = MailboxFactory(org=editor.org, gmail_oauth=True)
    authorization = start(client, box)
    callback = consent(authorization)
    query = query_of(callback)
    if tamper == "unknown":
        # One character changed, whatever it was (a fixed "a" would leave a state that starts with one intact).
        query["state"] = ("b" if query["state"][0] == "a" else "a") + query["state"][1:]
    elif tamper == "missing":
        del query["state"]
    elif tamper == "expired":
        edit_pending(client, authorization["state"], issued_at=time.time() - 11 * 60)
    else:
        edit_pending(client, authorization["state"], user=UserFactory(is_staff=True, org=editor.org).pk)

    response = finish(client, f"{CALLBACK}?{urllib.parse.urlencode(query)}")

    assert not OAuthGrant.objects.filter(mailbox=box).exists()
    assert google.exchanges == []  # refused before the code went anywhere
    assert response.redirect_chain[-1][0] == reverse("admin:mailpoll_mailbox_changelist")
    assert "start Connect again" in messages_of(response)[0]


def test_a_state_is_used_once(client, editor, google):
    box = MailboxFactory(org=editor.org, gmail_oauth=True)
    callback = consent(start(client, box))
    finish(client, callback)
    first = OAuthGrant.objects.get(mailbox=box).refresh_token

    replay = finish(client, callback)

    assert "unknown or was already used" in messages_of(replay)[0]
    assert len(google.exchanges) == 1
    assert OAuthGrant.objects.get(mailbox=box).refresh_token == first


def test_a_state_from_another_browser_session_is_refused(client, editor, google):
    from django.test import Client

    box = MailboxFactory(org=editor.org, gmail_oauth=True)
    callback = consent(start(client, box))
    other = Client()
    other.force_login(editor)  # the same user, another session: the state lives only in the first one

    response = finish(other, callback)

    assert "unknown or was already used" in messages_of(response)[0]
    assert not OAuthGrant.objects.filter(mailbox=box).exists() and google.exchanges == []
    assert query_of(callback)["state"] in pending_in(client)  # still usable where it was started


def test_another_orgs_mailbox_is_a_404_for_start_and_callback(client, editor, google):
    foreign = MailboxFactory(gmail_oauth=True)
    assert client.post(connect_url(foreign)).status_code == 404

    # Started while a member, finished after the membership is gone: the mailbox is out of reach.
    other_org = foreign.org
    Membership.objects.create(user=editor, org=other_org)
    callback = consent(start(client, foreign))
    Membership.objects.filter(user=editor, org=other_org).delete()

    assert client.get(callback).status_code == 404
    assert not OAuthGrant.objects.filter(mailbox=foreign).exists() and google.exchanges == []


def test_a_view_only_user_cannot_start_connect(client, google):
    box = MailboxFactory(gmail_oauth=True)
    viewer = UserFactory(is_staff=True, org=box.org)
    viewer.user_permissions.add(Permission.objects.get(codename="view_mailbox"))
    client.force_login(viewer)

    assert client.post(connect_url(box)).status_code == 403
    assert "connect/" not in client.get(change_url(box)).content.decode()


def test_a_refused_consent_says_so_and_stores_nothing(client, editor, google):
    box = MailboxFactory(org=editor.org, gmail_oauth=True)
    google.consent = "access_denied"

    response = finish(client, consent(start(client, box)))

    assert messages_of(response) == ["The consent was refused at the provider (access_denied) (The user denied "
                                     "the request.): nothing was stored."]
    assert not OAuthGrant.objects.filter(mailbox=box).exists() and google.exchanges == []


def test_a_refused_exchange_names_the_providers_error_and_never_the_secret(client, editor, microsoft, settings):
    box = MailboxFactory(org=editor.org, graph_oauth=True)
    authorization = start(client, box)
    settings.MAILPOLL_MICROSOFT_CLIENT_SECRET = "a-secret-the-endpoint-does-not-know"

    response = finish(client, consent(authorization))

    (said,) = messages_of(response)
    assert said.startswith("The microsoft token endpoint refused the code: invalid_client: AADSTS7000215")
    assert "the client secret is wrong" in said
    assert "a-secret-the-endpoint-does-not-know" not in response.content.decode()
    assert not OAuthGrant.objects.filter(mailbox=box).exists()


def test_changing_the_oauth_app_between_start_and_callback_stores_nothing(client, editor, google, settings):
    box = MailboxFactory(org=editor.org, gmail_oauth=True)
    authorization = start(client, box)
    Mailbox.objects.filter(pk=box.pk).update(provider="graph")

    response = finish(client, consent(authorization))

    assert "settings changed since Connect started" in messages_of(response)[0]
    assert not OAuthGrant.objects.filter(mailbox=box).exists() and google.exchanges == []


@pytest.mark.parametrize("fields, said", [
    ({"gmail_service": True}, "Connect is for mailboxes with OAuth (user consent) auth only."),
    ({}, "Connect is for mailboxes with OAuth (user consent) auth only."),
])
def test_connect_is_only_for_user_consent_mailboxes(client, editor, google, fields, said):
    box = MailboxFactory(org=editor.org, **fields)

    response = client.post(connect_url(box), follow=True)

    assert messages_of(response) == [said] and pending_in(client) == {}


def test_an_unconfigured_app_says_which_setting_is_missing(client, editor, settings):
    settings.MAILPOLL_GOOGLE_CLIENT_ID = ""
    box = MailboxFactory(org=editor.org, gmail_oauth=True)

    response = client.post(connect_url(box), follow=True)

    assert "set the mailbox's client id or MAILPOLL_GOOGLE_CLIENT_ID" in messages_of(response)[0]


def test_no_code_verifier_or_token_is_logged_at_debug(client, editor, google, caplog):
    caplog.set_level(logging.DEBUG)
    box = MailboxFactory(org=editor.org, gmail_oauth=True)

    authorization = start(client, box)
    verifier = pending_in(client)[authorization["state"]]["code_verifier"]
    callback = consent(authorization)
    finish(client, callback)
    finish(client, callback)  # the refused replay logs too

    grant = OAuthGrant.objects.get(mailbox=box)
    secrets_ = [query_of(callback)["code"], verifier, CLIENT_SECRET, crypto.decrypt(grant.refresh_token),
                crypto.decrypt(grant.access_token)]
    assert f"mailbox={box.pk} connected by user={editor.pk} (google)" in caplog.text
    for secret in secrets_:
        assert secret not in caplog.text


@pytest.mark.parametrize("pending, user, age, refused", [
    (None, 1, 0, "unknown or was already used"),
    ({"mailbox": 5, "user": 2}, 1, 0, "started by another user"),
    ({"mailbox": 5, "user": 1}, 1, 601, "expired"),
    ({"mailbox": 5, "user": 1}, 1, -5, "expired"),  # issued "in the future": a forged or corrupted entry
    ({"mailbox": 5, "user": 1}, 1, 599, None),
])
def test_refusal(pending, user, age, refused):
    now = 10_000.0
    entry = None if pending is None else {**pending, "issued_at": now - age}

    why = refusal(entry, user_id=user, now=now)

    assert why is None if refused is None else refused in why


# -- What the mailbox's admin page says about its token ---------------------------------------------------

ACCESS, REFRESH, APP_SECRET = "ya29.plaintext-access-token", "1//plaintext-refresh-token", "plaintext-app-secret"


def grant(box, *, days_ago: float = 0, refreshed_days_ago: float | None = None, **fields) -> OAuthGrant:
    now = timezone.now()
    fields = {"provider": box.issuer, "refresh_token": crypto.encrypt(REFRESH), "access_token": crypto.encrypt(ACCESS),
              "access_expires_at": now + timedelta(minutes=30), "authorized_at": now - timedelta(days=days_ago),
              "last_refreshed_at": None if refreshed_days_ago is None else now - timedelta(days=refreshed_days_ago),
              **fields}
    return OAuthGrant.objects.create(mailbox=box, **fields)


def page(client, box) -> str:
    response = client.get(change_url(box))
    assert response.status_code == 200
    return response.content.decode()


@pytest.mark.parametrize("state, build, shown", [
    ("active", lambda box: grant(box, refreshed_days_ago=0.01), ["Active", "connected", "last refreshed",
                                                                 ">Reconnect<"]),
    ("needs re-authorization", lambda box: grant(
        box, state=GrantState.NEEDS_REAUTH, access_token="", access_expires_at=None, failed_at=timezone.now(),
        failure_reason="invalid_grant: Token has been expired or revoked."),
     ["Needs re-authorization", "invalid_grant: Token has been expired or revoked.", "just now",
      "Not polled until someone reconnects it", ">Reconnect<"]),
    ("not connected", lambda box: None, ["Not connected", "Not polled until someone connects it", ">Connect<"]),
])
def test_the_page_shows_the_token_state(admin_client, state, build, shown):
    box = MailboxFactory(gmail_oauth=True, client_id=CLIENT_ID)
    box.set_app_secret(APP_SECRET)
    box.save()
    build(box)

    html = page(admin_client, box)

    for text in ("Gmail API", "OAuth (user consent)", *shown):
        assert text in html, text
    raw = Mailbox.objects.values_list("app_secret", flat=True).get(pk=box.pk)
    for secret in (ACCESS, REFRESH, APP_SECRET, raw, crypto.encrypt(REFRESH)[:20]):
        assert secret not in html


@pytest.mark.parametrize("issuer_fields, days_ago, refreshed, said", [
    ({"graph_oauth": True}, 80, None, "Microsoft revokes a refresh token unused for 90 days; poll the mailbox"),
    ({"graph_oauth": True}, 95, None, "the refresh token expired around"),
    ({"gmail_oauth": True}, 6, None, "publishing status is Testing, the refresh token expires around"),
])
def test_the_page_warns_ahead_of_a_known_cliff(admin_client, issuer_fields, days_ago, refreshed, said):
    box = MailboxFactory(**issuer_fields)
    grant(box, days_ago=days_ago, refreshed_days_ago=refreshed)

    assert said in page(admin_client, box)


@pytest.mark.parametrize("days_ago, refreshed", [(1, None), (30, 20), (30, 0.5)])
def test_no_cliff_warning_far_from_any_cliff(admin_client, days_ago, refreshed):
    """A Google grant refreshed after its seventh day has proved its app is not a testing one."""
    box = MailboxFactory(gmail_oauth=True)
    grant(box, days_ago=days_ago, refreshed_days_ago=refreshed)

    html = page(admin_client, box)

    assert "refresh token expire" not in html and "Testing" not in html


def test_the_page_shows_an_api_cursor_shortened_and_its_resyncs(admin_client):
    from mailpoll.models import FolderCursor

    box = MailboxFactory(graph_oauth=True)
    position = "https://graph.microsoft.com/v1.0/users/u/mailFolders/inbox/messages/delta?$deltatoken=" + "x" * 200
    FolderCursor.objects.create(mailbox=box, folder="inbox", position=position, resyncs=2,
                                resync_reason="410 SyncStateNotFound", resync_started_at=timezone.now(),
                                last_sync_ts=timezone.now())

    html = page(admin_client, box)

    assert f"{position[:24]}…</code>" in html
    assert "resyncing since" in html and "2 resyncs: 410 SyncStateNotFound" in html

    # Finished: no longer "resyncing", and when the latest one was is still said.
    FolderCursor.objects.filter(mailbox=box).update(resync_started_at=None,
                                                    last_resync_at=timezone.now() - timedelta(hours=3))
    html = page(admin_client, box)
    assert "resyncing since" not in html
    assert re.search(r"2 resyncs, the latest <span title=\"[^\"]+\">3 h ago</span>: 410 SyncStateNotFound", html)


def test_the_changelist_shows_provider_and_token_state_and_filters_by_it(admin_client):
    active = MailboxFactory(name="active", gmail_oauth=True)
    grant(active)
    dead = MailboxFactory(name="dead", graph_oauth=True)
    grant(dead, state=GrantState.NEEDS_REAUTH, access_token="", access_expires_at=None, failed_at=timezone.now(),
          failure_reason="invalid_grant: AADSTS700082")
    fresh = MailboxFactory(name="fresh", imap_oauth=True)
    MailboxFactory(name="imap")
    url = reverse("admin:mailpoll_mailbox_changelist")

    html = admin_client.get(url).content.decode()

    for text in ("Gmail API, OAuth (user consent)", "IMAP, Password", ">Active<", ">Needs re-authorization<",
                 ">Not connected<", 'title="invalid_grant: AADSTS700082"'):
        assert text in html, text
    assert ACCESS not in html and REFRESH not in html

    def listed(token):
        return {m.pk for m in admin_client.get(url, {"token": token}).context["cl"].result_list}

    assert (listed("active"), listed("needs_reauth"), listed("not_connected")) == ({active.pk}, {dead.pk},
                                                                                   {fresh.pk})


def test_the_next_try_of_a_mailbox_the_claim_skips_says_so(admin_client):
    dead = MailboxFactory(name="dead", graph_oauth=True)
    grant(dead, state=GrantState.NEEDS_REAUTH, access_token="", access_expires_at=None, failed_at=timezone.now(),
          failure_reason="invalid_grant")
    fresh, live = MailboxFactory(name="fresh", imap_oauth=True), MailboxFactory(name="live", gmail_oauth=True)
    grant(live)
    for box, expected in ((dead, "not until connected"), (fresh, "not until connected"), (live, "next cycle")):
        assert expected in page(admin_client, box), box.name


def test_poll_now_says_a_mailbox_needing_re_authorization_is_not_polled(admin_client):
    dead = MailboxFactory(name="dead", graph_oauth=True)
    grant(dead, state=GrantState.NEEDS_REAUTH, access_token="", access_expires_at=None, failed_at=timezone.now(),
          failure_reason="invalid_grant")
    live = MailboxFactory(name="live", gmail_oauth=True)
    grant(live)

    response = admin_client.post(reverse("admin:mailpoll_mailbox_changelist"),
                                 {"action": "poll_now", "_selected_action": [dead.pk, live.pk]}, follow=True)

    assert messages_of(response)[1] == ("dead: needs re-authorization or not connected, so it will not be polled "
                                        "until someone reconnects it (Connect on its page).")

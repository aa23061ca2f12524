"""Connect bound to what was consented to: the mailbox's settings, the account, a POST, one use of a state.

The flow runs against the loopback token endpoint of ``fake_oauth`` as in ``test_connect``; these are the
ways a grant could end up somewhere its consenting user did not choose.
"""

import re
import threading
import urllib.parse

import pytest
import requests
from django.db import connection
from django.test import Client

from mailpoll.models import Mailbox, OAuthGrant
from tests.mailpoll.factories import MailboxFactory
from tests.mailpoll.test_connect import (
    change_url,
    connect_url,
    consent,
    finish,
    messages_of,
    pending_in,
    start,
)
from tests.support.loopback import free_port

pytestmark = pytest.mark.django_db


# -- 5: a pending Connect is bound to every field whose change removes a grant -------------------------------

@pytest.mark.parametrize("changes", [
    {"host": "127.0.0.1", "port": 1143, "security": "none"},  # the finding: the token would go in clear
    {"host": "127.0.0.1"},
    {"port": 1993},
    {"security": "starttls"},
    {"username": "someone-else@example.com"},
    {"oauth_provider": "microsoft", "host": "outlook.office365.com"},
    {"client_id": "another-client"},
])
def test_changing_a_grant_field_between_start_and_callback_stores_nothing(client, editor, google, changes):
    box = MailboxFactory(org=editor.org, imap_oauth=True)
    authorization = start(client, box)
    Mailbox.objects.filter(pk=box.pk).update(**changes)  # Bob, in the same org, meanwhile

    response = finish(client, consent(authorization))

    assert not OAuthGrant.objects.filter(mailbox=box).exists()
    assert google.exchanges == []  # refused before the code went anywhere
    (said,) = messages_of(response)
    assert said.startswith("The mailbox's settings changed since Connect started")
    assert response.redirect_chain[-1][0] == change_url(box)


def test_a_destination_changed_in_the_admin_mid_flow_leaves_no_grant(client, editor, google, admin_client):
    """The whole finding through the admin: Bob's save removes the old grant, Alice's callback stores none."""
    box = MailboxFactory(org=editor.org, imap_oauth=True)
    finish(client, consent(start(client, box)))  # connected once
    assert OAuthGrant.objects.filter(mailbox=box).exists()
    authorization = start(client, box)  # Alice reconnects

    page = admin_client.get(change_url(box))
    form = page.context["adminform"].form
    data = {name: form[name].value() for name in form.fields if form[name].value() is not None}
    data.update(host="127.0.0.1", port=1143, security="none", folders="INBOX", poll_interval=120,
                live="", enabled="on")
    data = {k: v for k, v in data.items() if v not in (False, "")}
    data.update({"cursors-TOTAL_FORMS": 0, "cursors-INITIAL_FORMS": 0})
    saved = admin_client.post(change_url(box), data)
    assert saved.status_code == 302, saved.context["adminform"].form.errors if saved.context else saved
    assert not OAuthGrant.objects.filter(mailbox=box).exists()  # the form's own rule

    response = finish(client, consent(authorization))

    assert not OAuthGrant.objects.filter(mailbox=box).exists()
    assert "settings changed since Connect started" in messages_of(response)[0]


# -- C(a): start is a POST with CSRF; the consenting account is the mailbox's -------------------------------

def test_start_by_get_is_refused_and_starts_nothing(client, editor, google):
    box = MailboxFactory(org=editor.org, gmail_oauth=True)

    response = client.get(connect_url(box))

    assert response.status_code == 405
    assert pending_in(client) == {} and google.authorizations == []


def test_start_needs_the_csrf_token(editor, google):
    box = MailboxFactory(org=editor.org, gmail_oauth=True)
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(editor)

    assert browser.post(connect_url(box)).status_code == 403  # a cross-site form
    assert pending_in(browser) == {}

    page = browser.get(change_url(box)).content.decode()
    forms = re.findall(r'<form[^>]*action="([^"]+)"[^>]*>\s*<input type="hidden" name="csrfmiddlewaretoken" '
                       r'value="([^"]+)"', page)
    (token,) = [token for action, token in forms if action == connect_url(box)]
    response = browser.post(connect_url(box), {"csrfmiddlewaretoken": token})
    assert response.status_code == 302 and len(pending_in(browser)) == 1


def test_the_button_posts_a_form_outside_the_change_form(client, editor, google):
    box = MailboxFactory(org=editor.org, gmail_oauth=True)

    html = client.get(change_url(box)).content.decode()

    assert f'href="{connect_url(box)}"' not in html
    assert re.search(r'<button type="submit" class="button" form="mailpoll-connect">Connect</button>', html)
    assert re.search(rf'<form id="mailpoll-connect" method="post" action="{connect_url(box)}">', html)
    # Not nested: the change form is closed before the Connect form opens.
    assert html.index("</form>") < html.index('<form id="mailpoll-connect"')


def test_google_is_asked_for_the_mailboxs_account(client, editor, google):
    box = MailboxFactory(org=editor.org, gmail_oauth=True, username="reports@example.com")

    authorization = start(client, box)

    assert authorization["login_hint"] == "reports@example.com"
    assert authorization["prompt"] == "consent"


@pytest.mark.parametrize("fields", [{"gmail_oauth": True}, {"imap_oauth": True}])
def test_a_google_consent_by_another_account_stores_nothing(client, editor, google, fields):
    box = MailboxFactory(org=editor.org, username="reports@example.com", **fields)
    google.account = "ceo@example.com"  # signed in as someone else at the consent screen

    response = finish(client, consent(start(client, box)))

    assert not OAuthGrant.objects.filter(mailbox=box).exists()
    assert google.profiles == ["ceo@example.com"]  # asked once, with the new token
    (said,) = messages_of(response)
    assert said == ("The consent was given by ceo@example.com, not by this mailbox's account reports@example.com: "
                    "nothing was stored. Connect again and sign in as reports@example.com.")


def test_a_google_consent_by_the_mailboxs_account_is_checked_and_stored(client, editor, google):
    box = MailboxFactory(org=editor.org, gmail_oauth=True, username="Reports@Example.com")
    google.account = "reports@example.com"

    finish(client, consent(start(client, box)))

    assert google.profiles == ["reports@example.com"]
    assert OAuthGrant.objects.filter(mailbox=box).exists()


@pytest.mark.parametrize("fields", [{"graph_oauth": True},
                                    {"imap_oauth": True, "oauth_provider": "microsoft",
                                     "host": "outlook.office365.com"}])
def test_a_microsoft_consent_by_another_account_stores_nothing(client, editor, microsoft, fields):
    box = MailboxFactory(org=editor.org, username="hr@contoso.test", **fields)
    microsoft.account = "intern@contoso.test"

    response = finish(client, consent(start(client, box)))

    assert not OAuthGrant.objects.filter(mailbox=box).exists()
    assert "given by intern@contoso.test, not by this mailbox's account hr@contoso.test" in messages_of(response)[0]


def test_a_microsoft_answer_without_an_id_token_stores_nothing(client, editor, microsoft, settings):
    box = MailboxFactory(org=editor.org, graph_oauth=True, username="hr@contoso.test")
    authorization = start(client, box)
    callback = consent(authorization)
    # The token endpoint answers like one asked without openid: no id_token.
    microsoft.fail_next(200, {"access_token": "eyJ0x", "refresh_token": "0.Ax", "expires_in": 3599})

    response = finish(client, callback)

    assert not OAuthGrant.objects.filter(mailbox=box).exists()
    assert "did not say which account consented" in messages_of(response)[0]


# -- C(b): two callbacks with one state exchange the code once -----------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_two_callbacks_at_once_with_one_state_exchange_the_code_once(client, editor, google):
    box = MailboxFactory(org=editor.org, gmail_oauth=True)
    callback = consent(start(client, box))
    google.exchange_delay = 1.0  # both requests are in flight together
    answers = []
    go = threading.Barrier(2)

    def press():
        twin = Client()
        # The same browser session (a double click, a replayed redirect), each with its own cookie jar: the
        # messages each answer sets stay its own.
        twin.cookies.load({name: morsel.value for name, morsel in client.cookies.items()})
        go.wait()
        try:
            answers.append(messages_of(twin.get(callback, follow=True)))
        finally:
            connection.close()

    threads = [threading.Thread(target=press) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert len(google.exchanges) == 1
    assert sorted(len(said) for said in answers) == [1, 1]
    assert sum("is connected to google" in said[0] for said in answers) == 1
    assert sum("unknown or was already used" in said[0] for said in answers) == 1
    assert OAuthGrant.objects.filter(mailbox=box).count() == 1


# -- 7: the token endpoint's URL is named by its host only -------------------------------------------------

def test_an_unreachable_token_endpoint_is_named_by_its_host_only(client, editor, google, settings, caplog):
    box = MailboxFactory(org=editor.org, gmail_oauth=True)
    port = free_port()  # nothing listens there
    settings.MAILPOLL_GOOGLE_TOKEN_URL = f"http://127.0.0.1:{port}/token/s3cret-path?key=s3cret-query"
    callback = consent(start(client, box))

    response = finish(client, callback)

    (said,) = messages_of(response)
    assert f"http://127.0.0.1:{port}" in said, said
    for text in (said, response.content.decode(), caplog.text):
        assert "s3cret" not in text and "/token" not in text
    assert not OAuthGrant.objects.filter(mailbox=box).exists()


def test_a_token_endpoint_url_read_differently_by_two_parsers_gets_no_code(client, editor, google, settings):
    box = MailboxFactory(org=editor.org, gmail_oauth=True)
    listener = requests.utils.urlparse(google.uri)
    settings.MAILPOLL_GOOGLE_TOKEN_URL = f"http://127.0.0.2:{listener.port}\\@127.0.0.1:{listener.port}/token"
    callback = consent(start(client, box))

    response = finish(client, callback)

    assert google.exchanges == []
    assert "backslash" in messages_of(response)[0]
    assert urllib.parse.quote("s3cret") not in response.content.decode()
    assert not OAuthGrant.objects.filter(mailbox=box).exists()

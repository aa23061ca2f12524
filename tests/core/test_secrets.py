"""Secrets at rest: key fallbacks, rotation, and where a service-account key may be sent."""

import io
import json
from datetime import date
from http.server import BaseHTTPRequestHandler

import pytest
from cryptography.fernet import Fernet
from django.core.management import CommandError, call_command
from google.auth.exceptions import RefreshError, TransportError

from imports import searchconsole_api, searchconsole_client
from mailpoll.models import Mailbox
from seoinsight import crypto
from seoinsight.models import GOOGLE_TOKEN_URI, SiteTarget
from tests.factories import SiteTargetFactory
from tests.mailpoll.factories import MailboxFactory
from tests.support.google import _LoopbackServer, service_account_key
from tests.support.processes import run_burst

pytestmark = pytest.mark.django_db

OLD_SECRET_KEY = "old-secret-key-" + "o" * 40
NEW_SECRET_KEY = "new-secret-key-" + "n" * 40


def rotatesecrets() -> str:
    out = io.StringIO()
    call_command("rotatesecrets", stdout=out)
    return out.getvalue()


def raw(model, pk, field):
    return model.objects.values_list(field, flat=True).get(pk=pk)


def readable_with_only(key: str, token: str) -> bool:
    try:
        Fernet(key).decrypt(token.encode())
    except Exception:
        return False
    return True


# -- Keys ---------------------------------------------------------------------------------------------------


def test_setting_secrets_keys_for_the_first_time_keeps_existing_secrets_readable(settings):
    settings.SECRET_KEY, settings.SECRETS_KEYS = OLD_SECRET_KEY, []
    box = MailboxFactory(password="before the key")
    new_key = Fernet.generate_key().decode()

    settings.SECRETS_KEYS = [new_key]

    box.refresh_from_db()
    assert box.get_secret() == "before the key"  # the derived key still decrypts
    box.set_secret("after the key")
    assert readable_with_only(new_key, box.secret)  # new writes use SECRETS_KEYS


def test_secret_key_can_be_rotated_through_secret_key_fallbacks_and_rotatesecrets(settings):
    settings.SECRET_KEY, settings.SECRETS_KEYS = OLD_SECRET_KEY, []
    box = MailboxFactory(password="imap password")

    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = NEW_SECRET_KEY, [OLD_SECRET_KEY]
    assert Mailbox.objects.get(pk=box.pk).get_secret() == "imap password"
    rotatesecrets()

    settings.SECRET_KEY_FALLBACKS = []
    assert Mailbox.objects.get(pk=box.pk).get_secret() == "imap password"


def test_without_the_old_key_a_secret_is_unreadable_not_garbage(settings):
    settings.SECRET_KEY, settings.SECRETS_KEYS = OLD_SECRET_KEY, []
    box = MailboxFactory(password="imap password")
    settings.SECRET_KEY = NEW_SECRET_KEY
    with pytest.raises(crypto.SecretUnreadable):
        Mailbox.objects.get(pk=box.pk).get_secret()


# -- rotatesecrets ------------------------------------------------------------------------------------------


def test_rotatesecrets_reencrypts_every_stored_secret_with_the_newest_key(settings):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.SECRETS_KEYS = [old]
    box = MailboxFactory(password="imap password")
    target = SiteTargetFactory()
    target.set_service_account(json.dumps(service_account_key(GOOGLE_TOKEN_URI)))
    target.save()
    settings.SECRETS_KEYS = [new, old]

    out = rotatesecrets()

    assert "mailpoll.Mailbox.secret: 1 rotated, 0 already on the newest key" in out
    assert "seoinsight.SiteTarget.search_console_credentials: 1 rotated" in out
    assert readable_with_only(new, raw(Mailbox, box.pk, "secret"))
    assert readable_with_only(new, raw(SiteTarget, target.pk, "search_console_credentials"))
    settings.SECRETS_KEYS = [new]  # the old key can go now
    assert Mailbox.objects.get(pk=box.pk).get_secret() == "imap password"
    assert SiteTarget.objects.get(pk=target.pk).service_account_info()["token_uri"] == GOOGLE_TOKEN_URI

    again = rotatesecrets()
    assert "mailpoll.Mailbox.secret: 0 rotated, 1 already on the newest key" in again


def test_rotatesecrets_names_what_no_key_can_read_and_still_rotates_the_rest(settings):
    lost, old, new = (Fernet.generate_key().decode() for _ in range(3))
    settings.SECRETS_KEYS = [lost]
    orphan = MailboxFactory(password="written with a key since lost")
    settings.SECRETS_KEYS = [old]
    kept = MailboxFactory(password="still readable")
    settings.SECRETS_KEYS = [new, old]

    unreadable = f"1 secret\\(s\\) no configured key can decrypt.*mailpoll.Mailbox {orphan.pk}"
    with pytest.raises(CommandError, match=unreadable):
        rotatesecrets()

    assert readable_with_only(new, raw(Mailbox, kept.pk, "secret"))
    assert readable_with_only(lost, raw(Mailbox, orphan.pk, "secret"))  # left exactly as it was


def test_a_secret_typed_during_the_rotation_is_not_overwritten(settings, monkeypatch):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.SECRETS_KEYS = [old]
    box = MailboxFactory(password="the old password")
    settings.SECRETS_KEYS = [new, old]
    rotate = crypto.rotate

    def rotate_while_an_operator_saves(token):
        fresh = Mailbox.objects.get(pk=box.pk)
        fresh.set_secret("typed meanwhile")
        fresh.save(update_fields=["secret"])
        return rotate(token)

    monkeypatch.setattr(crypto, "rotate", rotate_while_an_operator_saves)
    result = crypto.rotate_column(crypto.Column("mailpoll.Mailbox", "secret"))

    assert (result.rotated, result.replaced) == (0, 1)
    assert Mailbox.objects.get(pk=box.pk).get_secret() == "typed meanwhile"


# -- token_uri ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("uri", [
    "http://oauth2.googleapis.com/token",          # plain HTTP
    "https://oauth2.googleapis.com/token/../x",
    "https://oauth2.googleapis.com.evil.example/token",
    "http://169.254.169.254/latest/meta-data/",
    "http://127.0.0.1:8000/admin/",
    ["https://oauth2.googleapis.com/token"],
])
def test_a_key_whose_token_uri_is_not_googles_is_refused(uri):
    target = SiteTargetFactory()
    with pytest.raises(ValueError, match="token_uri must be Google's token endpoint"):
        target.set_service_account(json.dumps(service_account_key("x") | {"token_uri": uri}))
    assert not target.has_search_console_credentials


def test_googles_token_endpoint_is_accepted_and_the_setting_widens_the_list(settings):
    target = SiteTargetFactory()
    target.set_service_account(json.dumps(service_account_key(GOOGLE_TOKEN_URI)))
    with pytest.raises(ValueError):
        target.set_service_account(json.dumps(service_account_key("http://127.0.0.1:9/token")))
    settings.SEARCH_CONSOLE_TOKEN_URIS = [GOOGLE_TOKEN_URI, "http://127.0.0.1:9/token"]
    target.set_service_account(json.dumps(service_account_key("http://127.0.0.1:9/token")))


def pull(target):
    imp = searchconsole_api.create_api_import(target, date(2026, 10, 1), date(2026, 10, 3))
    run_burst()
    imp.refresh_from_db()
    return imp


def test_a_stored_key_whose_token_uri_is_no_longer_allowed_is_refused_at_use(settings, token_server):
    settings.SEARCH_CONSOLE_TOKEN_URIS = [token_server.uri]
    target = SiteTargetFactory(search_console_property="https://www.example.com/")
    target.set_service_account(json.dumps(service_account_key(token_server.uri)))
    target.save()
    settings.SEARCH_CONSOLE_TOKEN_URIS = [GOOGLE_TOKEN_URI]  # the operator narrowed the list since

    imp = pull(target)

    assert imp.status == "failed"
    assert "the stored service-account key is refused: token_uri must be Google's token endpoint" in imp.error
    assert token_server.grants == []  # nothing was sent there


def test_the_token_endpoints_words_never_reach_the_tenant(settings, token_server):
    settings.SEARCH_CONSOLE_TOKEN_URIS = [token_server.uri]
    target = SiteTargetFactory(search_console_property="https://www.example.com/")
    target.set_service_account(json.dumps(service_account_key(token_server.uri)))
    target.save()
    token_server.refuse = "internal db password is hunter2"

    imp = pull(target)

    assert imp.status == "failed"
    assert "the token endpoint answered HTTP 400 (invalid_grant)" in imp.error
    assert "hunter2" not in imp.error
    assert "hunter2" not in imp.job.error


class IntranetPage(_LoopbackServer):
    """A loopback web server answering every request with an HTML page, as an internal service would."""

    BODY = b"<html><body>intranet: payroll 2026, admin password swordfish</body></html>"

    def __init__(self):
        body = self.BODY

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format, *args):
                pass

        self._listen(Handler, name="intranet-page")
        self.uri = f"{self._origin}/token"

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def test_an_allowed_endpoint_answering_html_shows_only_its_status(settings):
    with IntranetPage() as page:
        settings.SEARCH_CONSOLE_TOKEN_URIS = [page.uri]
        target = SiteTargetFactory(search_console_property="https://www.example.com/")
        target.set_service_account(json.dumps(service_account_key(page.uri)))
        target.save()

        imp = pull(target)

    assert imp.status == "failed"
    assert imp.error.endswith("the token endpoint answered HTTP 200")
    assert "swordfish" not in imp.error and "intranet" not in imp.error


@pytest.mark.parametrize("exc, status, expected", [
    (RefreshError("invalid_grant: Invalid JWT", {"error": "invalid_grant"}), 400,
     "the token endpoint answered HTTP 400 (invalid_grant)"),
    (RefreshError('{"error": "<script>"}', {"error": "<script>"}), 400, "the token endpoint answered HTTP 400"),
    (RefreshError("x", {"error": "a" * 41}), 400, "the token endpoint answered HTTP 400"),
    (RefreshError("<html>intranet</html>"), 200, "the token endpoint answered HTTP 200"),
    (RefreshError("x", ["not", "a", "dict"]), 502, "the token endpoint answered HTTP 502"),
    (TransportError("connection refused to 10.0.0.5"), None,
     "the token endpoint could not be reached (TransportError)"),
])
def test_token_failure(exc, status, expected):
    assert searchconsole_client.token_failure(exc, status) == expected

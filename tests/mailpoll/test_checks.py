"""The mail intake's system checks, each both ways."""

import os
import subprocess
import sys

import psycopg
import pytest
from django.db import connection
from psycopg import sql

from mailpoll.checks import (check_endpoints, check_limits_agree, check_mailboxes_can_authenticate,
                             check_mailboxes_have_targets, check_values, limit_warnings)
from tests.factories import SiteTargetFactory
from tests.mailpoll.factories import AttachmentFactory, MailboxFactory
from tests.support.processes import ROOT, database_url


def ids(messages) -> list[str]:
    return [m.id for m in messages]


def test_the_defaults_pass():
    assert check_values() == []
    assert check_limits_agree() == []


@pytest.mark.parametrize("name", ["MAILPOLL_INTERVAL", "MAILPOLL_FETCH_BATCH", "MAILPOLL_CONCURRENCY",
                                  "MAILPOLL_SOCKET_TIMEOUT", "MAILPOLL_MAX_MESSAGE_BYTES"])
def test_a_count_size_or_duration_must_be_above_zero(name, settings):
    setattr(settings, name, 0)
    (error,) = check_values()
    assert error.id == "mailpoll.E002" and error.msg.startswith(f"{name} is 0")


def test_an_environment_text_of_the_wrong_type_is_reported_not_raised(monkeypatch):
    monkeypatch.setenv("MAILPOLL_FETCH_BATCH", "lots")
    assert ids(check_values()) == ["mailpoll.E001"]
    assert check_limits_agree() == []  # nothing to compare, and no exception


LIMITS = dict(stuck_after=900, job_stale_after=60, poll_deadline=300, socket_timeout=60)


@pytest.mark.parametrize(("changes", "expected"), [
    ({}, []),
    ({"stuck_after": 59}, ["mailpoll.W001"]),
    ({"stuck_after": 60}, []),
    ({"poll_deadline": 60}, ["mailpoll.W002"]),
    ({"poll_deadline": 61}, []),
    ({"stuck_after": 30, "poll_deadline": 30}, ["mailpoll.W001", "mailpoll.W002"]),
])
def test_limits_that_contradict_each_other(changes, expected):
    assert ids(limit_warnings(**{**LIMITS, **changes})) == expected


def test_the_watchdog_is_compared_with_the_queue_s_own_threshold(settings):
    settings.JOBS_STALE_AFTER = 1200
    assert ids(check_limits_agree()) == ["mailpoll.W001"]


@pytest.mark.django_db
def test_a_mailbox_receiving_csvs_without_a_target_is_named():
    untargeted = MailboxFactory(site_target=None)
    AttachmentFactory(request__mailbox=untargeted, document_type="csv")
    targeted = MailboxFactory()
    AttachmentFactory(request__mailbox=targeted, document_type="xlsx")
    pdf_only = MailboxFactory(site_target=None)
    AttachmentFactory(request__mailbox=pdf_only, document_type="pdf", filename="a.pdf", mime="application/pdf")
    disabled = MailboxFactory(site_target=None, enabled=False)
    AttachmentFactory(request__mailbox=disabled, document_type="csv")

    assert check_mailboxes_have_targets() == []  # a database check: only with databases given
    (warning,) = check_mailboxes_have_targets(databases=["default"])
    assert (warning.id, warning.obj) == ("mailpoll.W003", untargeted)

    untargeted.site_target = SiteTargetFactory(site__org=untargeted.org)
    untargeted.save()
    assert check_mailboxes_have_targets(databases=["default"]) == []


@pytest.mark.django_db
def test_the_database_check_passes_on_a_database_not_yet_migrated():
    """``migrate`` runs the database checks before it creates the tables it would read."""
    params = connection.get_connection_params()
    name = f"{connection.settings_dict['NAME']}_empty"
    admin = {key: value for key, value in params.items() if key not in ("dbname", "cursor_factory", "context")}
    with psycopg.connect(dbname="postgres", autocommit=True, **admin) as server:
        server.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        result = subprocess.run(
            [sys.executable, "manage.py", "check", "--database", "default"], cwd=ROOT, capture_output=True,
            text=True, timeout=120, env={**os.environ, "DATABASE_URL": database_url({**connection.settings_dict,
                                                                                       "NAME": name})},
        )
    finally:
        with psycopg.connect(dbname="postgres", autocommit=True, **admin) as server:
            server.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


@pytest.mark.django_db
@pytest.mark.parametrize("fields, settings_values, problem", [
    ({"provider": "imap", "auth": "password", "password": ""}, {}, "no password stored"),
    ({"provider": "gmail", "auth": "service"}, {}, "no service account key"),
    ({"provider": "gmail", "auth": "service"}, {"MAILPOLL_GOOGLE_SERVICE_ACCOUNT_FILE": "/nonexistent/key.json"},
     "(/nonexistent/key.json is no file)"),
    ({"provider": "gmail", "auth": "oauth"}, {}, "no OAuth client id: set the mailbox's client id or "
     "MAILPOLL_GOOGLE_CLIENT_ID"),
    ({"provider": "imap", "auth": "oauth", "oauth_provider": "microsoft"}, {}, "MAILPOLL_MICROSOFT_CLIENT_ID"),
    ({"provider": "graph", "auth": "service", "client_id": "app-1"}, {}, "no client secret for app-only access"),
    ({"provider": "graph", "auth": "service"}, {"MAILPOLL_MICROSOFT_CLIENT_ID": "app-1",
                                                "MAILPOLL_MICROSOFT_CLIENT_SECRET": "s"},
     "app-only access needs the tenant's own id or domain, not 'organizations'"),
])
def test_a_mailbox_that_cannot_authenticate_is_named_by_check(fields, settings_values, problem, settings):
    for name, value in settings_values.items():
        setattr(settings, name, value)
    password = fields.pop("password", "secret")
    mailbox = MailboxFactory(host="" if fields["provider"] != "imap" else "127.0.0.1", password=password, **fields)
    if not password:
        mailbox.set_secret("")
        mailbox.save()
    (warning,) = check_mailboxes_can_authenticate(databases=["default"])
    assert (warning.id, warning.obj) == ("mailpoll.W004", mailbox)
    assert problem in warning.msg


@pytest.mark.django_db
@pytest.mark.parametrize("fields, settings_values", [
    ({"provider": "imap", "auth": "password"}, {}),
    ({"provider": "gmail", "auth": "oauth"}, {"MAILPOLL_GOOGLE_CLIENT_ID": "web-client"}),
    ({"provider": "graph", "auth": "service", "tenant": "contoso.onmicrosoft.com"},
     {"MAILPOLL_MICROSOFT_CLIENT_ID": "app-1", "MAILPOLL_MICROSOFT_CLIENT_SECRET": "s"}),
    ({"provider": "graph", "auth": "oauth", "client_id": "own-app"}, {}),
    ({"provider": "imap", "auth": "oauth", "oauth_provider": "google"}, {"MAILPOLL_GOOGLE_CLIENT_ID": "web-client"}),
])
def test_a_mailbox_with_its_credentials_passes(fields, settings_values, settings):
    for name, value in settings_values.items():
        setattr(settings, name, value)
    MailboxFactory(host="" if fields["provider"] != "imap" else "127.0.0.1", **fields)
    assert check_mailboxes_can_authenticate(databases=["default"]) == []


def test_a_gmail_service_mailbox_may_take_its_key_from_the_settings_file(tmp_path, settings, db):
    key = tmp_path / "key.json"
    key.write_text("{}")
    settings.MAILPOLL_GOOGLE_SERVICE_ACCOUNT_FILE = str(key)
    MailboxFactory(provider="gmail", auth="service", host="")
    assert check_mailboxes_can_authenticate(databases=["default"]) == []


@pytest.mark.parametrize("name", ["MAILPOLL_GOOGLE_TOKEN_URL", "MAILPOLL_GRAPH_API_URL",
                                  "MAILPOLL_MICROSOFT_AUTHORITY"])
@pytest.mark.parametrize("value", ["http://oauth.example.com/token", "ftp://127.0.0.1/", "not a url"])
def test_an_endpoint_that_would_carry_tokens_in_clear_text_is_an_error(name, value, settings):
    setattr(settings, name, value)
    (error,) = check_endpoints()
    assert error.id == "mailpoll.E003" and error.msg.startswith(f"{name} (")


def test_the_default_endpoints_and_loopback_http_pass(settings):
    assert check_endpoints() == []
    settings.MAILPOLL_GMAIL_API_URL = "http://127.0.0.1:8123/"
    assert check_endpoints() == []


# Each URL, and whether a credential may be sent to it: the same table for both checks (tests/outbox/test_checks.py
# reads it). The forms a parser differential needs are refused whatever host one parser sees.
ENDPOINT_FORMS = [
    ("https://oauth2.googleapis.com/token", True),
    ("http://127.0.0.1:8080/token", True),
    ("http://localhost:8080/token", True),
    ("HTTP://127.0.0.1:8080/token", True),
    ("http://[::1]:8080/token", True),
    ("http://127.0.0.2:8080/token", True),  # 127.0.0.0/8 is all loopback
    ("http://oauth.example.com/token", False),  # plain http off the machine
    ("ftp://127.0.0.1/", False),
    ("not a url", False),
    ("cms.example/documents", False),
    ("http://127.0.0.2:8080\\@127.0.0.1/token", False),  # urlsplit sees 127.0.0.1, requests connects to .2
    ("http://evil.example\\@127.0.0.1/token", False),
    ("http://evil.example@127.0.0.1/token", False),  # userinfo: whose host is it?
    ("http://user:pw@127.0.0.1/token", False),
    ("http://127.0.0.1:80@evil.example/token", False),
    ("http://127.0.0.1 @evil.example/token", False),  # spaces
    ("http://127.0.0.1\t.evil.example/token", False),
    ("http://127.1/token", False),  # 127.1 is 127.0.0.1 to inet_aton, not to ipaddress: refused, never guessed
    ("http://0x7f.1/token", False),
    ("http://2130706433/token", False),
    ("http://localhost.evil.example/token", False),
    ("http://127.0.0.1.nip.io/token", False),
    ("http://[::1/token", False),
    ("http:///token", False),
    ("http://127.0.0.1:99999/token", False),
]


@pytest.mark.parametrize(("url", "allowed"), ENDPOINT_FORMS)
def test_an_endpoint_url_is_read_as_the_client_reads_it(url, allowed, settings):
    settings.MAILPOLL_GRAPH_API_URL = url

    found = check_endpoints()

    assert ids(found) == ([] if allowed else ["mailpoll.E003"])
    assert "/token" not in "".join(m.msg for m in found)  # the origin only


def test_a_key_in_an_endpoint_url_is_not_printed(settings):
    settings.MAILPOLL_GOOGLE_TOKEN_URL = "http://oauth.example.com/token?key=s3cret"

    (error,) = check_endpoints()

    assert "http://oauth.example.com" in error.msg and "s3cret" not in error.msg

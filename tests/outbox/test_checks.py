"""The outbox's system checks: a URL that is none, clear text off the machine, a lease shorter than a try."""

import pytest

from outbox import checks
from tests.mailpoll.test_checks import ENDPOINT_FORMS


def ids(settings_fixture, **values):
    for name, value in values.items():
        setattr(settings_fixture, name, value)
    return sorted(message.id for message in checks.check_downstream() + checks.check_values())


@pytest.mark.parametrize(("values", "expected"), [
    ({"DOWNSTREAM_URL": ""}, []),
    ({"DOWNSTREAM_URL": "https://cms.example/api/documents"}, []),
    ({"DOWNSTREAM_URL": "http://127.0.0.1:8080/documents"}, []),
    ({"DOWNSTREAM_URL": "http://cms.internal/documents"}, ["outbox.W002"]),
    ({"DOWNSTREAM_URL": "http://cms.internal/documents", "DOWNSTREAM_TOKEN": "s3cret"}, ["outbox.E004"]),
    ({"DOWNSTREAM_URL": "https://cms.example/api/documents", "DOWNSTREAM_TOKEN": "s3cret"}, []),
    ({"DOWNSTREAM_URL": "http://localhost:8080/documents", "DOWNSTREAM_TOKEN": "s3cret"}, []),
    ({"DOWNSTREAM_URL": "cms.example/documents"}, ["outbox.E003"]),
    ({"DOWNSTREAM_URL": "ftp://cms.example/"}, ["outbox.E003"]),
    ({"OUTBOX_LEASE_SECONDS": 30.0, "DOWNSTREAM_TIMEOUT": 30.0}, ["outbox.W001"]),
    ({"OUTBOX_CAPACITY": 0}, ["outbox.E002"]),
    ({"OUTBOX_SENDERS": -1}, ["outbox.E002"]),
])
def test_checks(settings, values, expected):
    assert ids(settings, **values) == expected


def test_an_unreadable_environment_value_is_reported(monkeypatch):
    monkeypatch.setenv("OUTBOX_CAPACITY", "lots")
    assert [m.id for m in checks.check_values()] == ["outbox.E001"]
    assert checks.check_downstream() == []


@pytest.mark.parametrize(("url", "allowed"), ENDPOINT_FORMS)
def test_the_downstream_url_is_read_as_the_sender_reads_it(settings, url, allowed):
    found = ids(settings, DOWNSTREAM_URL=url, DOWNSTREAM_TOKEN="s3cret")

    assert (found == []) is allowed, found
    if not allowed:
        assert found in (["outbox.E003"], ["outbox.E004"])


@pytest.mark.parametrize("url", ["http://127.0.0.2:8080\\@127.0.0.1/in", "http://evil.example@127.0.0.1/in",
                                 "http://127.0.0.1 @evil.example/in", "http://127.1/in"])
def test_a_url_one_parser_reads_as_loopback_is_not_passed_as_local(settings, url):
    assert ids(settings, DOWNSTREAM_URL=url, DOWNSTREAM_TOKEN="s3cret") != []
    assert ids(settings, DOWNSTREAM_URL=url, DOWNSTREAM_TOKEN="") != []


def test_a_key_in_the_downstream_url_is_not_printed(settings):
    settings.DOWNSTREAM_URL, settings.DOWNSTREAM_TOKEN = "http://cms.internal/in?api_key=s3cret", "t"

    (error,) = checks.check_downstream()

    assert error.id == "outbox.E004" and "http://cms.internal" in error.msg and "s3cret" not in error.msg

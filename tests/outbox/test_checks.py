"""The outbox's system checks: a URL that is none, clear text off the machine, a lease shorter than a try."""

import pytest

from outbox import checks


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

import pytest

from jobs.checks import (
    check_guard_indexes,
    check_heartbeat_against_staleness,
    check_postgresql,
    check_state_rules,
    check_values,
    engine_errors,
)


def test_a_heartbeat_slower_than_half_the_threshold_is_flagged(settings):
    settings.JOBS_HEARTBEAT_INTERVAL = 40
    settings.JOBS_STALE_AFTER = 60
    ids = {m.id for m in check_heartbeat_against_staleness()}
    assert ids == {"jobs.W001"}


def test_default_heartbeat_and_threshold_pass(settings):
    settings.JOBS_HEARTBEAT_INTERVAL = 10
    settings.JOBS_STALE_AFTER = 60
    assert check_heartbeat_against_staleness() == []


def test_only_postgresql_is_accepted():
    assert check_postgresql() == []
    assert [m.id for m in engine_errors("django.db.backends.sqlite3")] == ["jobs.E001"]


@pytest.mark.parametrize("engine", ["django.db.backends.postgresql", "seoinsight.embedded_db"])
def test_postgresql_under_another_backend_name_is_postgresql(engine):
    assert engine_errors(engine) == []


@pytest.mark.parametrize("name", ["JOBS_POLL_INTERVAL", "JOBS_HEARTBEAT_INTERVAL", "JOBS_STALE_AFTER",
                                  "JOBS_SWEEP_INTERVAL"])
def test_an_interval_must_be_above_zero(name, settings):
    assert check_values() == []
    setattr(settings, name, 0)
    assert [(m.id, m.msg.startswith(name)) for m in check_values()] == [("jobs.E003", True)]


def test_a_database_timeout_of_zero_is_off_not_an_error(settings):
    settings.JOBS_DB_STATEMENT_TIMEOUT = 0
    assert check_values() == []


def test_an_environment_text_of_the_wrong_type_is_reported_not_raised(monkeypatch):
    monkeypatch.setenv("JOBS_STALE_AFTER", "a minute")
    assert [m.id for m in check_values()] == ["jobs.E002"]
    assert check_heartbeat_against_staleness() == []  # nothing to compare, and no exception


def test_a_guard_on_a_key_without_its_claim_index_is_flagged(guarded_type, temporary_type):
    assert check_guard_indexes() == []  # test_guarded: site_id, indexed
    temporary_type("test_guarded_elsewhere", lambda job: None, one_running_per="mailbox_id")
    assert [(m.id, "'mailbox_id'" in m.msg) for m in check_guard_indexes()] == [("jobs.W002", True)]


@pytest.mark.django_db
@pytest.mark.parametrize("enable, expected", [("DISABLE", ["jobs.E004"]), ("ENABLE REPLICA", ["jobs.E004"]),
                                              ("ENABLE ALWAYS", []), ("ENABLE", [])])
def test_the_state_rules_trigger_must_fire(enable, expected):
    from django.db import connection

    assert check_state_rules(databases=["default"]) == []
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE jobs {enable} TRIGGER jobs_state_rules")  # undone with the test's transaction
    assert [m.id for m in check_state_rules(databases=["default"])] == expected
    assert check_state_rules(databases=None) == []  # database checks were not asked for

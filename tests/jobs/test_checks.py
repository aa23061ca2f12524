from jobs.checks import check_guard_indexes, check_heartbeat_against_staleness, check_postgresql, engine_errors


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


def test_a_guard_on_a_key_without_its_claim_index_is_flagged(guarded_type, temporary_type):
    assert check_guard_indexes() == []  # test_guarded: site_id, indexed
    temporary_type("test_guarded_elsewhere", lambda job: None, one_running_per="mailbox_id")
    assert [(m.id, "'mailbox_id'" in m.msg) for m in check_guard_indexes()] == [("jobs.W002", True)]

"""SIGTERM of a runjobs whose sender has a backlog costs at most the try under way: the sender stops claiming
once its worker is stopping (counted by the downstream, not by a clock)."""

import signal

import pytest

from outbox.models import Entry
from tests.support.fake_downstream import FakeDownstream
from tests.support.processes import runjobs, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]


def test_sigterm_during_a_backlog_costs_at_most_the_try_under_way(held, processes, settings):
    fake = FakeDownstream(answers=["hang"] * 50)  # each try lasts DOWNSTREAM_TIMEOUT
    settings.DOWNSTREAM_URL = fake.url
    try:
        held(20)
        worker = processes(runjobs, DOWNSTREAM_URL=fake.url, DOWNSTREAM_TIMEOUT="2", OUTBOX_SENDERS="1",
                           OUTBOX_SENDER_SECONDS="600", OUTBOX_RETRY_BASE_SECONDS="600")
        wait_for(lambda: len(fake.requests) >= 2, timeout=30, message="the sender working through its backlog")
        tried = len(fake.requests)
        worker.signal(signal.SIGTERM)

        assert worker.wait(timeout=60) == 0, worker.output()
        assert len(fake.requests) - tried <= 1, f"{len(fake.requests) - tried} tries after SIGTERM"
        assert Entry.objects.count() == 20  # nothing lost: the rest waits for the next worker
    finally:
        fake.close()

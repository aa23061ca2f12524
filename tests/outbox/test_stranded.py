"""No held document is stranded: after an outage longer than a sender's budget, and after a kill -9 of the
workers mid-delivery, every document is delivered once due — without new mail, an operator or any other wake
(real runjobs processes; the periodic duty of outbox.watch is what picks them up)."""

import pytest

from jobs.models import Job
from outbox.models import Entry
from outbox.wake import JOB_TYPE
from tests.outbox.downstreams import Failing
from tests.support.fake_downstream import FakeDownstream
from tests.support.processes import runjobs, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]


def env(fake, **extra):
    return {"DOWNSTREAM_URL": fake.url, "DOWNSTREAM_TIMEOUT": "5", "OUTBOX_RETRY_BASE_SECONDS": "0.5",
            "OUTBOX_RETRY_MAX_SECONDS": "2", "OUTBOX_SENDER_SECONDS": "1", "OUTBOX_SENDERS": "2",
            "OUTBOX_WATCH_SECONDS": "1", **extra}


def no_sender_live() -> bool:
    return not Job.objects.filter(type=JOB_TYPE, status__in=["queued", "running"]).exists()


@pytest.fixture
def failing(settings):
    fake = Failing()
    settings.DOWNSTREAM_URL = fake.url
    yield fake
    fake.close()


def test_an_outage_longer_than_the_senders_budget_ends_in_delivery_without_new_mail(failing, held, processes):
    held(5)
    keys = {str(k) for k in Entry.objects.values_list("key", flat=True)}
    processes(runjobs, **env(failing))

    # Down for longer than a sender's budget: each sender ends, and at some moment none is queued or running.
    wait_for(lambda: failing.failed >= 10, timeout=30, message="tries refused by the downstream")
    wait_for(no_sender_live, timeout=30, message="a moment with no sender queued or running")
    failing.failing.clear()  # the downstream recovers; nothing else happens

    wait_for(lambda: not Entry.objects.exists(), timeout=30, message="every held document delivered")
    assert failing.keys() == keys


def test_documents_in_flight_when_the_workers_are_killed_are_delivered_after_their_lease(held, processes,
                                                                                        settings):
    fake = FakeDownstream(answers=["hang", "hang"])
    settings.DOWNSTREAM_URL = fake.url
    try:
        held(2)
        keys = {str(k) for k in Entry.objects.values_list("key", flat=True)}
        settings_env = env(fake, OUTBOX_LEASE_SECONDS="4", DOWNSTREAM_TIMEOUT="30")
        first, second = processes(runjobs, **settings_env), processes(runjobs, **settings_env)
        wait_for(lambda: len(fake.requests) == 2, timeout=30, message="both documents in flight")
        first.kill9()
        second.kill9()
        assert Entry.objects.filter(state="sending").count() == 2

        processes(runjobs, **settings_env)  # a fresh worker: the dead senders' jobs are swept back to the queue
        wait_for(lambda: not Entry.objects.exists(), timeout=40, message="the in-flight documents delivered")
        assert fake.keys() == keys
        assert all(fake.tries(key) == 2 for key in keys)
        # A killed sender is no failure to show an operator: its entries' leases protected them, not its job.
        wait_for(no_sender_live, timeout=30, message="every sender ended")
        senders = list(Job.objects.filter(type=JOB_TYPE).values_list("status", "error"))
        assert senders and all(status == "done" for status, _ in senders), senders
    finally:
        fake.close()

"""Senders in real runjobs processes: every document delivered, none sent twice at once, a kill -9 survived."""

import pytest

from outbox import entries
from outbox.models import Entry
from outbox.wake import wake
from tests.support.fake_downstream import FakeDownstream
from tests.support.processes import run_burst, runjobs, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def slow_downstream(settings):
    fake = FakeDownstream(delay=0.02)
    settings.DOWNSTREAM_URL = fake.url
    yield fake
    fake.close()


def sender_env(fake, **extra):
    return {"DOWNSTREAM_URL": fake.url, "DOWNSTREAM_TIMEOUT": "5", "OUTBOX_RETRY_BASE_SECONDS": "0.2",
            "OUTBOX_RETRY_MAX_SECONDS": "0.5", "OUTBOX_SENDER_SECONDS": "5", "OUTBOX_SENDERS": "3",
            "LOG_LEVEL": "INFO", **extra}


def test_several_senders_deliver_every_document_and_never_one_twice_at_once(slow_downstream, held, processes):
    slow_downstream.answers = ["ok"] * 5 + [500, 500, 500]
    refs = held(30)
    keys = {str(k) for k in Entry.objects.values_list("key", flat=True)}
    for _ in range(3):
        processes(runjobs, **sender_env(slow_downstream))

    wait_for(lambda: slow_downstream.keys() == keys and not Entry.objects.exists(), timeout=40,
             message="every document delivered")
    assert slow_downstream.overlaps == 0
    # One try per claim: 30 documents, 3 of them answered 500 once and sent again.
    assert len(slow_downstream.requests) == len(refs) + 3
    assert sorted(slow_downstream.tries(k) for k in keys).count(2) == 3


def test_a_sender_killed_mid_send_leaves_its_document_to_the_lease(slow_downstream, held, processes, settings):
    slow_downstream.answers = ["hang"]
    held(1)
    key = str(Entry.objects.get().key)
    killed = processes(runjobs, **sender_env(slow_downstream, OUTBOX_LEASE_SECONDS="2", DOWNSTREAM_TIMEOUT="30"))
    assert slow_downstream.hanging.wait(30), killed.output()
    killed.kill9()  # holding the claim, its request unanswered

    settings.OUTBOX_LEASE_SECONDS = 2
    settings.OUTBOX_SENDER_SECONDS = 10
    wake(Entry.objects.get().org_id)
    run_burst()  # waits for the dead sender's lease to expire, then sends

    assert not Entry.objects.exists()
    assert slow_downstream.keys() == {key} and slow_downstream.tries(key) == 2
    assert entries.next_due_in() is None

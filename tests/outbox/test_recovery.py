"""A downstream back after an outage: its first acknowledgement makes the documents that found it unreachable
due at once, instead of after their backoff (up to OUTBOX_RETRY_MAX_SECONDS); a document it refused keeps its
wait (a loopback FakeDownstream, the sender in this process)."""

import pytest
from django.urls import reverse
from django.utils import timezone

from outbox import sender
from outbox.models import Entry


def due(ref: str) -> bool:
    return Entry.objects.get(document_ref=ref).next_attempt_at <= timezone.now()


def test_one_success_makes_the_documents_that_found_it_unreachable_due_not_the_refused_one(downstream, held,
                                                                                         settings):
    settings.OUTBOX_RETRY_BASE_SECONDS = 600.0  # a failed try waits ten minutes, as after a long outage
    settings.OUTBOX_RETRY_MAX_SECONDS = 3600.0
    unavailable, refused = held(2, "down"), held(1, "bad")
    downstream.answers = [503, 503, 422]
    for _ in range(3):
        assert sender.run(budget=0) == {"delivered": 0, "failed": 1}
    assert not any(due(ref) for ref in unavailable + refused)
    unreachable = dict(Entry.objects.values_list("document_ref", "unreachable"))
    assert unreachable == {"down:0": True, "down:1": True, "bad:0": False}

    [fresh] = held(1, "new")  # the downstream is back: the next document is acknowledged
    downstream.answers = ["ok"]
    assert sender.run(budget=0) == {"delivered": 1, "failed": 0}

    assert all(due(ref) for ref in unavailable)
    assert not due(refused[0])  # refused for what it is: a success elsewhere says nothing about it
    assert sender.run(budget=2) == {"delivered": 2, "failed": 0}
    assert set(Entry.objects.values_list("document_ref", flat=True)) == {"bad:0"}
    assert {r.document["ref"] for r in downstream.documents.values()} == {fresh, *unavailable}


def test_a_downstream_that_does_not_answer_at_all_counts_as_unreachable(downstream, held, settings):
    settings.OUTBOX_RETRY_BASE_SECONDS = 600.0
    held(1)
    downstream.close()  # nothing listens there any more: connection refused

    assert sender.run(budget=0) == {"delivered": 0, "failed": 1}

    entry = Entry.objects.get()
    assert entry.unreachable and not due(entry.document_ref) and entry.last_error


@pytest.mark.parametrize("answer, unreachable", [
    (502, True), (503, True), (504, True),  # a proxy or the downstream saying it is not there right now
    (500, False), (422, False), (429, False), (404, False), ("redirect:http://127.0.0.1:9/x", False),
])
def test_only_an_answer_that_says_unavailable_marks_a_document_unreachable(downstream, held, answer, unreachable):
    held(1)
    downstream.answers = [answer]

    assert sender.run(budget=0) == {"delivered": 0, "failed": 1}

    assert Entry.objects.get().unreachable is unreachable


def test_the_outbox_page_says_a_document_that_found_it_unreachable_goes_as_soon_as_it_answers(
        admin_client, downstream, held, settings):
    settings.OUTBOX_RETRY_BASE_SECONDS = 600.0
    held(1, "down")
    held(1, "bad")
    downstream.answers = [503, 422]
    for _ in range(2):
        sender.run(budget=0)

    page = admin_client.get(reverse("admin:outbox_entry_changelist")).content.decode()

    assert page.count("or as soon as the downstream answers again") == 1

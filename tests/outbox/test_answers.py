"""What the sender reads of an answer and what it writes down: a few KB at most of any answer (a 2xx's body
is not read at all), errors that name the downstream's host only (a key in DOWNSTREAM_URL's query stays out
of last_error, the logs and the admin), and a delivery counted once however many senders got a 2xx."""

import logging
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from outbox import entries, sender
from outbox.models import Entry
from tests.outbox.downstreams import Echo, HugeAnswer, KeepAlive
from tests.factories import UserFactory
from tests.support.loopback import free_port

pytestmark = pytest.mark.django_db

SECRET = "k3y-9d2f-do-not-show"
# Far more than the kernel's socket buffers on loopback hold: what was sent past them was read.
MOST_SENT = 16 * 1024 * 1024


@pytest.fixture
def huge(settings, downstream):
    """A downstream answering with 200 MB, the outbox pointed at it."""

    def start(status):
        fake = HugeAnswer(status=status)
        settings.DOWNSTREAM_URL = fake.url
        return fake

    made = []
    yield lambda status: made.append(start(status)) or made[-1]
    for fake in made:
        fake.close()


@pytest.mark.parametrize("status", [200, 400, 500])
def test_a_huge_answer_is_not_read(huge, held, status):
    fake = huge(status)
    held(1)
    report = sender.run()
    assert fake.answered.wait(30)

    assert fake.sent < MOST_SENT, f"the sender read {fake.sent:,} bytes of a 200 MB answer"
    if status == 200:
        assert report["delivered"] == 1 and not Entry.objects.exists()
    else:
        entry = Entry.objects.get()
        assert report["failed"] == 1 and entry.last_error.startswith(f"HTTP {status}: xxx")
        assert len(entry.last_error) < 1000


@pytest.mark.parametrize(("answer", "connections"), [(b'{"ok": true}', 1), (b"x" * (sender.KEEP_BYTES * 4), 3)])
def test_a_short_acknowledgement_keeps_the_connection_for_the_next_document(downstream, settings, held, answer,
                                                                              connections):
    """Over https a connection per document would be a TLS handshake per document: a small answer is read out and
    its connection reused; a large one is not read, and its connection is closed instead."""
    fake = KeepAlive(answer)
    try:
        settings.DOWNSTREAM_URL, settings.OUTBOX_SENDER_SECONDS = fake.url, 30
        held(3)
        assert sender.run()["delivered"] == 3
        assert (fake.posts, len(fake.connections)) == (3, connections)
    finally:
        fake.close()


def staff_viewer(org):
    user = UserFactory(is_staff=True, org=org)
    user.user_permissions.add(Permission.objects.get(codename="view_entry"))
    return user


def assert_secret_nowhere(client, org, caplog):
    """Not in last_error, the log (at DEBUG too: urllib3 would name the request target there), the admin."""
    entry = Entry.objects.get()
    assert entry.last_error, "the try failed and says why"
    assert SECRET not in entry.last_error and "api_key" not in entry.last_error
    assert SECRET not in caplog.text
    client.force_login(staff_viewer(org))
    for url in (reverse("admin:outbox_entry_changelist"), reverse("admin:outbox_entry_change", args=[entry.pk])):
        page = client.get(url)
        assert page.status_code == 200 and SECRET not in page.content.decode()


def test_a_connection_error_names_the_host_only(downstream, settings, held, org, client, caplog):
    settings.DOWNSTREAM_URL = f"http://127.0.0.1:{free_port()}/ingest?api_key={SECRET}"
    held(1)
    with caplog.at_level(logging.DEBUG):
        assert sender.run()["failed"] == 1
    assert "ConnectionError" in Entry.objects.get().last_error
    assert_secret_nowhere(client, org, caplog)


def test_an_http_error_that_echoes_the_url_names_the_host_only(downstream, settings, held, org, client, caplog):
    echo = Echo(status=404)
    try:
        settings.DOWNSTREAM_URL = f"{echo.url}?api_key={SECRET}"
        held(1)
        with caplog.at_level(logging.DEBUG):
            assert sender.run()["failed"] == 1
        assert Entry.objects.get().last_error.startswith("HTTP 404: no route for POST")
        assert_secret_nowhere(client, org, caplog)
    finally:
        echo.close()


def test_a_redirect_to_a_url_with_a_key_names_its_host_only(downstream, held, org, client, caplog):
    downstream.answers = [f"redirect:http://127.0.0.1:9/elsewhere?api_key={SECRET}"]
    held(1)
    with caplog.at_level(logging.DEBUG):
        assert sender.run()["failed"] == 1
    assert "http://127.0.0.1:9" in Entry.objects.get().last_error
    assert_secret_nowhere(client, org, caplog)


def test_a_doubled_delivery_counts_once(downstream, held):
    """Two senders, one entry (the first's lease expired): both get a 2xx, only the deleting one counts it."""
    held(1)
    first = entries.claim("first")
    Entry.objects.update(lease_until=timezone.now() - timedelta(seconds=1))  # its lease ran out
    second = entries.claim("second")
    assert second is not None and second.id == first.id

    late, successor = sender.Report(), sender.Report()
    sender.deliver_one(second, successor)
    sender.deliver_one(first, late)  # its 2xx came too, after the entry was gone

    assert (successor.delivered, late.delivered) == (1, 0)
    assert len(downstream.requests) == 2 and len(downstream.keys()) == 1

"""Failing mailboxes are retried later and later, in SQL; a success puts them back on their interval."""

import re
from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone

from mailpoll.admin.forms import MailboxForm
from mailpoll.models import Mailbox
from mailpoll.sync.poller import Poller
from tests.mailpoll.factories import MailboxFactory, mail

pytestmark = pytest.mark.django_db

MINUTE = timedelta(minutes=1)


def backoff_after(mailbox, failures_before: int, *, backoff=True) -> timedelta | None:
    """The wait RECORD_POLL_FAILURE sets after one more failure, from the attempt's start."""
    polled_at = timezone.now() - timedelta(seconds=5)
    Mailbox.objects.filter(pk=mailbox.pk).update(consecutive_failures=failures_before, last_polled_at=polled_at,
                                                 next_attempt_at=None, last_error_at=None)
    assert Poller().mailbox_poll.record_failure(mailbox, "boom", backoff=backoff)
    mailbox.refresh_from_db()
    assert mailbox.consecutive_failures == failures_before + 1
    return mailbox.next_attempt_at and mailbox.next_attempt_at - polled_at


@pytest.mark.parametrize("interval, failures_before, backoff_max, expected", [
    (2 * MINUTE, 0, 3600, 2 * MINUTE),      # a first failure: the usual interval
    (2 * MINUTE, 1, 3600, 4 * MINUTE),      # then doubling...
    (2 * MINUTE, 2, 3600, 8 * MINUTE),
    (2 * MINUTE, 4, 3600, 32 * MINUTE),
    (2 * MINUTE, 5, 3600, 60 * MINUTE),     # ...up to the cap
    (2 * MINUTE, 500, 3600, 60 * MINUTE),   # no overflow however long it fails
    (2 * MINUTE, 3, 300, 5 * MINUTE),       # the cap is a setting
    (2 * 60 * MINUTE, 3, 3600, 120 * MINUTE),  # never sooner than the mailbox's own interval
])
def test_the_wait_doubles_with_each_consecutive_failure_up_to_the_cap(settings, interval, failures_before,
                                                                     backoff_max, expected):
    settings.MAILPOLL_BACKOFF_MAX = backoff_max
    mailbox = MailboxFactory(poll_interval=interval)
    assert backoff_after(mailbox, failures_before) == expected


def test_a_failure_of_a_folder_or_a_message_is_no_reason_to_back_off():
    mailbox = MailboxFactory()
    assert backoff_after(mailbox, 3, backoff=False) is None


@pytest.mark.parametrize("polled_ago, next_attempt_in, due", [
    (3 * MINUTE, None, True),           # interval passed, no backoff
    (1 * MINUTE, None, False),          # interval not passed
    (3 * MINUTE, 5 * MINUTE, False),    # interval passed, backing off
    (9 * MINUTE, -1 * MINUTE, True),    # backoff over
    (None, 30 * MINUTE, True),          # "Poll now" (or never polled) overrides the backoff
])
def test_the_claim_honours_the_backoff(polled_ago, next_attempt_in, due):
    mailbox = MailboxFactory(poll_interval=2 * MINUTE)
    now = timezone.now()
    Mailbox.objects.filter(pk=mailbox.pk).update(
        last_polled_at=None if polled_ago is None else now - polled_ago,
        next_attempt_at=None if next_attempt_in is None else now + next_attempt_in)
    assert (mailbox.pk in Poller().claim_due()) is due


def test_a_wrong_password_backs_off_and_a_success_resets(dovecot, imap_mailbox, settings):
    mailbox = imap_mailbox(poll_interval=2 * MINUTE)
    real = mailbox.get_secret()
    mailbox.set_secret("wrong")
    mailbox.save()

    waits = []
    for _ in range(3):
        Mailbox.objects.filter(pk=mailbox.pk).update(last_polled_at=None)  # Poll now
        Poller().cycle()
        mailbox.refresh_from_db()
        waits.append(mailbox.next_attempt_at - mailbox.last_polled_at)
        assert "login" in mailbox.last_error.lower()
    assert waits == [2 * MINUTE, 4 * MINUTE, 8 * MINUTE]
    # Backing off: its interval has passed, but the claim leaves it alone.
    Mailbox.objects.filter(pk=mailbox.pk).update(last_polled_at=timezone.now() - 3 * MINUTE)
    assert Poller().cycle() == []

    mailbox.set_secret(real)
    mailbox.save()
    dovecot.append(mailbox.username, "INBOX", mail("back"))
    Mailbox.objects.filter(pk=mailbox.pk).update(last_polled_at=None)  # Poll now
    assert Poller().cycle() == [mailbox.pk]
    mailbox.refresh_from_db()
    assert mailbox.consecutive_failures == 0 and mailbox.next_attempt_at is None


def test_a_failure_recorded_late_never_hides_a_newer_state():
    """What a failure kept through a database outage may change once it is written."""
    mailbox = MailboxFactory()
    now = timezone.now()
    Mailbox.objects.filter(pk=mailbox.pk).update(last_success_at=now, consecutive_failures=0)
    assert Poller().mailbox_poll.record_failure(mailbox, "old: timed out", failed_at=now - MINUTE)
    mailbox.refresh_from_db()
    # A success came after it: its trace is kept, but it neither counts nor backs off.
    assert mailbox.last_error == "old: timed out" and mailbox.last_error_at == now - MINUTE
    assert mailbox.consecutive_failures == 0 and mailbox.next_attempt_at is None

    Poller().mailbox_poll.record_failure(mailbox, "new: refused", failed_at=now)
    Poller().mailbox_poll.record_failure(mailbox, "older still", failed_at=now - 2 * MINUTE)
    mailbox.refresh_from_db()
    assert mailbox.last_error == "new: refused"


@pytest.mark.parametrize("seconds", [0, -60])
def test_a_poll_interval_of_zero_or_less_is_refused(seconds):
    mailbox = MailboxFactory()
    with pytest.raises(IntegrityError, match="mailbox_poll_interval_positive"), transaction.atomic():
        Mailbox.objects.filter(pk=mailbox.pk).update(poll_interval=timedelta(seconds=seconds))
    form = MailboxForm(data={"poll_interval": str(seconds)})
    assert not form.is_valid() and "poll_interval" in form.errors


def test_the_admin_shows_when_a_backing_off_mailbox_is_tried_next(admin_client):
    mailbox = MailboxFactory(poll_interval=2 * MINUTE)
    Mailbox.objects.filter(pk=mailbox.pk).update(
        last_polled_at=timezone.now() - MINUTE, consecutive_failures=4, last_error="x:993 INBOX: TimeoutError",
        next_attempt_at=timezone.now() + 31 * MINUTE)
    listing = admin_client.get(reverse("admin:mailpoll_mailbox_changelist")).content.decode()
    assert "Next try at" in listing
    assert re.search(r"in 3[01] min \(backing off after 4 failures\)", listing)
    page = admin_client.get(reverse("admin:mailpoll_mailbox_change", args=[mailbox.pk])).content.decode()
    assert "backing off after 4 failures" in page

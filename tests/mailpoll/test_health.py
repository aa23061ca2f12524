"""Mailbox health (``mailpoll.health``): one rule, as a function and as the filters that must agree with it."""

import pytest
from django.utils import timezone

from mailpoll.health import DISABLED, FAILING, FILTERS, HEALTHY, NEVER, Health, health
from mailpoll.models import Mailbox
from tests.mailpoll.factories import MailboxFactory

SUCCEEDED = "a success"

CASES = [
    # enabled, consecutive failures, last success, health
    (False, 0, None, Health(DISABLED, "disabled")),
    (False, 3, SUCCEEDED, Health(DISABLED, "disabled")),  # disabled hides any failure
    (True, 3, SUCCEEDED, Health(FAILING, "failing 3 in a row")),  # an old success does not make it healthy
    (True, 1, None, Health(FAILING, "failing 1 in a row")),
    (True, 0, None, Health(NEVER, "never polled")),
    (True, 0, SUCCEEDED, Health(HEALTHY, "OK")),
]


@pytest.mark.parametrize("enabled, failures, last_success, expected", CASES)
def test_health_of_a_mailbox(enabled, failures, last_success, expected):
    assert health(enabled, failures, timezone.now() if last_success else None) == expected


@pytest.mark.django_db
@pytest.mark.parametrize("enabled, failures, last_success, expected", CASES)
def test_the_filters_select_exactly_the_mailboxes_in_that_state(enabled, failures, last_success, expected):
    mailbox = MailboxFactory(enabled=enabled, consecutive_failures=failures,
                             last_success_at=timezone.now() if last_success else None)

    matching = {state for state, condition in FILTERS.items() if Mailbox.objects.filter(condition, pk=mailbox.pk)}

    assert matching == {expected.state}

"""The retry delay (an outbox document's next try, a live loop's reconnect): doubles from the first, capped."""

import pytest

from seoinsight.backoff import doubling


@pytest.mark.parametrize(("attempts", "base", "maximum", "expected"), [
    (0, 10, 3600, 0),
    (1, 10, 3600, 10),
    (2, 10, 3600, 20),
    (3, 10, 3600, 40),
    (9, 10, 3600, 2560),
    (10, 10, 3600, 3600),
    (50, 10, 3600, 3600),
    (10_000, 10, 3600, 3600),  # no overflow for an entry that failed for weeks
    (1, 0.2, 1, 0.2),
    (4, 0.2, 1, 1),
    # The project's callers, each with its own first and cap (their jitter, if any, is theirs):
    (5, 0.5, 10, 8),  # importfile --wait reconnecting (imports.cli)
    (6, 0.5, 10, 10),
    (6, 0.5, 15, 15),  # the worker's database outage (jobs.worker), before its ±25 %
    (5, 0.1, 3, 1.6),  # a deadlock's next try (imports.conflicts), before its half-to-all draw
    (6, 0.1, 3, 3),
    (6, 1, 60, 32),  # the Search Console API (imports.searchconsole_client)
    (7, 1, 60, 60),
    (6, 1, 32, 32),  # Gmail throttling (mailpoll.providers.gmail_rules), which then waits half to all of it
])
def test_delay_doubles_from_the_base_up_to_the_maximum(attempts, base, maximum, expected):
    assert doubling(attempts, base, maximum) == pytest.approx(expected)

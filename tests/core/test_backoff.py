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
])
def test_delay_doubles_from_the_base_up_to_the_maximum(attempts, base, maximum, expected):
    assert doubling(attempts, base, maximum) == pytest.approx(expected)

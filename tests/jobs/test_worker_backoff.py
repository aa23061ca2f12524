"""The worker's wait after a failed turn of its loop: seoinsight.backoff.doubling, then ±25 % of jitter."""

import pytest

from jobs.worker import BACKOFF_FIRST, BACKOFF_MAX, Worker
from seoinsight.backoff import doubling


def test_the_wait_doubles_per_failure_up_to_the_cap_with_a_quarter_of_jitter():
    worker = Worker(burst=True, listen=False)
    for failures in range(1, 12):
        wait = worker._next_backoff()
        step = doubling(failures, BACKOFF_FIRST, BACKOFF_MAX)
        assert 0.75 * step <= wait <= 1.25 * step
    assert step == BACKOFF_MAX


@pytest.mark.parametrize(("failures", "step"), [(1, 0.5), (2, 1.0), (3, 2.0), (5, 8.0), (6, 15.0), (40, 15.0)])
def test_the_steps_are_the_ones_the_worker_always_waited(failures, step):
    assert doubling(failures, BACKOFF_FIRST, BACKOFF_MAX) == step

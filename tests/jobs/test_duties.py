"""Periodic duties (jobs.duties): every long-running worker runs each at its interval from a thread of its
own, a failing duty does not stop the others, and a burst worker runs none."""

import threading

import pytest
from django.db import OperationalError

from jobs import duties
from tests.support.processes import wait_for


def recorder(name, every=0.5, fail=None):
    calls = []

    def func():
        calls.append(threading.current_thread().name)
        if fail is not None:
            raise fail

    return duties.Duty(name, func, every), calls


def test_every_registered_duty_runs_at_once_and_again_at_its_interval():
    fast, fast_calls = recorder("fast", every=0.5)
    slow, slow_calls = recorder("slow", every=3600)
    with duties.registered(fast, slow):
        thread = duties.Duties()
        thread.start()
        try:
            wait_for(lambda: len(fast_calls) >= 3, timeout=10, message="the fast duty run three times")
        finally:
            thread.stop()
    assert slow_calls == ["job-duties"]  # its first turn at start, the next an hour later
    assert set(fast_calls) == {"job-duties"}


@pytest.mark.parametrize("error", [RuntimeError("a bug"), OperationalError("server closed the connection")])
def test_a_failing_duty_is_logged_and_the_others_still_run(error, caplog):
    broken, broken_calls = recorder("broken", fail=error)
    fine, fine_calls = recorder("fine")
    with duties.registered(broken, fine):
        thread = duties.Duties()
        thread.start()
        try:
            wait_for(lambda: len(fine_calls) >= 2 and len(broken_calls) >= 2, timeout=10,
                     message="both duties run again after a failure")
        finally:
            thread.stop()
    assert "duty broken failed" in caplog.text


def test_run_one_says_whether_the_duty_succeeded():
    assert duties.run_one(recorder("ok")[0]) is True
    assert duties.run_one(recorder("bad", fail=ValueError("x"))[0]) is False


def test_an_interval_read_from_a_setting_is_read_at_each_turn_and_never_below_a_tick():
    value = {"every": 10.0}
    duty = duties.Duty("d", lambda: None, lambda: value["every"])
    assert duty.interval() == 10.0
    value["every"] = 0
    assert duty.interval() == duties.TICK


def test_a_burst_worker_runs_no_duty():
    from jobs.worker import Worker

    assert Worker(burst=True, listen=False).duties is None
    assert Worker(burst=False, listen=False).duties is not None


def test_the_outbox_registers_its_duty():
    assert "outbox.wake_if_due" in {d.name for d in duties.all_duties()}

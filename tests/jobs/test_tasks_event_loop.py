"""jobs.event_loop: one loop per process, shared by every thread that runs an async task."""

from __future__ import annotations

import asyncio
import ctypes
import signal
import threading

import pytest

from jobs import event_loop


@pytest.fixture(autouse=True)
def fresh_loop():
    event_loop.stop()
    yield
    event_loop.stop()


async def where_am_i(pause: float = 0.0):
    await asyncio.sleep(pause)
    return threading.current_thread().name, id(asyncio.get_running_loop())


def test_coroutines_of_several_threads_share_one_loop_in_its_own_thread():
    answers, errors = [], []

    def worker():
        try:
            answers.append(event_loop.run(where_am_i(0.05)))
        except BaseException as exc:  # noqa: B036 - reported below, a thread's failure is otherwise lost
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert not errors
    assert len(answers) == 4
    assert {name for name, _ in answers} == {event_loop.THREAD_NAME}
    assert len({loop for _, loop in answers}) == 1
    assert event_loop.run(where_am_i()) == answers[0], "later calls reuse the same loop"


def test_the_coroutines_exception_reaches_the_caller():
    async def boom():
        raise KeyError("inside")

    with pytest.raises(KeyError, match="inside"):
        event_loop.run(boom())
    assert event_loop.run(where_am_i())[0] == event_loop.THREAD_NAME, "the loop survives a failed coroutine"


def sleeps_until_cancelled(cancelled: threading.Event):
    """A coroutine function that sleeps 30 s, setting ``cancelled`` if it is cancelled meanwhile."""

    async def long():
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    return long


def test_a_caller_that_stops_waiting_cancels_its_coroutine():
    cancelled = threading.Event()
    long = sleeps_until_cancelled(cancelled)

    class Interrupt(Exception):
        pass

    def interrupt(signum, frame):
        # What a signal-based timeout does to a handler's thread: an exception raised while it waits.
        raise Interrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        with pytest.raises(Interrupt):
            event_loop.run(long())
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert cancelled.wait(5), "the coroutine kept running after its caller gave up"


def test_running_from_the_loops_own_thread_is_refused():
    async def nested():
        inner = where_am_i()
        with pytest.raises(RuntimeError, match="own thread"):
            event_loop.run(inner)
        return "refused"

    assert event_loop.run(nested()) == "refused"


def test_an_exception_raised_into_the_waiting_thread_from_another_stops_the_wait():
    """As jobs.timeouts stops a handler's thread: PyThreadState_SetAsyncExc, from the watchdog's thread."""
    cancelled = threading.Event()
    long = sleeps_until_cancelled(cancelled)

    class Told(Exception):
        pass

    waiter = threading.get_ident()

    def tell():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(waiter), ctypes.py_object(Told))

    timer = threading.Timer(0.3, tell)
    timer.start()
    try:
        with pytest.raises(Told):
            event_loop.run(long())
    finally:
        timer.cancel()
    assert cancelled.wait(5), "the coroutine kept running after its caller was told to stop"


def test_a_coroutines_own_timeout_error_is_its_result_not_a_wait_slice():
    async def times_out():
        await asyncio.sleep(event_loop.WAIT_SLICE * 2)
        raise TimeoutError("the coroutine's own")

    with pytest.raises(TimeoutError, match="the coroutine's own"):
        event_loop.run(times_out())
